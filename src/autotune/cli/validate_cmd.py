"""``autotune validate``: predicted vs measured for every seed-table row, with the error summary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from autotune.calibration.cases import prepare_cases
from autotune.calibration.results import evaluate
from autotune.calibration.validation import RowReport, summarize
from autotune.cli import options as opt
from autotune.cli.console import console, err_console
from autotune.cli.render import human_seconds, print_json
from autotune.cli.tables import Column, print_table
from autotune.profiles.measurements import all_measurements, load_measurement_set
from autotune.schemas.calibration import Measurement
from autotune.session.calibration_choice import coefficients_from_option
from autotune.session.validation_text import percent, ranking_text, summary_text, worst_text


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.0f}%"


def validate_command(
    measurements: Annotated[
        Path | None, typer.Option("--measurements", help="A measurement-set YAML instead of the seed tables.")
    ] = None,
    calibration: opt.CalibrationOpt = None,
    worst: Annotated[int, typer.Option("--worst", min=0, help="How many worst rows to list.")] = 5,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw predicted vs measured to this PNG (needs matplotlib); with --cv, the held-out "
            "predictions of the first --cv-by grouping.",
        ),
    ] = None,
    json_: opt.JsonOpt = False,
    cv: Annotated[
        bool,
        typer.Option(
            "--cv",
            help="Cross-validate instead: fit from the priors without each GPU / model family, predict the "
            "held-out rows, print in-sample vs held-out error (slow: one fit of several seconds per group).",
        ),
    ] = False,
    cv_by: Annotated[
        str, typer.Option("--cv-by", help="With --cv: groupings to hold out, comma-separated: gpu, family, source.")
    ] = "gpu,family,source",
) -> None:
    """Compare the cost model's predictions with every measured row (the seed tables by default)."""
    if plot is not None:
        from autotune.cli.plots import check_plot_path

        check_plot_path(plot)  # fail before any work
    if cv:
        cv_rows = load_measurement_set(measurements).measurements if measurements else all_measurements()
        _cross_validate(cv_rows, cv_by, worst, json_, plot)
        return
    coefficients, name = coefficients_from_option(calibration)
    rows = load_measurement_set(measurements).measurements if measurements else all_measurements()
    results = evaluate(prepare_cases(rows), coefficients)
    summary = summarize(results)
    if plot is not None:
        from autotune.cli.plot_data import oom_needs
        from autotune.cli.plot_validation import validation_scatter_png

        title = f"Predicted vs measured: {len(results)} rows, calibration '{name}'"
        validation_scatter_png(summary.rows, plot, oom_needs(results), title=title)
    if json_:
        print_json({"calibration": name, "summary": summary.as_dict(), "rows": [r.as_dict() for r in summary.rows]})
        return
    print_rows_table(summary.rows, f"Predicted vs measured ({len(results)} rows, calibration '{name}')")
    console().print(summary_text(summary, worst))
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")


def print_rows_table(rows: list[RowReport], title: str) -> None:
    """The table of every row: memory and time measured, predicted and their errors; the OOM verdicts."""
    columns = [
        Column("row"),
        Column("mem.\nmeas.", "right", drop_order=3),
        Column("mem.\npred.", "right", drop_order=5),
        Column("mem.\nerr", "right"),
        Column("mem.\nkind", drop_order=7),
        Column("time\nmeas.", "right", drop_order=4),
        Column("time\npred.", "right", drop_order=6),
        Column("time\nerr", "right"),
        Column("OOM\nmeas./\npred.", drop_order=2),
    ]
    table_rows = [
        [
            row.id,
            "OOM"
            if row.oom_measured
            else ("—" if row.measured_memory_gib is None else f"{row.measured_memory_gib:.1f}"),
            "—" if row.predicted_memory_gib is None else f"{row.predicted_memory_gib:.1f}",
            _pct(row.memory_error),
            row.memory_kind,
            human_seconds(row.measured_time_s),
            human_seconds(row.predicted_time_s),
            _pct(row.time_error),
            f"{'OOM' if row.oom_measured else 'ran'}/{'fits' if row.predicted_fits else 'OOM'}"
            + ("" if row.verdict_correct else " [red]✗[/]"),
        ]
        for row in rows
    ]
    print_table(title, columns, table_rows)


