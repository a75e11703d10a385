"""Fit the time coefficients that physics does not give: a few efficiencies per GPU architecture generation.

Free parameters (``schemas/calibration.py`` has each prior and its source):
  * ``matmul_efficiency[generation]`` — large-GEMM fraction of the dense peak, per architecture generation with
    time rows ('ampere', 'hopper', 'blackwell', …); shape effects are in ``gemm.py``, not in this number;
  * ``attention_efficiency[generation]`` — the attention kernels' fraction of the peak;
  * ``bandwidth_efficiency`` — element-wise kernels' fraction of the DRAM bandwidth (one number for all GPUs);
  * ``cpu_adam_params_per_s`` — only when offload rows exist;
  * ``zero3_module_fetch_s`` — only when DeepSpeed ZeRO-3 rows exist (clamped to its schema bounds).

The loss is the mean squared log error of the comparable times (micro-step, optimizer step or whole run) plus a
Gaussian prior on each parameter in log space (σ = ``PRIOR_LOG_SIGMA``): a maximum-a-posteriori fit, so a
generation with few rows stays near its datasheet prior instead of absorbing one stack's slowness. A generation
without rows (and 'default') gets its prior scaled by the geometric mean of fitted / prior of the fitted ones;
per-GPU keys (a user recalibration) take precedence over generations.

**Stacks.** Each source table is one training stack (a hand-written trainer, the 2023 HF Trainer, llm-foundry), and
stacks differ by a factor on everything they run that no setting explains (seed 001's trainer runs every setting
about 1.9× slower than the same settings predict at the other stacks' efficiencies). The fit therefore carries one
nuisance factor per source, ``exp(u_s)`` on all of that source's predicted times, with u_s ≥ 0 measured from the
fastest stack in the fit (min u = 0; a random-intercept model, Gelman & Hill 2007, ch. 12) and a half-normal prior
of σ = ``STACK_LOG_SIGMA`` (a user recalibration measures from its own runs instead: ``reference_stack``). The
coefficients thus describe the fastest stack seen; the factors are reported (``CostCoefficients.stack_time_factor``)
and never used to predict. Without them the one shared ``bandwidth_efficiency`` absorbed seed 001's slowness (it
fell to 0.24, a debt); it is now bounded to what element-wise kernels reach (``BOUNDS``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.calibration.cases import Case, TimeKind, comparable_time
from autotune.calibration.nelder_mead import nelder_mead
from autotune.costmodel.context import SettingContext, setting_context
from autotune.costmodel.device import architecture_generation, device_context
from autotune.costmodel.estimate import compile_time_s
from autotune.costmodel.step_time import predict_time_in
from autotune.profiles.measurements import CORE_SOURCE
from autotune.schemas.calibration import CostCoefficients, field_bounds, source_table

PRIOR_LOG_SIGMA = 0.5
"""One standard deviation of each efficiency's prior, in natural-log units (a factor of 1.65)."""

PRIOR_LOG_SIGMA_BY_FIELD: dict[str, float] = {"lora_target_cpu_s": 1.2, "qlora_linear_cpu_s": 1.2}
"""Wider priors for the per-call CPU costs: no datasheet gives them; the prior (0.3 ms) only says "between 0.1 and
1 ms" (one σ = a factor 3.3 each way)."""

MAX_EVALUATIONS = 1200
"""Nelder–Mead budget (≈ 40 s on 170 rows on one core; the stack factors add one dimension per source)."""

FIRST_STEP = 0.3
"""Nelder–Mead's first step (log units, a factor 1.35) on all rows."""

ROW_LOG_SIGMA = 1.0
"""Expected log error of a row of the foreign tables (the fit's original scale; each table's stack factor takes its
constant slowness): their squared log errors enter the loss unscaled."""


UNBOUNDED_ABOVE_ONE = ("cpu_adam_params_per_s", "zero3_module_fetch_s", "lora_target_cpu_s", "qlora_linear_cpu_s")
"""Fitted fields that are rates or times, not fractions of a peak (the others are capped at 1)."""

CORE_ROW_LOG_SIGMA = 0.05
"""Expected log error of a prediction on the core's own runs: the 1–2 % step-to-step spread of the runs plus the
model error issue 18 aims at (≤ 10 %, halved). The foreign tables' rows keep σ = 1 (the fit's original scale, with
their stack factors): a handful of the core's runs thus outweighs the priors, as 170 foreign rows do."""

SHARED_FIT_FIELDS = ("attention_efficiency",)
"""Coefficients the core's runs do not fix on their own: every core run is at seq 2048, where attention is ~5 % of a
step, so the attention efficiency is left to all the rows."""

CORE_FIRST_STEP = 1.0
"""Nelder–Mead's first step (log units, a factor e) on the core's own rows (few rows, few coefficients)."""

STACK_LOG_SIGMA = 0.5
"""Half-normal prior scale of a stack's slowness factor over the fastest stack, in natural-log units."""

