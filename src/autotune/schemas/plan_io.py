"""Read and write plan files (``plan.yaml``): YAML of :class:`autotune.schemas.plan.PlanFile`.

Reading is ``yaml.safe_load`` → :func:`autotune.schemas.plan.migrate` → pydantic validation; every
problem (missing file, malformed YAML, unknown keys, wrong types, a newer schema) becomes one
:class:`~autotune.errors.ConfigError` line that names the file. Writing never replaces an existing
file unless asked to. Pure and light (PyYAML + pydantic): the training core imports this module too.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from autotune import yamlio
from autotune.errors import ConfigError
from autotune.fileio import write_atomic
from autotune.schemas.plan import PlanFile, migrate

_HEADER = (
    "# autotune plan: read by `autotune launch` and by the training core (python -m autotune.trainer).\n"
    "# Unknown keys are rejected; override fields at launch with --set key=value.\n"
)


def plan_to_yaml(plan: PlanFile) -> str:
    """Serialize a plan to YAML text (a comment header, then the fields in schema order).

    The output is deterministic, and :func:`plan_from_yaml` of it gives back an equal plan.
    """
    data = plan.model_dump(mode="json")
    return _HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def plan_from_yaml(text: str, source: str) -> PlanFile:
    """Parse, migrate and validate plan YAML text.

    Args:
        text: the YAML document.
        source: what to call the text in error messages (usually the file path).

    Raises:
        ConfigError: malformed YAML, not a mapping, no/newer ``schema_version``, unknown keys or
            invalid values; one line starting with ``source``.
    """
    data = yamlio.parse_mapping(text, source, "a plan file")
    try:
        data = migrate(data)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    return yamlio.validate(PlanFile, data, source, "plan")


def load_plan(path: str | Path) -> PlanFile:
    """Load a plan file written by ``autotune plan -o`` (or by ``autotune launch`` into a run directory).

    Raises:
        ConfigError: the file is missing, unreadable, malformed or invalid (one line naming it).
    """
    return plan_from_yaml(yamlio.read_text_file(path, "plan file"), str(path))


def save_plan(plan: PlanFile, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``plan`` as YAML to ``path`` and return the path.

    Written atomically (:func:`autotune.fileio.write_atomic`); without ``overwrite`` an existing
    file is never replaced, even by a concurrent writer.

    Raises:
        InvalidRequestError: ``path`` exists and ``overwrite`` is false.
        ConfigError: the directory does not exist or the file cannot be written.
    """
    return write_atomic(path, plan_to_yaml(plan), overwrite=overwrite, what="plan")
