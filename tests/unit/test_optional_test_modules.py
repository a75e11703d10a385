"""The test modules collected only where an optional package is installed (``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import NOT_COLLECTED, OPTIONAL_TEST_MODULES, collect_ignore, not_collected_lines

TESTS = Path(__file__).resolve().parents[1]


def test_every_optional_module_exists_and_names_its_package() -> None:
    for module, (package, why) in OPTIONAL_TEST_MODULES.items():
        assert (TESTS / module).is_file(), module  # a renamed module would otherwise be collected and fail
        assert package and why


def test_what_is_not_collected_is_said_at_the_end_of_the_session() -> None:
    assert collect_ignore == list(NOT_COLLECTED)
    header = not_collected_lines()
    assert len(header) == len(NOT_COLLECTED)
    assert all(line.startswith("not collected: tests/") for line in header)
