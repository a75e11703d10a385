"""Helpers shared by ``calibrate`` and ``probe``: their common options, the refit-and-write step and its tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from autotune.calibration.cases import check_measured_ranges
from autotune.calibration.coverage import corner
from autotune.calibration.recalibrate import Collected, Recalibration, recalibrate
from autotune.calibration.results import CaseResult
from autotune.calibration.row_fields import moving_fields
from autotune.calibration.stack_fit import StackEvidence
from autotune.calibration.validation import ErrorSummary, summarize
from autotune.cli.console import console
from autotune.costmodel.calibration import save_coefficients
from autotune.costmodel.time_correction import far_variance, log_correction, time_band
from autotune.errors import ConfigError
from autotune.profiles.user_config import user_calibration_path
from autotune.schemas.calibration import TIME_SCALE_MAX, TIME_SCALE_MIN, CostCoefficients
from autotune.schemas.time_correction import LocalTimeCorrection
from autotune.session.calibration_choice import coefficients_from_option

CONFIG_DIR_EPILOG = (
    "The user config dir is the first of: $AUTOTUNE_CONFIG_DIR; $XDG_CONFIG_HOME/autotune (when XDG_CONFIG_HOME is "
    "an absolute path); ~/.config/autotune. plan, estimate and validate use the calibration.yaml in it."
)
"""The help epilog of ``calibrate`` and ``probe``: the config-dir order of :mod:`autotune.profiles.user_config`, at
the help's full width (an option's help column is too narrow for the paths)."""

OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Calibration YAML to write (default: calibration.yaml in the user config dir, see below).",
    ),
]
SeedsOpt = Annotated[
    bool,
    typer.Option(
        "--with-seeds/--without-seeds",
        help="Redo the whole time fit on your rows pooled with the seed rows, or fit your rows alone: a stack "
        "factor, and terms only where your rows vary them (see docs: calibration).",
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
) -> tuple[Recalibration, CostCoefficients]:
    """Refit from ``collected`` (starting at the calibration in use) and write the YAML to ``output``.

    Returns the refit and the coefficients it started from.

    Raises:
        ConfigError: no measurements (after skipping unusable runs), a measured figure out of range for its GPU
            (:func:`autotune.calibration.cases.check_measured_ranges`), or ``output`` exists.
    """
    check_measured_ranges(collected.cases)
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
    return result, start


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _pct(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "—"
    return f"{before * 100:.1f}% → {after * 100:.1f}%"


ROWS_SHOWN = 40
"""Rows the table and the notes name one by one; a longer file's other rows count in the summaries."""


def rows_table(before: Sequence[CaseResult], after: Sequence[CaseResult]) -> Table:
    """Your rows: measured, and predicted before → after the refit (memory GiB, time s, fits verdict).

    The first :data:`ROWS_SHOWN` rows, then one line counting the others.
    """
    hidden = max(len(before) - ROWS_SHOWN, 0)
    title = "Your measurements: measured | predicted before → after"
    caption = f"… and {hidden:,} more rows (in the summaries below)" if hidden else None
    table = Table(title=title, title_justify="left", caption=caption)
    for column in ("row", "memory GiB", "predicted", "time s", "predicted", "fits"):
        table.add_column(column, justify="left" if column in ("row", "fits") else "right", overflow="fold")
    for old, new in zip(before[:ROWS_SHOWN], after[:ROWS_SHOWN], strict=True):
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


BAND_FIELDS = ("memory_error_band", "memory_headroom_band", "time_error_band")
"""Coefficients that are error bands (a refit only widens them), not part of a prediction."""

NOT_PREDICTING = ("schema_version", "name", "source", "stack_time_factor", "local_time_correction", *BAND_FIELDS)
"""Fields of a calibration that no prediction uses (``stack_time_factor`` is a diagnostic of the fit), and the local
time correction, which is no single number and is explained on its own line (:func:`coverage_lines`)."""