BOUNDED_FIELDS = ("zero3_module_fetch_s", "lora_target_cpu_s", "qlora_linear_cpu_s", "bandwidth_efficiency")
"""Fitted fields the fit clamps to their schema bounds (the ``ge`` / ``le`` of their ``CostCoefficients`` field)."""


def schema_bounds(field: str) -> tuple[float, float]:
    """The (lower, upper) bound of a ``CostCoefficients`` field (``schemas.calibration.field_bounds``), both finite.

    Raises:
        ValueError: the field does not state both bounds (a fit must not run unbounded).
    """
    lower, upper = field_bounds(field)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ValueError(f"CostCoefficients.{field} states no ge / le bounds")
    return lower, upper


BOUNDS: dict[str, tuple[float, float]] = {field: schema_bounds(field) for field in BOUNDED_FIELDS}
"""Schema bounds (``CostCoefficients``) the fit keeps to."""


@dataclass(frozen=True)
class TimeRow:
    """A case with a comparable measured time (``cases.comparable_time``: 'micro-step', 'step' or 'run')."""

    case: Case
    kind: TimeKind
    measured_s: float

    @functools.cached_property
    def context(self) -> SettingContext:
        """The setting's derived facts (``costmodel.context.setting_context``): built once, read by every fit step."""
        m = self.case.measurement
        return setting_context(self.case.model, m.setting, self.case.cluster, m.workload)


def predicted_time_s(row: TimeRow, coefficients: CostCoefficients) -> float:
    """The predicted time of the row's kind (a run: its optimizer steps plus the one-off compile).

    A run's steps are ``Workload.optimizer_steps``: the one count of the run's length, the cost model's too.
    """
    case = row.case
    m = case.measurement
    device = device_context(case.cluster.gpu, coefficients)  # built once per coefficients (cached), not per row
    timing = predict_time_in(row.context, coefficients, device)  # ``step_time.predict_time`` with the context kept
    if row.kind == "micro-step":
        return timing.micro_step_time_s
    if row.kind == "step":
        return timing.step_time_s
    steps = m.workload.optimizer_steps(m.setting, case.cluster.world_size)
    assert steps is not None  # a 'run' row states its dataset size (cases.comparable_time)
    return steps * timing.step_time_s + (compile_time_s(case.model) if m.setting.compile else 0.0)


def time_rows(cases: Sequence[Case]) -> list[TimeRow]:
    """The cases whose time can be compared (``cases.comparable_time``; predicted without the memory model)."""
    rows = []
    for case in cases:
        compared = comparable_time(case.measurement)
        if compared is not None:
            rows.append(TimeRow(case, *compared))
    return rows


Name = tuple[str, str | None]
"""A fitted coefficient: (CostCoefficients field, key in its per-GPU table or None)."""


def _fitted_names(rows: Sequence[TimeRow]) -> list[Name]:
    """The coefficients ``rows`` can identify (module docstring), in a fixed order."""
    settings = [r.case.measurement.setting for r in rows]
    generations = sorted({architecture_generation(r.case.cluster.gpu) for r in rows})
    names: list[Name] = [("matmul_efficiency", g) for g in generations]
    names += [("attention_efficiency", g) for g in generations]
    names.append(("bandwidth_efficiency", None))
    if any(s.offloads_to_cpu for s in settings):
        names.append(("cpu_adam_params_per_s", None))
    if any(s.uses_deepspeed and s.shards_parameters for s in settings):
        names.append(("zero3_module_fetch_s", None))
    # the per-call CPU costs of peft and bitsandbytes: only where the rows run them
    if any(s.uses_adapters for s in settings):
        names.append(("lora_target_cpu_s", None))
    if any(s.method == "qlora" for s in settings):
        names.append(("qlora_linear_cpu_s", None))
    return names


def _unpack(start: CostCoefficients, names: Sequence[Name], point: Sequence[float]) -> CostCoefficients:
    tables: dict[str, dict[str, float]] = {
        "matmul_efficiency": dict(start.matmul_efficiency),
        "attention_efficiency": dict(start.attention_efficiency),
    }
    updates: dict[str, object] = dict(tables)
    for (field, key), value in zip(names, point, strict=True):
        number = math.exp(value)
        if field in BOUNDS:
            number = min(max(number, BOUNDS[field][0]), BOUNDS[field][1])
        elif field not in UNBOUNDED_ABOVE_ONE:
            number = min(1.0, number)
        if key is None:
            updates[field] = number
        else:
            tables[field][key] = number
    return start.model_copy(update=updates)


