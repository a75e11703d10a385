"""Recalibration from the user's own runs (``autotune calibrate`` / ``autotune probe``).

Three kinds of input become :class:`~autotune.calibration.fit.Case` objects (reading them lives in
:mod:`autotune.profiles.run_reports` and :mod:`autotune.profiles.measurement_csv`):
  * a run directory written by ``autotune launch``: ``RUN/run_report.json`` (measured peak allocated
    memory, median micro-step and step times) plus ``RUN/plan.yaml`` for the model and cluster;
  * a CSV file of measurements, one row per run (format in docs/calibration.md, :data:`CSV_COLUMNS`);
  * a measurement-set YAML (the format of the shipped seed tables).

Then :func:`recalibrate` refits the coefficients with :func:`~autotune.calibration.fit.fit_coefficients`
starting from the calibration in use, on the user's rows alone or pooled with the seed rows.

Assumptions (and why):
  * A CPU run (``memory_kind: cpu-rss``) measures the host process's resident set, not a GPU's memory or
    time, so it cannot calibrate a GPU prediction: it is skipped with a note.
  * A run that failed with an out-of-memory error is an OOM row (validated, not fitted; see calibration/fit.py).
  * The GPU measured is the device the run used when its name is in the catalog (the report's ``gpu`` is
    the planned card, which need not be the device), else the planned card.
  * Error bands are never narrowed by a recalibration: each family's band is the wider of the starting
    band (from held-out residuals of many rows) and the in-sample band of the refit. A handful of rows that
    the fit has just matched say little about the error on rows it has not seen.
  * ``allocator_overhead_fraction`` keeps its starting value unless a fitted row measured reserved or
    nvidia-smi memory: peak allocated does not depend on it, so the fit's value would be arbitrary.
  * Without the seeds, the efficiencies every GPU shares (per architecture generation, 'default', DRAM) keep
    their starting values — a few user rows would move them for every GPU — and each measured GPU gets its own
    ``matmul_efficiency`` (refit from its generation's value). A shared per-call CPU cost (peft's per LoRA target,
    bitsandbytes' per Linear4bit) that the user's rows cannot tell apart from their GPU's efficiency keeps its
    starting value
    (:func:`unidentified_time_factors`).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autotune.calibration.cases import RESERVED_KINDS, Case, prepare_cases
from autotune.calibration.fit import error_bands, fit_coefficients, fit_parameters, time_loss
from autotune.calibration.results import CaseResult, evaluate
from autotune.costmodel.device import efficiency
from autotune.errors import AutotuneError, ConfigError
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.profiles.measurement_csv import measurements_from_csv
from autotune.profiles.measurements import all_measurements, load_measurement_set
from autotune.profiles.run_reports import (
    PLAN_FILE,
    UnusableRunError,
    load_run_report,
    measurement_from_run_report,
)
from autotune.schemas.calibration import USER_STACK, CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.plan import PlanFile
from autotune.schemas.run_report import RunReport
from autotune.schemas.setting import (
    TrainingSetting,
)

REFIT_STEP = 0.3
"""Nelder–Mead's first step of the per-GPU matmul-efficiency refit, in log units (a factor 1.35)."""

REFIT_MAX_EVALUATIONS = 1500
"""Nelder–Mead budget of the per-GPU matmul-efficiency refit."""

PlanLoader = Callable[[Path], PlanFile]
"""``autotune.schemas.plan_io.load_plan`` (injected: the cost model does not import the launcher)."""


@dataclass
class Collected:
    """The user's measurements, ready to fit, and what was left out (one line each)."""

    cases: list[Case] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def case_from_run(report: RunReport, run_dir: str | Path, plan: PlanFile | None) -> Case:
    """The fitting case of a run: its measurement with the plan's model (and node layout when it matches).

    The plan's ModelSpec is the architecture that ran; without a plan the report's model must be a
    catalog key.

    Raises:
        UnusableRunError: see :func:`measurement_from_run_report`.
        ConfigError: the model is not in the catalog and the run directory has no plan.yaml.
    """
    measurement = measurement_from_run_report(report, run_dir)
    gpu, _ = resolve_gpu(measurement.gpu)
    if plan is None:
        try:
            model = resolve_model_profile(report.model)
        except AutotuneError:
            raise ConfigError(
                f"{run_dir}: model '{report.model}' is not a catalog model and {PLAN_FILE} is missing "
                "(the plan holds the architecture that ran)"
            ) from None
        return Case(measurement, model, ClusterSpec(gpu=gpu, num_gpus_per_node=report.world_size))
    cluster = plan.cluster
    if cluster.world_size == report.world_size:
        measurement = measurement.model_copy(
            update={"num_gpus_per_node": cluster.num_gpus_per_node, "num_nodes": cluster.num_nodes}
        )
        spec = cluster.spec(gpu)
    else:
        spec = ClusterSpec(gpu=gpu, num_gpus_per_node=report.world_size)
    return Case(measurement, plan.model, spec)