def moved_coefficients(
    start: CostCoefficients, fitted: CostCoefficients, fields: Sequence[str] = (), *, down: bool | None = None
) -> list[str]:
    """'name[key] a → b' for every coefficient the refit changed at 3 significant figures.

    ``fields``: only these; else every coefficient a prediction uses, :data:`NOT_PREDICTING` left out. ``down``: only
    the values that went down (True) or up, new entries included (False); None = both.
    """
    before, after = start.model_dump(), fitted.model_dump()
    names = fields or [n for n in before if n not in NOT_PREDICTING]
    moved = []
    for field in names:
        a, b = before[field], after[field]
        pairs = (
            [(f"{field}[{key}]", a.get(key), b.get(key)) for key in sorted(set(a) | set(b))]
            if isinstance(a, dict)
            else [(field, a, b)]
        )
        for name, old, new in pairs:
            if _number(old) == _number(new):
                continue
            if down is not None and (old is not None and new is not None and new < old) != down:
                continue
            moved.append(
                f"{name} {_number(new)} (new entry)" if old is None else f"{name} {_number(old)} → {_number(new)}"
            )
    return moved


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def stack_kept_line(evidence: StackEvidence, time_scale: float) -> str:
    """Why the stack factor kept its start value: the rows' offset is within their scatter and the corner's error."""
    return (
        f"kept: time_scale {_number(time_scale)}, the stack factor: your rows' offset from the start is within what "
        "their own scatter and the start's error in the part of the setting space they cover allow (measured / "
        f"predicted ×{math.exp(evidence.mean_log_ratio):.3f} on average, standard error "
        f"±{evidence.standard_error * 100:.0f} %; probability that the start describes your stack "
        f"{evidence.same_stack_probability:.2f}), so a factor fitted to them would add their setting-dependent error; "
        "rows further off, further apart, or more of them, move it"
    )


def stack_moved_line(evidence: StackEvidence, start_scale: float, fitted_scale: float) -> str:
    """Why the stack factor moved: the rows favour another stack, beyond their own scatter and a setting's error."""
    return (
        f"moved: time_scale {_number(start_scale)} → {_number(fitted_scale)}, the stack factor: your rows favour "
        f"another stack (measured / predicted ×{math.exp(evidence.mean_log_ratio):.3f} on average, standard error "
        f"±{evidence.standard_error * 100:.0f} % counting how close together your rows lie; probability that the start "
        f"describes your stack {evidence.same_stack_probability:.2f}); every setting gets it, the local correction "
        "below adds what your rows say near them"
    )


def coverage_lines(correction: LocalTimeCorrection) -> list[str]:
    """Where the rows lie and how the local correction and its band change with the distance from them."""
    near = max(time_band(log_correction(point, correction)[1]) for point in correction.anchors)
    far = time_band(far_variance(correction))
    band = f"the 80 % time band is ±{near * 100:.0f} % at your rows, widening to ±{far * 100:.0f} % far from them"
    local = (
        "local correction: times near your rows follow them, and the correction fades back to the stack factor away "
        "from them (costmodel/time_correction.py)"
        if any(correction.weights)
        else "local correction: off — after the stack factor your rows show no setting-dependent error beyond their "
        "own scatter (calibration/coverage.py), so every setting follows the stack factor"
    )
    another = "measure a setting in another corner (calibrate --suggest) to narrow it"
    return [f"your rows cover: {corner(correction.anchors)}", f"{local}; {band}: {another}"]


