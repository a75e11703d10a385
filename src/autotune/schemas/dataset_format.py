"""What a training dataset must hold for each format.

One home for the launcher's pre-flight check and the training core.

- instruction: ``instruction``, optional ``input``, ``output`` (the Stanford Alpaca layout);
- chat: ``messages`` = a list of ``{"role", "content"}``;
- text: ``text`` (continued pre-training).
"""

from __future__ import annotations

from typing import Final

from autotune.errors import ConfigError

EXPECTED_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    "instruction": ("instruction", "output"),
    "chat": ("messages",),
    "text": ("text",),
}
"""Columns each format needs (instruction may also have ``input``)."""

DATASET_LOADERS: Final[dict[str, str]] = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".txt": "text"}
"""Local file suffix → the ``datasets`` builder that reads it (``datasets.load_dataset(builder, data_files=...)``)."""


def detect_format(columns: list[str], requested: str, name: str) -> str:
    """Return the format of a dataset with these columns: ``requested`` if given and matching, else detected.

    Raises:
        ConfigError: the columns do not hold what the format needs (names the file, found and expected columns).
    """
    found = set(columns)
    expected_text = "; ".join(f"{fmt}: {', '.join(cols)}" for fmt, cols in EXPECTED_COLUMNS.items())
    if requested != "auto":
        missing = [col for col in EXPECTED_COLUMNS[requested] if col not in found]
        if missing:
            raise ConfigError(
                f"dataset {name} has columns {sorted(found)}, but format {requested} needs "
                f"{', '.join(EXPECTED_COLUMNS[requested])} (missing {', '.join(missing)})"
            )
        return requested
    matches = [fmt for fmt, cols in EXPECTED_COLUMNS.items() if set(cols) <= found]
    if not matches:
        raise ConfigError(f"dataset {name} has columns {sorted(found)}, expected one of the formats ({expected_text})")
    if len(matches) > 1:
        raise ConfigError(
            f"dataset {name} has columns {sorted(found)}, which fit formats {', '.join(matches)}; "
            "choose one with --dataset-format"
        )
    return matches[0]