def _map_fit(
    rows: Sequence[TimeRow],
    start: CostCoefficients,
    names: Sequence[Name],
    reference_stack: str | None,
    step: float = FIRST_STEP,
    row_log_sigma: float = ROW_LOG_SIGMA,
) -> tuple[CostCoefficients, dict[str, float]]:
    """One MAP fit of ``names`` on ``rows`` with one slowness factor per source (module docstring).

    ``step``: the Nelder–Mead simplex's first step in log units; ``row_log_sigma``: the rows' expected log error (their
    squared errors are divided by its square against the priors' penalty).
    """

    def prior(table: dict[str, float], key: str) -> float:
        return table.get(key, table["default"])

    origin = []
    for field, key in names:
        value = getattr(start, field)
        origin.append(math.log(prior(value, key) if key is not None else value))
    tables = [source_table(r.case.measurement.source) for r in rows]
    sources = sorted(set(tables))
    row_stack = [sources.index(table) for table in tables]
    reference = sources.index(reference_stack) if reference_stack in sources else None
    fitted_count = len(names)
    sigmas = [PRIOR_LOG_SIGMA_BY_FIELD.get(field, PRIOR_LOG_SIGMA) for field, _ in names]

    def loss(point: Sequence[float]) -> float:
        coefficients = _unpack(start, names, point[:fitted_count])
        slowness = stack_slowness(point[fitted_count:], reference)
        errors = [
            ((math.log(predicted_time_s(r, coefficients) / r.measured_s) + slowness[stack]) / row_log_sigma) ** 2
            for r, stack in zip(rows, row_stack, strict=True)
        ]
        penalty = sum(((p - o) / sigma) ** 2 for p, o, sigma in zip(point[:fitted_count], origin, sigmas, strict=True))
        penalty += sum((u / STACK_LOG_SIGMA) ** 2 for u in slowness)
        return (sum(errors) + penalty) / len(rows)

    best, _ = nelder_mead(loss, origin + [0.0] * len(sources), step=step, max_evaluations=MAX_EVALUATIONS)
    slowness = stack_slowness(best[fitted_count:], reference)
    return _unpack(start, names, best[:fitted_count]), dict(zip(sources, map(math.exp, slowness), strict=True))


def fit_time_coefficients(
    cases: Sequence[Case], start: CostCoefficients, reference_stack: str | None = None
) -> CostCoefficients:
    """MAP fit of the time coefficients on ``cases`` from ``start`` (the priors); see the module docstring.

    ``reference_stack``: the source table whose stack the coefficients describe (its factor is 1; a user
    recalibration names its own runs); None = the project's own core (``CORE_SOURCE``) when its rows are in the
    fit, else the fastest stack. A reference without rows is ignored.

    The core's own runs first: when the fit has ``CORE_SOURCE`` rows and describes that stack (``reference_stack``
    None or ``CORE_SOURCE``), the coefficients those rows identify (``_fitted_names`` of them but
    ``SHARED_FIT_FIELDS``: their generation's matmul efficiency, the DRAM efficiency, the per-call CPU costs) are
    fitted on them alone, each row's log error scaled by ``CORE_ROW_LOG_SIGMA``, then held while every row fits the
    rest with one slowness factor per stack (the fastest stack, the core in the shipped fit, at 1). Another stack's
    speed thus never moves what the core measured.
    """
    rows = time_rows(cases)
    if not rows:
        return start
    generations = sorted({architecture_generation(r.case.cluster.gpu) for r in rows})
    sources = {source_table(r.case.measurement.source) for r in rows}
    names = _fitted_names(rows)
    fitted = start
    if reference_stack in (None, CORE_SOURCE) and CORE_SOURCE in sources:
        core_rows = [r for r in rows if source_table(r.case.measurement.source) == CORE_SOURCE]
        core_names = [name for name in _fitted_names(core_rows) if name[0] not in SHARED_FIT_FIELDS]
        # a wide first step: a per-call CPU cost changes the loss only once a pass turns dispatch-bound
        fitted, _ = _map_fit(
            core_rows, start, core_names, CORE_SOURCE, step=CORE_FIRST_STEP, row_log_sigma=CORE_ROW_LOG_SIGMA
        )
        names = [name for name in names if name not in core_names]
    fitted, factors = _map_fit(rows, fitted, names, reference_stack)
    return _transfer_to_unfitted(fitted, start, generations).model_copy(update={"stack_time_factor": factors})


def stack_slowness(point: Sequence[float], reference: int | None = None) -> list[float]:
    """Each stack's log slowness over the reference stack (index into ``point``); [] for no stacks.

    Over the fastest one in the fit (min = 0) when ``reference`` is None.
    """
    if not point:
        return []
    base = min(point) if reference is None else point[reference]
    return [u - base for u in point]


def _transfer_to_unfitted(
    fitted: CostCoefficients, start: CostCoefficients, generations: list[str]
) -> CostCoefficients:
    """Generations without rows (and 'default') get their prior times the fitted generations' mean fitted / prior ratio.

    The mean is geometric, over the fitted generations: what the data says about the stack carries over, the datasheet
    ratio between architectures stays.
    """
    updates: dict[str, object] = {}
    for field in ("matmul_efficiency", "attention_efficiency"):
        before, after = getattr(start, field), getattr(fitted, field)
        ratios = [after[g] / before.get(g, before["default"]) for g in generations]
        scale = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        table = dict(after)
        for key in {*before, "default"} - set(generations):
            table[key] = min(1.0, before.get(key, before["default"]) * scale)
        updates[field] = table
    return fitted.model_copy(update=updates)
