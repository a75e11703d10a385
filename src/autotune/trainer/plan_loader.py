"""Read the plan file the run must follow.

Uses the launcher's ``load_plan`` (the one plan reader of the project) when it is present; otherwise
the same three steps: ``yaml.safe_load`` → ``schemas.plan.migrate`` → ``PlanFile.model_validate``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from autotune.errors import ConfigError
from autotune.schemas.plan import PlanFile, migrate


def load_plan(path: Path) -> PlanFile:
    """Load and validate ``path``.

    Raises:
        ConfigError: missing file, malformed YAML, unknown keys or wrong types (one line naming the file).
    """
    try:
        from autotune.launcher.plan_io import load_plan as launcher_load_plan
    except ImportError:
        return _load_plan_here(path)
    return launcher_load_plan(path)


def _load_plan_here(path: Path) -> PlanFile:
    if not path.is_file():
        raise ConfigError(f"plan file {path} not found")
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"plan file {path} is not valid YAML: {' '.join(str(error).split())}") from error
    if not isinstance(data, dict):
        raise ConfigError(f"plan file {path} does not hold a mapping: is it a plan written by 'autotune plan -o'?")
    try:
        data = migrate(data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from error
    try:
        return PlanFile.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in error.errors()
        )
        raise ConfigError(f"plan file {path} is invalid: {problems}") from error