def fitted_quantities_lines(result: Recalibration, start: CostCoefficients) -> list[str]:
    """What the refit fits and what it cannot, from the rows and the coefficients it moved.

    * time (micro-step / optimizer-step times): the stack factor and the terms the rows vary
      (``calibration/stack_fit.py``; with the seeds ``calibration/time_fit.py``); rows far off the others are named;
    * reserved memory: ``allocator_overhead_fraction``, only from rows that measured reserved or nvidia-smi memory;
    * peak allocated memory is derived (weights, adapters, gradients, optimizer states, activations, logits from
      the architecture and the setting: docs/cost-model.md), not fitted: a calibration leaves it unchanged and
      only widens the memory bands (the planner's headroom) when your rows are under-predicted.
    """
    fitted = result.coefficients
    timed = sum(r.measured_time_s is not None for r in result.before)
    moved = moved_coefficients(start, fitted)
    time_moved = [m for m in moved if not m.startswith("allocator_overhead_fraction")]
    lines = [
        f"fitted: time from {timed - len(result.outliers)} timed row(s)"
        + (f"; moved {', '.join(time_moved)}" if time_moved else "; no time coefficient moved")
    ]
    if result.fitted_terms:
        kept = "the rest kept: your rows do not vary them" if len(result.fitted_terms) > 1 else "every term kept"
        lines.append(
            f"fitted from your rows: {', '.join(result.fitted_terms)} (the stack factor first; a term's coefficient "
            f"only where your rows vary its share of the time; {kept})"
        )
    if result.stack_factor_kept:
        assert result.stack_evidence is not None
        lines.append(stack_kept_line(result.stack_evidence, start.time_scale))
    elif result.stack_evidence is not None and fitted.time_scale != start.time_scale:
        lines.append(stack_moved_line(result.stack_evidence, start.time_scale, fitted.time_scale))
    if fitted.local_time_correction is not None:
        lines += coverage_lines(fitted.local_time_correction)
    named = list(result.outliers.values())
    lines += [f"outlier, named and left out of the fit: {line}" for line in named[:ROWS_SHOWN]]
    if len(named) > ROWS_SHOWN:
        lines.append(f"{len(named) - ROWS_SHOWN:,} more outliers left out of the fit")
    reserved_rows = sum(r.case.measurement.memory_kind in ("reserved", "nvidia-smi") for r in result.before)
    allocator = moved_coefficients(start, fitted, ["allocator_overhead_fraction"])
    if reserved_rows:
        lines.append(
            f"fitted: reserved memory from {reserved_rows} row(s) measuring reserved / nvidia-smi memory"
            + (f"; moved {allocator[0]}" if allocator else "; allocator_overhead_fraction unchanged")
        )
    allocated = [
        (r.predicted_memory_gib, a.predicted_memory_gib)
        for r, a in zip(result.before, result.after, strict=True)
        if r.case.measurement.memory_kind == "allocated" and r.predicted_memory_gib is not None
    ]
    changed = sum(not _close(b, a) for b, a in allocated)
    if changed:
        lines.append(f"peak allocated memory: the refit moved the prediction of {changed} row(s)")
    else:
        lines.append(
            "not fitted: peak allocated memory is derived from the architecture and the setting (weights, "
            "gradients, optimizer states, activations, logits), so its predictions are unchanged; a calibration "
            "only widens the memory bands (the planner's headroom) when your rows are under-predicted"
        )
    widened = moved_coefficients(start, fitted, BAND_FIELDS, down=False)
    if widened:
        lines.append(f"error bands widened: {', '.join(widened)}")
    narrowed = moved_coefficients(start, fitted, BAND_FIELDS, down=True)
    if narrowed:
        lines.append(f"time bands from your rows held out one at a time: {', '.join(narrowed)}")
    return lines


