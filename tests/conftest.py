"""Test-wide fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point autotune's user config dir at an empty temporary directory, so a developer's own
    calibration never changes what the tests see."""
    directory = tmp_path_factory.mktemp("autotune-config")
    monkeypatch.setenv("AUTOTUNE_CONFIG_DIR", str(directory))
    return directory


@pytest.fixture(autouse=True)
def _isolated_user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point autotune's cache dir (the parsed-catalog cache) at an empty temporary directory, so the tests
    never write to the developer's ~/.cache."""
    directory = tmp_path_factory.mktemp("autotune-cache")
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(directory))
    return directory