# --- collecting ---------------------------------------------------------------------------------------


def collect(paths: Sequence[str | Path], load_plan: PlanLoader) -> Collected:
    """Cases from run directories, CSV files and measurement-set YAML files, in the order given.

    Run reports that cannot calibrate a GPU (see :func:`measurement_from_run_report`) are listed in
    ``skipped``; duplicate ids get a ``-2``, ``-3``... suffix.

    Raises:
        ConfigError: a path that does not exist, is neither a directory nor a .csv / .yaml file, or whose
            content is invalid.
    """
    collected = Collected()
    for item in paths:
        path = Path(item)
        if path.is_dir():
            report = load_run_report(path)
            plan = load_plan(path / PLAN_FILE) if (path / PLAN_FILE).is_file() else None
            try:
                case = case_from_run(report, path, plan)
            except UnusableRunError as error:
                collected.skipped.append(str(error))
                continue
            if case.measurement.gpu != report.gpu:
                collected.notes.append(
                    f"{path}: planned for {report.gpu}, ran on {report.device}: calibrates {case.measurement.gpu}"
                )
            collected.cases.append(case)
        elif path.is_file() and path.suffix.lower() == ".csv":
            collected.cases += prepare_cases(measurements_from_csv(path))
        elif path.is_file() and path.suffix.lower() in (".yaml", ".yml"):
            collected.cases += prepare_cases(load_measurement_set(path).measurements)
        elif not path.exists():
            raise ConfigError(f"{path}: not found (give run directories, .csv or measurement-set .yaml files)")
        else:
            raise ConfigError(f"{path}: not a run directory, a .csv or a measurement-set .yaml file")
        collected.sources.append(str(path.resolve()))
    collected.cases = _unique_ids(collected.cases)
    return collected


def _unique_ids(cases: list[Case]) -> list[Case]:
    seen: dict[str, int] = {}
    unique = []
    for case in cases:
        count = seen[case.measurement.id] = seen.get(case.measurement.id, 0) + 1
        if count > 1:
            measurement = case.measurement.model_copy(update={"id": f"{case.measurement.id}-{count}"})
            case = Case(measurement, case.model, case.cluster)
        unique.append(case)
    return unique


# --- fitting ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recalibration:
    """A refit with the user's rows predicted before (starting coefficients) and after (refit)."""

    coefficients: CostCoefficients
    before: list[CaseResult]
    after: list[CaseResult]
    seeds_before: list[CaseResult]
    seeds_after: list[CaseResult]


def widest_bands(start: dict[str, float], fitted: dict[str, float]) -> dict[str, float]:
    """Per family, the wider of the starting and the refit band (a recalibration never narrows a band)."""
    return {key: max(start.get(key, 0.0), fitted.get(key, 0.0)) for key in {**start, **fitted}}


SHARED_TIME_FACTORS: dict[str, Callable[[TrainingSetting], bool]] = {
    "lora_target_cpu_s": lambda setting: setting.uses_adapters,
    "qlora_linear_cpu_s": lambda setting: setting.method == "qlora",
}
"""Time coefficients shared by every GPU that only some settings exercise (peft's and bitsandbytes' per-call CPU
costs), and the settings they apply to."""


def unidentified_time_factors(cases: Sequence[Case]) -> list[str]:
    """Shared time coefficients (``SHARED_TIME_FACTORS``) that the timed rows cannot tell apart.

    They cannot be told apart from the GPUs' matmul efficiencies.

    A coefficient is identified when some GPU has timed rows with and without it (e.g. LoRA and full fine-tuning
    on one card); when every row it applies to is alone on its GPU, the GPU's efficiency explains the same times,
    and a fit would move it for every GPU on the strength of one card.
    """
    timed = [c for c in cases if c.measurement.micro_step_time_s or c.measurement.step_time_s]
    names = []
    for name, applies in SHARED_TIME_FACTORS.items():
        by_gpu: dict[str, set[bool]] = {}
        for case in timed:
            by_gpu.setdefault(case.cluster.gpu.key, set()).add(applies(case.measurement.setting))
        if any(True in kinds for kinds in by_gpu.values()) and not any(len(k) == 2 for k in by_gpu.values()):
            names.append(name)
    return names


