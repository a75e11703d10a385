"""Helpers shared by ``calibrate`` and ``probe``: their common options, the refit-and-write step and its tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from autotune.cli._shared import coefficients_from_option
from autotune.cli.console import console
from autotune.costmodel.calibration import save_coefficients
from autotune.costmodel.fitting import CaseResult
from autotune.costmodel.recalibrate import Collected, Recalibration, recalibrate
from autotune.costmodel.validation import ErrorSummary, summarize
from autotune.errors import ConfigError
from autotune.profiles.user_config import user_calibration_path

OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Calibration YAML to write (default: calibration.yaml in the user config dir, "
        "$AUTOTUNE_CONFIG_DIR or ~/.config/autotune, which plan and estimate then use).",
    ),
]
SeedsOpt = Annotated[
    bool,
    typer.Option(
        "--with-seeds/--without-seeds",
        help="Pool your rows with the shipped seed rows (anchors what your rows do not exercise), or fit "
        "your rows alone.",
    ),
]
NameOpt = Annotated[str | None, typer.Option("--name", help="Calibration name (default: the file name).")]
StartOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="Start the refit from this calibration (default: the one plan uses: yours if any, else the shipped).",
    ),
]


def resolve_output(output: Path | None) -> Path:
    """The file to write; refuses an existing one before anything is measured or fitted.

    Raises:
        ConfigError: the file exists (nothing is overwritten).
    """
    path = output if output is not None else user_calibration_path()
    if path.exists():
        hint = "" if output is not None else " (your current calibration; remove it to replace it)"
        raise ConfigError(f"{path} exists{hint}: choose another path with -o (nothing was overwritten)")
    return path


def fit_and_write(
    collected: Collected, output: Path, *, with_seeds: bool, name: str | None, start_file: Path | None
) -> Recalibration:
    """Refit from ``collected`` (starting at the calibration in use) and write the YAML to ``output``.

    Raises:
        ConfigError: no measurements (after skipping unusable runs), or ``output`` exists.
    """
    if not collected.cases:
        skipped = f" ({len(collected.skipped)} run(s) skipped, see above)" if collected.skipped else ""
        raise ConfigError(f"no measurements to calibrate from{skipped}")
    start, start_name = coefficients_from_option(start_file)
    result = recalibrate(
        collected.cases,
        start,
        start_name=start_name,
        sources=collected.sources,
        with_seeds=with_seeds,
        name=name or output.stem,
    )
    save_coefficients(result.coefficients, output)
    return result


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _pct(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "—"
    return f"{before * 100:.1f}% → {after * 100:.1f}%"


def rows_table(before: Sequence[CaseResult], after: Sequence[CaseResult]) -> Table:
    """Your rows: measured, and predicted before → after the refit (memory GiB, time s, fits verdict)."""
    table = Table(title="Your measurements: measured | predicted before → after", title_justify="left")
    for column in ("row", "memory GiB", "predicted", "time s", "predicted", "fits"):
        table.add_column(column, justify="left" if column in ("row", "fits") else "right", overflow="fold")
    for old, new in zip(before, after, strict=True):
        m = old.case.measurement
        verdict = "OOM" if m.oom else "ran"
        table.add_row(
            m.id,
            "OOM" if m.oom else _gib(old.measured_memory_gib),
            f"{_gib(old.predicted_memory_gib)} → {_gib(new.predicted_memory_gib)}",
            _seconds(old.measured_time_s) + (f" {old.time_kind}" if old.time_kind else ""),
            f"{_seconds(old.predicted_time_s)} → {_seconds(new.predicted_time_s)}",
            f"{verdict}: {_fits(old)} → {_fits(new)}",
        )
    return table


def _fits(result: CaseResult) -> str:
    return "fits" if result.estimate.fits else "OOM"


def summary_lines(label: str, before: ErrorSummary, after: ErrorSummary) -> list[str]:
    """MAPE and verdicts before → after, one line."""
    return [
        f"{label}: memory MAPE {_pct(before.memory_mape_known_kind, after.memory_mape_known_kind)} "
        f"({after.memory_rows} rows), time MAPE {_pct(before.time_mape, after.time_mape)} "
        f"({after.time_rows} rows), fits/OOM verdicts correct {before.verdicts_correct}/{before.verdicts_total}"
        f" → {after.verdicts_correct}/{after.verdicts_total}"
    ]


def render_recalibration(result: Recalibration, output: Path, default_output: bool) -> None:
    """Print the rows table, the error summaries and where the calibration went."""
    console().print(rows_table(result.before, result.after))
    for old in result.before:
        m = old.case.measurement
        console().print(f"  {m.id}: {m.gpu} ×{m.world_size}, {m.model}, seq {m.workload.seq_len}, {m.setting.short()}")
    seeds_before, seeds_after = summarize(result.seeds_before), summarize(result.seeds_after)
    lines = summary_lines("your rows", summarize(result.before), summarize(result.after))
    lines += summary_lines("seed rows", seeds_before, seeds_after)
    for line in lines:
        console().print(line)
    lost = seeds_before.verdicts_correct - seeds_after.verdicts_correct
    if lost > 0:
        console().print(
            f"[yellow]note:[/] {lost} more seed rows get a wrong fits/OOM verdict: the refit follows your stack "
            "and hardware; --with-seeds keeps the coefficients your rows do not pin down anchored to the seeds"
        )
    for line in bound_notes(result):
        console().print(f"[yellow]note:[/] {line}")
    use = (
        "plan and estimate now use it (--calibration FILE overrides)"
        if default_output
        else f"use it with --calibration {output}"
    )
    console().print(f"[green]wrote[/] {output} (calibration '{result.coefficients.name}'); {use}")


UNREACHED_TIME_ERROR = 0.10
"""A row whose time error after the refit is larger than this (10 %) gets a note on what stopped the fit."""


def bound_notes(result: Recalibration) -> list[str]:
    """One line per user row the refit could not bring within :data:`UNREACHED_TIME_ERROR` on time, naming the
    bound that stopped it: the GPU's ``matmul_efficiency`` at its ceiling 1.0 (the datasheet peak; the row ran
    faster than the model can predict), else the coefficients shared with the other rows."""
    lines = []
    for after in result.after:
        error = after.time_error
        if error is None or abs(error) <= UNREACHED_TIME_ERROR:
            continue
        gpu = after.case.cluster.gpu.key
        efficiency = result.coefficients.matmul_efficiency.get(gpu)
        row = after.case.measurement.id
        if efficiency is not None and efficiency >= 0.999 and error > 0:
            lines.append(
                f"{row}: time still {error * 100:+.0f}% after the refit: {gpu}'s matmul_efficiency stopped at its "
                "bound 1.0 (the datasheet peak), so the measured time is faster than the model can predict; "
                "check the GPU, the setting and that the time is per micro-step (micro_step_time_s)"
            )
        else:
            lines.append(
                f"{row}: time still {error * 100:+.0f}% after the refit: the coefficients it moves are shared with "
                "your other rows (and the seeds with --with-seeds), which pull the other way"
            )
    return lines


def print_collected(collected: Collected) -> None:
    """One line per skipped run and per note."""
    for line in collected.skipped:
        console().print(f"[yellow]skipped:[/] {line}")
    for line in collected.notes:
        console().print(f"[yellow]note:[/] {line}")
