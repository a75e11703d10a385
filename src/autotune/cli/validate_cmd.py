"""``autotune validate``: predicted vs measured for every seed-table row, with the error summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from autotune.cli import options as opt
from autotune.cli._shared import coefficients_from_option
from autotune.cli.app import app
from autotune.cli.render import console, print_json
from autotune.costmodel.fitting import evaluate, prepare_cases
from autotune.costmodel.validation import summarize
from autotune.profiles.measurements import all_measurements, load_measurement_set


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.0f}%"


@app.command("validate")
def validate_command(
    measurements: Annotated[
        Optional[Path], typer.Option("--measurements", help="A measurement-set YAML instead of the seed tables.")
    ] = None,
    calibration: opt.CalibrationOpt = None,
    worst: Annotated[int, typer.Option("--worst", help="How many worst rows to list.")] = 5,
    json_: opt.JsonOpt = False,
) -> None:
    """Compare the cost model's predictions with every measured row (the seed tables by default)."""
    coefficients, name = coefficients_from_option(calibration)
    rows = load_measurement_set(measurements).measurements if measurements else all_measurements()
    results = evaluate(prepare_cases(rows), coefficients)
    summary = summarize(results)
    if json_:
        print_json({"calibration": name, "summary": summary.as_dict(), "rows": [r.as_dict() for r in summary.rows]})
        return
    table = Table(title=f"Predicted vs measured ({len(results)} rows, calibration '{name}')")
    for column in ("row", "memory meas.", "pred.", "err", "kind", "time meas.", "pred.", "err", "OOM meas./pred."):
        table.add_column(column, justify="left" if column == "row" else "right")
    for row in summary.rows:
        table.add_row(
            row.id,
            "OOM" if row.oom_measured else ("—" if row.measured_memory_gib is None else f"{row.measured_memory_gib:.1f}"),
            "—" if row.predicted_memory_gib is None else f"{row.predicted_memory_gib:.1f}",
            _pct(row.memory_error),
            row.memory_kind,
            "—" if row.measured_time_s is None else f"{row.measured_time_s:.4g} s",
            "—" if row.predicted_time_s is None else f"{row.predicted_time_s:.4g} s",
            _pct(row.time_error),
            f"{'OOM' if row.oom_measured else 'ran'}/{'fits' if row.predicted_fits else 'OOM'}"
            + ("" if row.verdict_correct else " [red]✗[/]"),
        )
    console.print(table)
    console.print(summary.text(worst))