def refit_efficiencies(cases: Sequence[Case], coefficients: CostCoefficients) -> CostCoefficients:
    """Refit only the matmul efficiencies of the GPUs with timed rows.

    Same objective and optimizer as :func:`~autotune.calibration.fit.fit_coefficients`: mean squared log time error,
    Nelder–Mead.
    """
    time_cases = [r.case for r in evaluate(cases, coefficients) if r.measured_time_s is not None]
    keys = sorted({c.cluster.gpu.key for c in time_cases})
    if not keys:
        return coefficients
    gpus = {c.cluster.gpu.key: c.cluster.gpu for c in time_cases}

    def update(point: Sequence[float]) -> dict[str, object]:
        efficiencies = dict(coefficients.matmul_efficiency)
        for key, value in zip(keys, point, strict=True):
            efficiencies[key] = min(1.0, math.exp(value))
        return {"matmul_efficiency": efficiencies}

    origin = [math.log(efficiency(coefficients.matmul_efficiency, gpus[key])) for key in keys]
    return fit_parameters(
        time_cases, coefficients, origin, update, time_loss, step=REFIT_STEP, max_evaluations=REFIT_MAX_EVALUATIONS
    )


def provenance(
    cases: Sequence[Case], sources: Sequence[str], start_name: str, with_seeds: bool, when: _dt.datetime
) -> str:
    """The calibration's ``source``: when, from what, which GPUs, starting from which calibration."""
    gpus: dict[str, int] = {}
    for case in cases:
        gpus[case.measurement.gpu] = gpus.get(case.measurement.gpu, 0) + 1
    listed = ", ".join(f"{key} ({count} rows)" for key, count in sorted(gpus.items()))
    seeds = f" pooled with the {len(all_measurements())} seed rows" if with_seeds else " (seed rows not included)"
    return (
        f"autotune calibrate at {when.isoformat(timespec='seconds')}: refit of calibration '{start_name}' on "
        f"{len(cases)} user measurements{seeds}; GPUs: {listed}; from: {'; '.join(sources)}"
    )


def recalibrate(
    cases: Sequence[Case],
    start: CostCoefficients,
    *,
    start_name: str,
    sources: Sequence[str],
    with_seeds: bool,
    name: str,
    when: _dt.datetime | None = None,
) -> Recalibration:
    """Refit ``start`` on the user's ``cases`` (plus the seed rows with ``with_seeds``).

    The fit is :func:`~autotune.calibration.fit.fit_coefficients` (Nelder–Mead on log errors) started at
    ``start``; see the module docstring for the ``default`` efficiency and the bands.

    Raises:
        ConfigError: ``cases`` is empty.
    """
    if not cases:
        raise ConfigError("no measurements to calibrate from")
    when = when or _dt.datetime.now(_dt.timezone.utc)
    seed_cases = prepare_cases(all_measurements())
    # The user's rows are one training stack, and the one the calibration must describe (time_fit's stacks).
    own = [
        Case(c.measurement.model_copy(update={"source": f"{USER_STACK}: {c.measurement.source}"}), c.model, c.cluster)
        for c in cases
    ]
    fit_cases = [*own, *seed_cases] if with_seeds else own
    source = provenance(cases, sources, start_name, with_seeds, when)
    fitted = fit_coefficients(fit_cases, start=start, name=name, source=source, reference_stack=USER_STACK)
    if not with_seeds:
        # A few user rows cannot move what every GPU shares (generation efficiencies, DRAM efficiency): keep the
        # start's and give the measured GPUs their own matmul efficiency.
        shared = ("matmul_efficiency", "attention_efficiency", "bandwidth_efficiency")
        fitted = fitted.model_copy(update={name_: getattr(start, name_) for name_ in shared})
        unidentified = unidentified_time_factors(fit_cases)
        restored = fitted.model_copy(update={name_: getattr(start, name_) for name_ in unidentified})
        fitted = refit_efficiencies(fit_cases, restored)
    if not any(c.measurement.memory_kind in RESERVED_KINDS and c.measurement.peak_memory_gib for c in fit_cases):
        # Nothing measured reserved memory: the fit's allocator overhead is arbitrary.
        fitted = fitted.model_copy(update={"allocator_overhead_fraction": start.allocator_overhead_fraction})
    memory_band, headroom_band, time_band = error_bands(evaluate(fit_cases, fitted))
    fitted = fitted.model_copy(
        update={
            "memory_error_band": widest_bands(start.memory_error_band, memory_band),
            "memory_headroom_band": widest_bands(start.memory_headroom_band, headroom_band),
            "time_error_band": widest_bands(start.time_error_band, time_band),
        }
    )
    return Recalibration(
        coefficients=fitted,
        before=evaluate(cases, start),
        after=evaluate(cases, fitted),
        seeds_before=evaluate(seed_cases, start),
        seeds_after=evaluate(seed_cases, fitted),
    )
