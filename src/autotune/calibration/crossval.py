"""Cross-validation of the cost model: held-out error, and error bands from held-out residuals.

For each value of a grouping — a GPU, a model family, a source table — the free coefficients are fitted on
the other rows (``fit.fit_coefficients`` from the physics priors, never from the shipped fit, which has
seen every row) and the held-out rows are predicted with that fold's fit. Efficiencies are fitted per
architecture generation: a held-out GPU uses its generation's value when another GPU of that generation has
rows (A100 40 GB ↔ 80 GB), else its generation's prior scaled like the fitted ones (``time_fit``): exactly what
a user of a GPU we never measured gets. A held-out model family is predicted with activation and logits
factors fitted on other architectures; a held-out source table (``source``) with coefficients fitted on the
other tables only (the seeds without the MPT development data, and the reverse).

What the numbers mean:
  * in-sample: every row predicted by the fit on all rows (the shipped coefficients' values);
  * held-out: every row predicted by the fit that did not see its group (one prediction per row per grouping);
  * verdicts (OOM ↔ does not fit) of a held-out row use its fold's coefficients, including the fold's own
    in-sample headroom band;
  * ``held_out_bands`` = ``fit.error_bands`` applied to held-out results (90th percentile per family).

A fold whose held-out rows carry no fitted information (memory of unknown kind, no usable time: the 7900 XTX,
4090 and 3090 rows) gets the same coefficients as the fit on all rows; it is fitted anyway, so that this
module does not depend on which rows ``fit_coefficients`` uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from autotune.calibration.cases import Case
from autotune.calibration.fit import error_bands, fit_coefficients
from autotune.calibration.results import CaseResult, evaluate
from autotune.calibration.validation import ErrorSummary, RowReport, largest_errors, summarize
from autotune.errors import InvalidRequestError
from autotune.schemas.calibration import CostCoefficients, source_table

GroupBy = Literal["gpu", "family", "source"]
GROUPINGS: tuple[GroupBy, ...] = ("gpu", "family", "source")
GROUPING_LABELS: dict[str, str] = {
    "gpu": "leave-one-GPU-out",
    "family": "leave-one-family-out",
    "source": "leave-one-source-out",
}

FitFunction = Callable[[Sequence[Case], str], CostCoefficients]
"""``fit(cases, name) -> coefficients``; the default is ``fit_from_priors``."""

ProgressFunction = Callable[[str, int, int], None]
"""``progress(label, index, total)``, called before each fit (index counts from 1)."""

_FAMILY_PATTERN = re.compile(r"^([a-z]+)(\d+)?(?:\.\d+)?$")


def parse_groupings(text: str) -> list[GroupBy]:
    """'gpu,family' → ['gpu', 'family'] (in the order of ``GROUPINGS``).

    Raises:
        InvalidRequestError: no grouping, or a name that is not one of ``GROUPINGS``.
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in GROUPINGS]
    if unknown or not names:
        raise InvalidRequestError(
            f"cross-validation groupings {text!r}: use one or more of {', '.join(GROUPINGS)}, comma-separated"
        )
    return [g for g in GROUPINGS if g in names]


def model_family(model_key: str) -> str:
    """Model family from a catalog key: the name and major version of its first dash-separated part.

    'llama-7b' → 'llama1' (the original LLaMA has no version in its key), 'llama2-13b' → 'llama2',
    'llama3-8b' and 'llama3.1-70b' → 'llama3', 'gemma-7b' → 'gemma', 'gemma2-9b' → 'gemma2', 'phi3-mini' →
    'phi3', 'qwen2.5-7b' → 'qwen2', 'mistral-7b-v0.3' → 'mistral'. Keys of another form (a name derived from a
    config path) are their own family: the lower-cased first part.
    """
    head = model_key.lower().split("-")[0]
    match = _FAMILY_PATTERN.match(head)
    if match is None:
        return head
    name, major = match.group(1), match.group(2)
    if name == "llama" and major is None:
        return "llama1"
    return name + (major or "")


def group_of(case: Case, groups: GroupBy) -> str:
    """The value of ``groups`` for one case: GPU key, model family or source table."""
    if groups == "gpu":
        return case.cluster.gpu.key
    if groups == "family":
        return model_family(case.model.key)
    return source_table(case.measurement.source)