def render_recalibration(result: Recalibration, output: Path, start: CostCoefficients) -> None:
    """Print the rows table, the error summaries, what was fitted and where the calibration went.

    The last line says that plan and estimate now use the file when ``output`` resolves to the user calibration path
    (:func:`autotune.profiles.user_config.user_calibration_path`, with or without ``-o``), else how to pass it.
    """
    console().print(rows_table(result.before, result.after))
    for old in result.before[:ROWS_SHOWN]:
        m = old.case.measurement
        extra = "".join(f", {text}" for text in moving_fields(old.case, start))
        console().print(
            f"  {m.id}: {m.gpu} ×{m.world_size}, {m.model}, seq {m.workload.seq_len}, {m.setting.short()}{extra}",
            markup=False,
        )
    seeds_before, seeds_after = summarize(result.seeds_before), summarize(result.seeds_after)
    fitted_before = [r for r in result.before if r.id not in result.outliers]
    fitted_after = [r for r in result.after if r.id not in result.outliers]
    label = "your rows" + (" (outliers left out, as the refit)" if result.outliers else "")
    lines = summary_lines(label, summarize(fitted_before), summarize(fitted_after))
    lines += summary_lines("seed rows", seeds_before, seeds_after)
    lines += fitted_quantities_lines(result, start)
    for line in lines:
        console().print(line, markup=False)
    lost = seeds_before.verdicts_correct - seeds_after.verdicts_correct
    if lost > 0:
        console().print(
            f"[yellow]note:[/] {lost} more seed rows get a wrong fits/OOM verdict: the refit follows your stack "
            "and hardware, not the seed tables'"
        )
    for line in bound_notes(result):
        console().print(f"[yellow]note:[/] {line}")
    use = (
        "plan and estimate now use it (--calibration FILE overrides)"
        if output.resolve() == user_calibration_path().resolve()
        else f"use it with --calibration {output}"
    )
    console().print(f"[green]wrote[/] {output} (calibration '{result.coefficients.name}'); {use}")


UNREACHED_TIME_ERROR = 0.10
"""A row whose time error after the refit is larger than this (10 %) gets a note on what stopped the fit."""


def bound_notes(result: Recalibration) -> list[str]:
    """One line per user row the refit could not bring within :data:`UNREACHED_TIME_ERROR` on time.

    Each line names what stopped it: the stack factor ``time_scale`` at a bound of its range (the rows are not one
    stack's speed: check that the times are per micro-step or per optimizer step as the column says, and the GPU),
    the stack factor kept because the rows favour the start's stack (``stack_fit.stack_evidence``) and nothing else
    fitted, else the coefficients shared with the other rows.
    """
    lines = []
    scale = result.coefficients.time_scale
    unreached = [
        (after.case.measurement.id, after.time_error)
        for after in result.after
        if abs(after.time_error or 0) > UNREACHED_TIME_ERROR and after.case.measurement.id not in result.outliers
    ]
    for row, error in unreached[:ROWS_SHOWN]:
        assert error is not None
        if scale <= TIME_SCALE_MIN * 1.001 or scale >= TIME_SCALE_MAX * 0.999:
            lines.append(
                f"{row}: time still {error * 100:+.0f}% after the refit: the stack factor time_scale stopped at its "
                f"bound {scale:g} (range {TIME_SCALE_MIN:g}–{TIME_SCALE_MAX:g}): a stack that far off the model is "
                "more likely a time of another kind (per optimizer step given as per micro-step) or another GPU"
            )
        elif result.stack_factor_kept and not result.fitted_terms:
            lines.append(
                f"{row}: time still {error * 100:+.0f}% after the refit: the stack factor was kept (see 'kept:'): by "
                "your rows' own scatter this error comes with the row's setting, which one stack factor would not fix"
            )
        else:
            lines.append(
                f"{row}: time still {error * 100:+.0f}% after the refit: the coefficients it moves are shared with "
                "your other rows (and the seeds with --with-seeds), which pull the other way"
            )
    if len(unreached) > ROWS_SHOWN:
        lines.append(
            f"{len(unreached) - ROWS_SHOWN:,} more rows are still more than {UNREACHED_TIME_ERROR:.0%} off after the "
            "refit"
        )
    return lines


def print_collected(collected: Collected) -> None:
    """One line per skipped run and per note."""
    for line in collected.skipped:
        console().print(f"[yellow]skipped:[/] {line}")
    for line in collected.notes:
        console().print(f"[yellow]note:[/] {line}")