def _cross_validate(rows: list[Measurement], cv_by: str, worst: int, json_: bool, plot: Path | None) -> None:
    """``validate --cv``: in-sample vs held-out MAPE per GPU and method, verdicts, worst held-out rows.

    With ``plot``, the scatter of the first grouping's held-out predictions against the measurements.
    """
    from autotune.calibration.crossval import (
        comparison,
        cross_validate,
        fit_from_priors,
        parse_groupings,
        verdict_counts,
        worst_rows,
    )
    from autotune.calibration.ranking import by_source

    groupings = parse_groupings(cv_by)
    started = time.perf_counter()

    def progress(label: str, index: int, total: int) -> None:
        err_console().print(f"[dim]fitting {label} ({index}/{total}, {time.perf_counter() - started:.0f} s)[/]")

    cases = prepare_cases(rows)
    progress("all rows (in-sample)", 1, 1)
    full = fit_from_priors(cases, "in-sample")
    reports = [cross_validate(cases, g, full_fit=full, progress=progress) for g in groupings]
    if plot is not None:
        from autotune.cli.plot_data import oom_needs
        from autotune.cli.plot_validation import validation_scatter_png

        first = reports[0]
        title = f"Held out ({first.label}) vs measured: {len(first.held_out)} rows, fitted from the priors"
        validation_scatter_png(first.held_out_summary().rows, plot, oom_needs(first.held_out), title=title)
    if json_:
        print_json(
            {
                **{report.groups: report.as_dict(worst) for report in reports},
                "time_by_source": {
                    "in_sample": [s.as_dict() for s in by_source(reports[0].in_sample)],
                    **{r.label: [s.as_dict() for s in by_source(r.held_out)] for r in reports},
                },
            }
        )
        return
    short = {"leave-one-GPU-out": "LOGO", "leave-one-family-out": "LOFO", "leave-one-source-out": "LOSO"}
    labels = [r.label for r in reports]
    title = (
        f"MAPE in-sample vs held-out ({len(cases)} rows; "
        + ", ".join(f"{short[r.label]} = {r.label}, {len(r.folds)} folds" for r in reports)
        + ")"
    )
    columns = [Column("group")]
    for quantity in ("memory", "time"):
        columns.append(Column(f"{quantity}\nrows", "right", drop_order=2))
        columns.append(Column(f"{quantity}\nin-sample", "right"))
        columns += [Column(f"{quantity}\n{short[label]}", "right") for label in labels]
    table_rows = [
        [
            line.group,
            str(line.memory_rows),
            percent(line.memory_in_sample),
            *(percent(line.memory_held_out[label]) for label in labels),
            str(line.time_rows),
            percent(line.time_in_sample),
            *(percent(line.time_held_out[label]) for label in labels),
        ]
        for line in comparison(reports)
    ]
    print_table(title, columns, table_rows)
    console().print(
        "memory: rows of known kind only; a held-out GPU is predicted with its architecture generation's efficiency"
    )
    verdict_columns = [
        Column("predictions"),
        Column("OOM rows predicted\nnot to fit", "right"),
        Column("ran rows predicted\nto fit", "right"),
    ]
    verdict_rows = []
    for name, results in [("in-sample", reports[0].in_sample)] + [(r.label, r.held_out) for r in reports]:
        counts = verdict_counts(results)
        verdict_rows.append([name, f"{counts.oom_caught}/{counts.oom_total}", f"{counts.ran_fit}/{counts.ran_total}"])
    print_table("OOM / fits verdicts", verdict_columns, verdict_rows)
    for report in reports:
        for quantity in ("memory", "time"):
            listed = worst_text(worst_rows(report, worst, quantity), quantity)
            if listed:
                console().print(f"worst held-out {quantity} ({short[report.label]}): {listed}")
    for label, results in [("in-sample", reports[0].in_sample)] + [(r.label, r.held_out) for r in reports]:
        for text in ranking_text(label, by_source(results)):
            console().print(text, highlight=False)
    if plot is not None:
        console().print(f"[green]wrote[/] {plot} (held-out predictions, {reports[0].label})")
