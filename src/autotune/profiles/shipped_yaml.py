"""One shipped YAML table inside the package → its schema (the interconnects, the evidence table)."""

from __future__ import annotations

from importlib import resources
from typing import TypeVar

from pydantic import BaseModel

from autotune.errors import ConfigError
from autotune.yamlio import parse_mapping, validate

SchemaT = TypeVar("SchemaT", bound=BaseModel)


def load_shipped(file_name: str, schema: type[SchemaT], what: str) -> SchemaT:
    """``autotune/profiles/<file_name>`` validated as ``schema``.

    Raises:
        ValueError: the shipped file is malformed (a packaging bug, not a user error).
    """
    text = resources.files("autotune.profiles").joinpath(file_name).read_text(encoding="utf-8")
    try:
        return validate(schema, parse_mapping(text, file_name, what), what, what)
    except ConfigError as error:
        raise ValueError(f"profiles/{file_name}: {error}") from None
