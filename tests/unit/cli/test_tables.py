"""Output at 80 columns and in a pipe: identifiers and numbers are printed whole, never ellipsised."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run

from autotune.cli.console import console
from autotune.cli.tables import Column, fit_columns, table_width
from autotune.costmodel.params import count_params
from autotune.profiles.catalog import list_gpus, list_models
from autotune.profiles.measurements import all_measurements

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """stdout behaves as an 80-column terminal (rich's TTY_COMPATIBLE; colours off)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")
    console.cache_clear()
    yield
    console.cache_clear()


@pytest.fixture
def pipe(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """stdout is a pipe, with COLUMNS=80 exported (it must not narrow the output)."""
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    console.cache_clear()
    yield
    console.cache_clear()


def _lines(out: str) -> list[str]:
    return ANSI.sub("", out).splitlines()


def _words(out: str) -> set[str]:
    return {word.strip(",;()") for line in _lines(out) for word in line.replace("│", " ").split()}


def _assert_fits_80(out: str) -> None:
    lines = _lines(out)
    assert "…" not in "\n".join(lines)
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)


def test_gpus_at_80_columns_shows_every_key_whole(capsys, terminal) -> None:
    code, out, _ = run(capsys, "gpus")
    assert code == 0
    _assert_fits_80(out)
    assert {gpu.key for gpu in list_gpus()} <= _words(out)
    assert "not shown at 80 columns" in out


def test_models_at_80_columns_shows_every_key_whole(capsys, terminal) -> None:
    code, out, _ = run(capsys, "models")
    assert code == 0
    _assert_fits_80(out)
    words = _words(out)
    for model in list_models():
        assert model.key in words
        assert f"{count_params(model).total_params / 1e9:.2f}" in words


def test_piped_catalogs_are_complete(capsys, pipe) -> None:
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "…" not in out and "not shown" not in out
    for gpu in list_gpus():
        line = next(line for line in _lines(out) if f" {gpu.key} " in line)
        assert gpu.name in line and all(alias in line for alias in gpu.aliases)
    code, out, _ = run(capsys, "models")
    words = _words(out)
    assert all(m.key in words and (m.hf_repo_id or "—") in words for m in list_models())


def test_validate_at_80_columns_shows_row_ids_and_readable_times(capsys, terminal) -> None:
    code, out, _ = run(capsys, "validate")
    assert code == 0
    _assert_fits_80(out)
    words = _words(out)
    assert {m.id for m in all_measurements()} <= words


def test_piped_validate_writes_times_like_the_docs(capsys, pipe) -> None:
    code, out, _ = run(capsys, "validate")
    assert code == 0
    assert "e+" not in out and "…" not in out
    assert re.search(r"\d+\.\d min", out) and re.search(r"\d\.\d\d h", out)


def test_plan_run_hint_is_one_copyable_line(capsys, terminal, tmp_path: Path) -> None:
    output = tmp_path / ("a-long-directory-name-" * 3) / "plan.yaml"
    output.parent.mkdir()
    code, out, _ = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "-o", str(output))
    assert code == 0
    assert f"autotune launch {output} --dataset DATA --output-dir RUN" in _lines(out)[-1]
    assert "…" not in out


def test_fit_columns_drops_by_order_then_the_table_fits() -> None:
    columns = [Column("key"), Column("a", drop_order=1), Column("b", drop_order=2), Column("pct", "right")]
    rows = [["x" * 50, "1" * 10, "2" * 10, "10.25%"]]
    keep, dropped = fit_columns(columns, rows, 80)
    assert keep == [0, 1, 3] and dropped == ["b"]
    assert table_width([columns[i] for i in keep], [[rows[0][i] for i in keep]]) <= 80
    assert fit_columns(columns, rows, 200) == ([0, 1, 2, 3], [])


def test_too_narrow_for_any_table_prints_records(capsys, terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.cli.tables import print_table

    monkeypatch.setenv("COLUMNS", "30")
    console.cache_clear()
    print_table("T", [Column("id"), Column("pct", "right")], [["an-identifier-of-40-characters-long-xxxx", "10.25%"]])
    out = capsys.readouterr().out
    assert "an-identifier-of-40-characters-long-xxxx" in _lines(out)
    assert "pct: 10.25%" in out
