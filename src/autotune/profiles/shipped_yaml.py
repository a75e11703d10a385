"""One shipped YAML table inside the package → its schema (the interconnects, the evidence table).

Parsed through the derived JSON cache of the shipped files (:mod:`autotune.profiles.shipped_cache`), so a warm
``autotune plan`` imports no PyYAML.
"""

from __future__ import annotations

from importlib import resources
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from autotune.profiles.shipped_cache import load_shipped_yaml
from autotune.validation import format_validation_error

SchemaT = TypeVar("SchemaT", bound=BaseModel)


def load_shipped(file_name: str, schema: type[SchemaT], what: str) -> SchemaT:
    """``autotune/profiles/<file_name>`` validated as ``schema``.

    Raises:
        ValueError: the shipped file is malformed (a packaging bug, not a user error).
    """
    text = resources.files("autotune.profiles").joinpath(file_name).read_text(encoding="utf-8")
    data = load_shipped_yaml(what, file_name, text)
    if not isinstance(data, dict):
        raise ValueError(f"profiles/{file_name}: not a mapping of {what}")
    try:
        return schema.model_validate(data)
    except ValidationError as error:  # not yamlio.validate: that module imports PyYAML, which a warm start skips
        raise ValueError(f"profiles/{file_name}: {format_validation_error(error, schema)}") from None
