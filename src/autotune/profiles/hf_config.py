"""Build a :class:`~autotune.schemas.ModelSpec` from a Hugging Face ``config.json`` (json + pydantic only).

Reading and checking the file is here; what each ``model_type`` means (exact and generic families, their
defaults, the stated count tolerance) is in :mod:`autotune.profiles.families`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autotune import yamlio
from autotune.errors import ConfigError
from autotune.profiles.families import FAMILIES, ConfigView, generic_fields
from autotune.schemas.model import ModelSpec
from autotune.validation import format_validation_error

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def _read_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    given = Path(path).expanduser()
    if given.is_dir():
        config_path = given / "config.json"
        if not config_path.is_file():
            raise ConfigError(f"{given.resolve()}: directory has no config.json")
    elif given.is_file():
        config_path = given
    else:
        raise ConfigError(f"{given}: no such file or directory (expected a config.json or its directory)")
    config_path = config_path.resolve()
    raw = yamlio.parse_json(yamlio.read_text_file(config_path, "config.json"), str(config_path), "config.json")
    if not isinstance(raw, dict):
        raise ConfigError(f"{config_path}: expected a JSON object, got {type(raw).__name__}")
    return config_path, raw


def model_spec_from_config(path: str | Path) -> ModelSpec:
    """Read a Hugging Face ``config.json`` (or a directory holding one) into a :class:`ModelSpec`.

    ``key`` is the directory name for ``<dir>/config.json`` (else the file stem), ``source`` the
    absolute path of the file, ``hf_repo_id`` the config's ``_name_or_path`` when it looks like
    ``org/name``. Families and defaults are described in the module docstring.

    Raises:
        ConfigError: missing file, directory without config.json, unreadable or invalid JSON, a
            non-object document, a missing/non-integer/non-positive required key, or shapes that do
            not form a valid model (e.g. heads not a multiple of KV heads). One line naming the path.
    """
    config_path, raw = _read_config(path)
    cfg = ConfigView(raw, config_path)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError(f"{config_path}: missing or empty 'model_type'")
    fields = FAMILIES.get(model_type, generic_fields)(cfg)
    key = config_path.parent.name if config_path.name == "config.json" else config_path.stem
    name_or_path = raw.get("_name_or_path")
    repo_id = name_or_path if isinstance(name_or_path, str) and _HUB_ID.match(name_or_path) else None
    window = raw.get("sliding_window")
    if isinstance(window, int) and window > 0 and raw.get("use_sliding_window", True) is not False:
        fields.setdefault("sliding_window", window)
    try:
        return ModelSpec(key=key, hf_repo_id=repo_id, model_type=model_type, source=str(config_path), **fields)
    except ValidationError as exc:
        raise ConfigError(
            f"{config_path}: not a valid model config ({format_validation_error(exc, ModelSpec)})"
        ) from exc