def fit_from_priors(cases: Sequence[Case], name: str) -> CostCoefficients:
    """``fit_coefficients`` started from the physics priors (``CostCoefficients()``), never the shipped fit."""
    return fit_coefficients(cases, start=CostCoefficients(), name=name, source=f"cross-validation fold '{name}'")


@dataclass(frozen=True)
class Fold:
    """One held-out group: its rows, the coefficients fitted without them, and their predictions."""

    group: str
    held_out_ids: tuple[str, ...]
    training_ids: tuple[str, ...]
    coefficients: CostCoefficients
    results: tuple[CaseResult, ...]


@dataclass(frozen=True)
class VerdictCounts:
    """OOM / fits verdicts: measured OOM rows predicted as not fitting, rows that ran predicted as fitting."""

    oom_caught: int
    oom_total: int
    ran_fit: int
    ran_total: int

    @property
    def correct(self) -> int:
        """Rows whose verdict agrees with the measurement."""
        return self.oom_caught + self.ran_fit

    @property
    def total(self) -> int:
        """All rows."""
        return self.oom_total + self.ran_total


def verdict_counts(results: Sequence[CaseResult]) -> VerdictCounts:
    """Count verdicts of ``results`` (see ``VerdictCounts``)."""
    oom = [r for r in results if r.oom_measured]
    ran = [r for r in results if not r.oom_measured]
    return VerdictCounts(
        oom_caught=sum(not r.estimate.fits for r in oom),
        oom_total=len(oom),
        ran_fit=sum(r.estimate.fits for r in ran),
        ran_total=len(ran),
    )


@dataclass(frozen=True)
class CVReport:
    """In-sample and held-out results of one grouping.

    ``in_sample`` and ``held_out`` hold one result per case, in the order of the cases given.
    """

    groups: GroupBy
    in_sample_coefficients: CostCoefficients
    in_sample: tuple[CaseResult, ...]
    held_out: tuple[CaseResult, ...]
    folds: tuple[Fold, ...]

    @property
    def label(self) -> str:
        """'leave-one-GPU-out', ..."""
        return GROUPING_LABELS[self.groups]

    def in_sample_summary(self) -> ErrorSummary:
        """MAPE per GPU and per method, verdicts and rows of the in-sample results."""
        return summarize(self.in_sample)

    def held_out_summary(self) -> ErrorSummary:
        """MAPE per GPU and per method, verdicts and rows of the held-out results."""
        return summarize(self.held_out)

    def as_dict(self, worst: int = 5) -> dict[str, object]:
        """JSON-ready: folds, in-sample and held-out summaries, verdicts, worst held-out rows."""
        held_out = self.held_out_summary()
        return {
            "groups": self.groups,
            "label": self.label,
            "folds": [
                {"group": f.group, "held_out": len(f.held_out_ids), "training": len(f.training_ids)} for f in self.folds
            ],
            "in_sample": self.in_sample_summary().as_dict(),
            "held_out": held_out.as_dict(),
            "in_sample_verdicts": verdict_counts(self.in_sample).__dict__,
            "held_out_verdicts": verdict_counts(self.held_out).__dict__,
            "worst_held_out": {
                quantity: [r.as_dict() for r in held_out.worst(worst, quantity)] for quantity in ("memory", "time")
            },
        }


