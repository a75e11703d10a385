"""A stand-in ``sky`` package (SkyPilot) whose schema check records each task and raises a given error.

SkyPilot is an optional extra the tests' environment does not install; this stands in for the two functions
:func:`autotune.launcher.skypilot.skypilot_schema_error` calls (``sky.utils.schemas.get_task_schema`` and
``sky.utils.common_utils.validate_schema``), so that the code around them runs for real.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import Any

import pytest

SCHEMA: dict[str, Any] = {"type": "object"}


def install_fake_sky(monkeypatch: pytest.MonkeyPatch, error: Exception | None) -> list[dict[str, Any]]:
    """Put a fake ``sky`` in ``sys.modules`` (undone by ``monkeypatch``); returns the tasks its check was given."""
    seen: list[dict[str, Any]] = []

    def validate_schema(config: dict[str, Any], schema: dict[str, Any], prefix: str) -> None:
        seen.append(config)
        assert schema is SCHEMA and prefix == ""
        if error is not None:
            raise error

    modules = {
        name: types.ModuleType(name) for name in ("sky", "sky.utils", "sky.utils.schemas", "sky.utils.common_utils")
    }
    for name, module in modules.items():
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, module)
    modules["sky.utils.schemas"].get_task_schema = lambda: SCHEMA  # type: ignore[attr-defined]
    modules["sky.utils.common_utils"].validate_schema = validate_schema  # type: ignore[attr-defined]
    return seen
