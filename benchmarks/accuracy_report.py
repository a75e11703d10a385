"""Print the cost model's measured accuracy on the seed tables, in-sample and held-out (markdown or JSON).

The tables are meant to be pasted into docs/cost-model.md as printed. What they contain:
  * MAPE of peak memory (rows whose memory kind is known) and of time (rows with a usable time), overall, per
    GPU and per method: in-sample (fit on all rows) and held-out (leave-one-GPU-out, leave-one-family-out);
  * OOM / fits verdicts: measured OOM rows predicted as not fitting, rows that ran predicted as fitting —
    in-sample, held-out, and with the shipped calibration (``seeds.yaml``, whose bands are held-out bands);
  * the worst held-out rows.

Usage (from the repository root; about 13 fits of ~7 s each on 2 cores, progress on stderr):
    python benchmarks/accuracy_report.py [--groups gpu,family] [--worst 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from autotune.calibration.cases import prepare_cases
from autotune.calibration.crossval import (
    CVReport,
    ProgressFunction,
    VerdictCounts,
    comparison,
    cross_validate,
    fit_from_priors,
    parse_groupings,
    verdict_counts,
    worst_rows,
)
from autotune.calibration.results import CaseResult, evaluate
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.context import setting_context
from autotune.costmodel.memory import model_state_bytes
from autotune.costmodel.precision import dtype_bytes
from autotune.errors import InvalidRequestError
from autotune.profiles.measurements import all_measurements, list_measurement_sets

SHORT_LABELS = {"leave-one-GPU-out": "LOGO", "leave-one-family-out": "LOFO", "leave-one-source-out": "LOSO"}


def _progress(started: float) -> ProgressFunction:
    """Progress lines on stderr (each fit takes several seconds)."""

    def report(label: str, index: int, total: int) -> None:
        print(f"  [{index}/{total}] fitting {label} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    return report


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value * 100:+.0f}%" if signed else f"{value * 100:.1f}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.3g} s"


def _verdict_cells(counts: VerdictCounts) -> str:
    return (
        f"{counts.oom_caught}/{counts.oom_total} | {counts.ran_fit}/{counts.ran_total} | "
        f"{counts.correct}/{counts.total}"
    )


def _wrong(results: Sequence[CaseResult]) -> list[str]:
    return [
        f"{r.id} ({'OOM' if r.oom_measured else 'ran'}, predicted {'fits' if r.estimate.fits else 'OOM'})"
        for r in results
        if not r.oom_correct
    ]


def states_only_baseline(results: Sequence[CaseResult]) -> tuple[int, float, float]:
    """(rows, states-only MAPE, our MAPE) on single-rank, non-offload rows of known memory kind.

    The baseline is what a model-states calculator reports: weights + gradients + optimizer states (+ LoRA
    adapters), with no activations, logits, buffers or allocator — the same bytes per parameter as ours.
    """
    baseline, ours = [], []
    for r in results:
        m = r.case.measurement
        if r.memory_error is None or m.memory_kind == "unknown" or m.setting.offloads_to_cpu:
            continue
        if r.case.cluster.world_size != 1 or r.measured_memory_gib is None:
            continue
        model, cluster = r.case.model, r.case.cluster
        context = setting_context(model, m.setting, cluster, m.workload)
        states = model_state_bytes(model, m.setting, cluster, dtype_bytes(m.setting, cluster.gpu), context)
        total_gib = (states.weights + states.adapter_weights + states.gradients + states.optimizer_states) / 2**30
        baseline.append(abs(total_gib / r.measured_memory_gib - 1))
        ours.append(abs(r.memory_error))
    if not baseline:
        return 0, float("nan"), float("nan")
    return len(baseline), sum(baseline) / len(baseline), sum(ours) / len(ours)


def markdown(reports: Sequence[CVReport], shipped: Sequence[CaseResult], worst: int) -> str:
    """The paste-ready markdown report."""
    first = reports[0]
    cases = len(first.in_sample)
    sets = ", ".join(s.name for s in list_measurement_sets())
    labels = [r.label for r in reports]
    short = [SHORT_LABELS[label] for label in labels]
    lines = [
        "### Accuracy on the seed tables",
        "",
        f"{cases} transcribed rows: seed tables and the MPT development data ({sets}). *In-sample*: every "
        "row predicted by the fit on all rows "
        "(the shipped coefficients). *Held-out*: "
        + "; ".join(f"{r.label} ({SHORT_LABELS[r.label]}, {len(r.folds)} folds)" for r in reports)
        + " — each row predicted by a fit (from the physics priors) that did not see its GPU or its model "
        "family; a held-out GPU gets its architecture generation's efficiencies (fitted on its sibling GPU, or "
        "the prior scaled like the fitted generations). Memory MAPE is over rows whose memory "
        "kind is known (allocated / reserved / nvidia-smi); time MAPE over rows with a usable time (a "
        "micro-step, or a whole run with its dataset size). Produced by `python benchmarks/accuracy_report.py`.",
        "",
        "| group | memory rows | memory in-sample | "
        + " | ".join(f"memory {s}" for s in short)
        + " | time rows | time in-sample | "
        + " | ".join(f"time {s}" for s in short)
        + " |",
        "|---|" + "---:|" * (4 + 2 * len(reports)),
    ]
    for line in comparison(reports):
        lines.append(
            f"| {line.group} | {line.memory_rows} | {_pct(line.memory_in_sample)} | "
            + " | ".join(_pct(line.memory_held_out[label]) for label in labels)
            + f" | {line.time_rows} | {_pct(line.time_in_sample)} | "
            + " | ".join(_pct(line.time_held_out[label]) for label in labels)
            + " |"
        )
    unknown = first.in_sample_summary().memory_mape_unknown_kind
    unknown_rows = sum(
        r.measured_memory_gib is not None and r.case.measurement.memory_kind == "unknown" for r in first.in_sample
    )
    baseline_rows, baseline_mape, our_mape = states_only_baseline(shipped)
    lines += [
        "",
        f"Memory figures of unknown kind ({unknown_rows} rows: the 7900 XTX sweep and the FSDP vs DeepSpeed "
        f"table) are neither fitted nor in the table; their in-sample MAPE is {_pct(unknown)}.",
        "",
        f"A model-states-only calculator (weights + gradients + optimizer states, our bytes per parameter, no "
        f"activations or logits) on the {baseline_rows} single-GPU rows of known kind without offload: memory "
        f"MAPE {_pct(baseline_mape)}; this cost model on the same rows: {_pct(our_mape)}.",
        "",
        "#### OOM / fits verdicts",
        "",
        "| predictions | measured OOM predicted not to fit | ran predicted to fit | correct |",
        "|---|---:|---:|---:|",
        f"| in-sample (fit on all rows, in-sample bands) | {_verdict_cells(verdict_counts(first.in_sample))} |",
    ]
    for report in reports:
        lines.append(f"| {report.label} (fold's own bands) | {_verdict_cells(verdict_counts(report.held_out))} |")
    lines.append(f"| shipped calibration (seeds.yaml as shipped) | {_verdict_cells(verdict_counts(shipped))} |")
    wrong = _wrong(shipped)
    lines += ["", "Wrong verdicts with the shipped calibration: " + ("; ".join(wrong) if wrong else "none") + "."]
    lines += [
        "",
        f"#### Worst held-out rows (top {worst} per quantity and grouping)",
        "",
        "| grouping | row | quantity | measured | predicted | error |",
        "|---|---|---|---:|---:|---:|",
    ]
    for report in reports:
        for quantity in ("memory", "time"):
            for row in worst_rows(report, worst, quantity):
                if quantity == "memory":
                    measured, predicted = f"{row.measured_memory_gib:.1f} GiB", f"{row.predicted_memory_gib:.1f} GiB"
                    error, kind = row.memory_error, row.memory_kind
                else:
                    measured, predicted = _duration(row.measured_time_s), _duration(row.predicted_time_s)
                    error, kind = row.time_error, row.time_kind or "—"
                lines.append(
                    f"| {SHORT_LABELS[report.label]} | {row.id} | {quantity} ({kind}) "
                    f"| {measured} | {predicted} | {_pct(error, signed=True)} |"
                )
    return "\n".join(lines)


def as_json(reports: Sequence[CVReport], shipped: Sequence[CaseResult], worst: int) -> dict[str, object]:
    """The same figures as a JSON-ready dict."""
    return {
        "rows": len(reports[0].in_sample),
        "table": [row.__dict__ for row in comparison(reports)],
        "groupings": {report.groups: report.as_dict(worst) for report in reports},
        "in_sample_verdicts": verdict_counts(reports[0].in_sample).__dict__,
        "shipped_verdicts": verdict_counts(shipped).__dict__,
        "shipped_wrong_verdicts": [r.id for r in shipped if not r.oom_correct],
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="gpu,family", help="groupings, comma-separated: gpu, family, source")
    parser.add_argument("--worst", type=int, default=5, help="worst held-out rows listed per quantity")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args(argv)
    try:
        groupings = parse_groupings(args.groups)
    except InvalidRequestError as error:
        parser.error(str(error))

    started = time.perf_counter()
    cases = prepare_cases(all_measurements())
    full = fit_from_priors(cases, "in-sample")
    reports = [cross_validate(cases, g, full_fit=full, progress=_progress(started)) for g in groupings]
    shipped = evaluate(cases, default_coefficients())
    if args.json:
        print(json.dumps(as_json(reports, shipped, args.worst), indent=2, default=str))
    else:
        print(markdown(reports, shipped, args.worst))
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
