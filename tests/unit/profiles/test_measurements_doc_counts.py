"""The row counts docs/cost-model.md states for the shipped measurement sets are the tool's (issue 28: the docs
said 190 seed rows when the tool used 195).

The output the docs quote (``calibrate``'s "seed rows ... (87 rows) ... 169/195") is checked by tools/check_docs.py;
this checks the counts written in prose. When the prose is reworded, move its pattern here with it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune.profiles.measurements import all_measurements, list_measurement_sets

COST_MODEL = Path(__file__).resolve().parents[3] / "docs" / "cost-model.md"


def _stated(pattern: str) -> re.Match[str]:
    found = re.search(pattern, COST_MODEL.read_text(encoding="utf-8"))
    assert found is not None, f"docs/cost-model.md no longer states {pattern!r}: update this test with the prose"
    return found


def _rows(prefix: str) -> int:
    return sum(len(s.measurements) for s in list_measurement_sets() if s.name.startswith(prefix))


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        (r"`src/autotune/profiles/measurements/seed-\*\.yaml`, (\d+) rows transcribed", "seed-"),
        (r"\(`dev-mpt-llm-foundry\.yaml`, (\d+) llm-foundry", "dev-mpt-llm-foundry"),
    ],
)
def test_the_row_count_of_a_source_is_the_tools(pattern: str, prefix: str) -> None:
    assert int(_stated(pattern)[1]) == _rows(prefix) > 0


def test_the_accuracy_sections_total_and_sets_are_the_tools() -> None:
    """§7.1's first line (written by benchmarks/accuracy_report.py): every row ``all_measurements`` returns."""
    stated = _stated(r"(\d+) transcribed rows: seed tables and the MPT development data \(([^)]*)\)")
    assert int(stated[1]) == len(all_measurements())
    assert stated[2].split(", ") == [s.name for s in list_measurement_sets()]