def cross_validate(
    cases: Sequence[Case],
    groups: GroupBy,
    fit: FitFunction = fit_from_priors,
    full_fit: CostCoefficients | None = None,
    progress: ProgressFunction | None = None,
) -> CVReport:
    """Leave-one-group-out cross-validation of the fitted coefficients.

    Args:
        cases: prepared measurement rows (``cases.prepare_cases``).
        groups: 'gpu', 'family' (``model_family`` of the model key) or 'source' (``source_table``).
        fit: the fitting function (default ``fit_from_priors``); tests pass a cheaper or recording one.
        full_fit: the fit on all ``cases`` if already computed (it is the same for every grouping).
        progress: called before each fit with a label, the fit's index and the number of fits.

    Returns:
        The report; ``held_out[i]`` is case ``i`` predicted by the fit that excluded its group.

    Raises:
        InvalidRequestError: ``groups`` is not one of GROUPINGS, or the cases have fewer than two groups
            (nothing would be left to fit on).
    """
    if groups not in GROUPINGS:
        raise InvalidRequestError(f"cross-validation groups '{groups}': use one of {', '.join(GROUPINGS)}")
    keys = [group_of(case, groups) for case in cases]
    values = sorted(set(keys))
    if len(values) < 2:
        raise InvalidRequestError(
            f"cross-validation by {groups} needs rows from at least two {groups} values, got {values}"
        )
    total = len(values) + (full_fit is None)
    if full_fit is None:
        if progress is not None:
            progress("all rows (in-sample)", 1, total)
        full_fit = fit(cases, "in-sample")
    in_sample = evaluate(cases, full_fit)

    held_out: list[CaseResult | None] = [None] * len(cases)
    folds = []
    for number, value in enumerate(values, start=total - len(values) + 1):
        if progress is not None:
            progress(f"{GROUPING_LABELS[groups]}: {value}", number, total)
        held_indices = [i for i, key in enumerate(keys) if key == value]
        training = [case for key, case in zip(keys, cases, strict=True) if key != value]
        coefficients = fit(training, f"cv-{groups}-{value}")
        results = evaluate([cases[i] for i in held_indices], coefficients)
        for index, result in zip(held_indices, results, strict=True):
            held_out[index] = result
        folds.append(
            Fold(
                group=value,
                held_out_ids=tuple(cases[i].measurement.id for i in held_indices),
                training_ids=tuple(case.measurement.id for case in training),
                coefficients=coefficients,
                results=tuple(results),
            )
        )
    return CVReport(
        groups=groups,
        in_sample_coefficients=full_fit,
        in_sample=tuple(in_sample),
        held_out=tuple(r for r in held_out if r is not None),
        folds=tuple(folds),
    )


def held_out_bands(report: CVReport, *more: CVReport) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(memory_band, headroom_band, time_band) from the held-out residuals of one or more reports.

    Built exactly like ``fit.error_bands`` (90th percentile of |error| per family, families with ≥ 3
    rows, plus 'default'), on the held-out results pooled over the reports (a row held out in two groupings
    contributes two residuals, one per grouping).
    """
    pooled = [r for rep in (report, *more) for r in rep.held_out]
    return error_bands(pooled)


@dataclass(frozen=True)
class ComparisonRow:
    """One line of the in-sample vs held-out table: MAPE of a group ('all', 'gpu X', 'method Y')."""

    group: str
    memory_rows: int
    memory_in_sample: float | None
    memory_held_out: dict[str, float | None]
    time_rows: int
    time_in_sample: float | None
    time_held_out: dict[str, float | None]


def comparison(reports: Sequence[CVReport]) -> list[ComparisonRow]:
    """In-sample vs held-out MAPE for all rows, per GPU and per method, one held-out column per report.

    Memory MAPE covers rows whose memory kind is known (rows of unknown kind are not comparable: see
    ``validation``). All reports must be built on the same cases (the in-sample column is the first's).

    Raises:
        InvalidRequestError: no reports.
    """
    if not reports:
        raise InvalidRequestError("comparison needs at least one cross-validation report")
    in_sample = reports[0].in_sample_summary()
    held = {rep.label: rep.held_out_summary() for rep in reports}

    def overall(summary: ErrorSummary) -> dict[str, float | int | None]:
        return {
            "memory_mape": summary.memory_mape_known_kind,
            "memory_rows": sum(r.memory_error is not None and r.memory_kind != "unknown" for r in summary.rows),
            "time_mape": summary.time_mape,
            "time_rows": summary.time_rows,
        }

    def groups_of(summary: ErrorSummary) -> dict[str, dict[str, float | int | None]]:
        return {"all": overall(summary), **dict(sorted(summary.by_group.items()))}

    base = groups_of(in_sample)
    held_groups = {label: groups_of(summary) for label, summary in held.items()}
    rows = []
    for name, values in base.items():
        rows.append(
            ComparisonRow(
                group=name,
                memory_rows=int(values["memory_rows"] or 0),
                memory_in_sample=_float(values["memory_mape"]),
                memory_held_out={label: _float(g[name]["memory_mape"]) for label, g in held_groups.items()},
                time_rows=int(values["time_rows"] or 0),
                time_in_sample=_float(values["time_mape"]),
                time_held_out={label: _float(g[name]["time_mape"]) for label, g in held_groups.items()},
            )
        )
    return rows


def _float(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def worst_rows(report: CVReport, count: int, quantity: str) -> list[RowReport]:
    """The ``count`` held-out rows with the largest |error| of 'memory' (known kind only) or 'time'."""
    return largest_errors(report.held_out_summary().rows, count, quantity)
