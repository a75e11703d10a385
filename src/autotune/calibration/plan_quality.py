"""Plan quality on the seed sweeps: how far the planner's choice is from the fastest measured setting that ran.

A *sweep* is a set of measured rows from one source table with the same model, GPU, GPU count, sequence
length and method that differ only in what the planner chooses (micro batch, accumulation, checkpointing,
compile, sharding): the 7900 XTX hand sweep of seed 000 and the FSDP vs ZeRO-3 LLaMA table of seed 003 (one
sweep per model × #GPUs). Groups with a single measured setting are listed as skipped (nothing to choose).

For each sweep the planner's candidate list is the measured settings (duplicate rows merged): each is
estimated with ``estimate_setting`` under the row's own workload and ranked exactly as ``planner.search``
ranks (only candidates predicted to fit, ``search.choose`` on the predicted run time, objective 'quality',
which within one method is the shortest run plus the simplicity margin). ``search()`` itself is not called:
its space cannot be restricted to an arbitrary list of measured combinations with different global batches.
The choice is then looked up in the measurements:
  * ratio = measured time of the choice / fastest measured time of a setting that ran (1.00 = the best);
  * the choice ran out of memory in reality: failure ('chose OOM');
  * nothing predicted to fit although a setting ran: failure ('refused');
  * nothing ran and nothing predicted to fit: correct refusal.

Measured times are compared only when they mean the same thing (``time_basis``): whole-run wall times of the
same stated dataset (seed 003: 6,000 samples × 3 epochs); whole-run wall times when the dataset is not
stated (the 7900 XTX sweep) only under the assumption — flagged in the output — that every run of the sweep
covered the same data; then the planner ranks at a nominal dataset size (``NOMINAL_SAMPLES``) and the output
says whether the choice is the same for every larger dataset (choice at infinity = by time per sample).

The script ``benchmarks/plan_quality.py`` prints the result (markdown or JSON); this module returns data
(:class:`Outcome` per sweep, :func:`tally` over them).

``--held-out`` ranks each sweep with coefficients fitted (from the physics priors) on every seed row except
those of the sweep's source table, so the planner has never seen the rows it is judged on.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autotune.calibration.cases import prepare_cases
from autotune.costmodel.estimate import estimate_setting
from autotune.planner.search import Scored, choose, rank_key, run_time_s
from autotune.schemas.calibration import CostCoefficients, Measurement, source_table
from autotune.schemas.objective import Objective
from autotune.schemas.setting import TrainingSetting

NOMINAL_SAMPLES = 51_760
"""Dataset size assumed for ranking when a sweep does not state it: the cleaned Alpaca set that the same seed
file's torchtune runs used (CONDITIONS.md, seed 000). Only the one-off compile time depends on it."""

OBJECTIVE: Objective = "quality"


@dataclass(frozen=True)
class Candidate:
    """One measured setting of a sweep, with every row that measured it (duplicates in the source)."""

    setting: TrainingSetting
    rows: tuple[Measurement, ...]

    @property
    def id(self) -> str:
        """The first row's id."""
        return self.rows[0].id

    @property
    def ran(self) -> bool:
        """At least one row with this setting ran (did not run out of memory)."""
        return any(not r.oom for r in self.rows)

    def measured_time_s(self, basis: str) -> float | None:
        """The measured time of this setting on ``basis`` (the shortest over its rows that ran), or None."""
        values = [v for v in (_measured_value(r, basis) for r in self.rows if not r.oom) if v is not None]
        return min(values) if values else None


@dataclass(frozen=True)
class Sweep:
    """Measured settings under the same constraints, and how their times can be compared."""

    label: str
    candidates: tuple[Candidate, ...]
    basis: str
    """'run' (same stated dataset), 'run, dataset not stated' (assumed the same), 'micro-step per sequence',
    'nothing ran', or 'not comparable'."""
    note: str

    @property
    def dataset_known(self) -> bool:
        """The sweep states its dataset size (the planner can rank whole runs as they were measured)."""
        return self.basis == "run"

    @property
    def comparable(self) -> bool:
        """Measured times of the settings that ran can be compared with each other."""
        return self.basis in ("run", "run, dataset not stated", "micro-step per sequence")


@dataclass(frozen=True)
class Prediction:
    """What the planner sees of one candidate: predicted fit, its sort key, the predicted run time (s)."""

    fits: bool
    key: tuple[float, ...]
    run_time_s: float
    scored: Scored | None = None
    """The planner's view (None for a predictor that only ranks by ``key``)."""


@dataclass(frozen=True)
class Outcome:
    """The planner's choice in one sweep, judged against the measurements."""

    sweep: Sweep
    status: str
    """'best', 'slower', 'chose OOM', 'refused', 'correct refusal', or 'not comparable'."""
    chosen: Candidate | None
    fastest: Candidate | None
    ratio: float | None
    predicted_fit: int
    verdict_errors: tuple[str, ...]
    stable_for_larger_datasets: bool | None = None
    predictions: dict[str, Prediction] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """The planner chose a setting that ran out of memory, or refused although a setting ran."""
        return self.status in ("chose OOM", "refused")


def _measured_value(row: Measurement, basis: str) -> float | None:
    if basis.startswith("run"):
        return row.run_time_s
    if basis == "micro-step per sequence" and row.micro_step_time_s is not None:
        return row.micro_step_time_s / row.setting.micro_batch_size
    return None


def time_basis(rows: Sequence[Measurement]) -> tuple[str, str]:
    """How the measured times of a sweep's rows compare: (basis, note for the reader)."""
    ran = [r for r in rows if not r.oom]
    if not ran:
        return "nothing ran", "every setting ran out of memory"
    if all(r.run_time_s is not None for r in ran):
        totals = {r.workload.total_samples for r in ran}
        if None not in totals and len(totals) == 1:
            return "run", f"wall times of the same stated dataset ({totals.pop():,.0f} samples over all epochs)"
        if totals == {None}:
            return "run, dataset not stated", (
                "wall times; the dataset is not stated: compared assuming every run covered the same data"
            )
        return "not comparable", "wall times over different or partly unstated datasets"
    if all(r.micro_step_time_s is not None and not r.unknown_tokens for r in ran):
        return "micro-step per sequence", "micro-step times per sequence (same tokens per sequence)"
    return "not comparable", "some rows that ran give no comparable time"


def table_of(source: str) -> str:
    """The seed table of a measurement source: its three-digit number ('003'), else the table's name."""
    name = source_table(source)
    match = re.match(r"(\d{3})_", name)
    return match.group(1) if match else name


def find_sweeps(measurements: Sequence[Measurement]) -> tuple[list[Sweep], list[str]]:
    """Group rows into sweeps; returns (sweeps, labels of the groups skipped).

    A group is a sweep when it has at least two distinct settings, or when every row in it ran out of memory
    (then the planner must refuse: a one-setting check of the OOM verdict). Other single-setting groups are
    skipped: there is nothing to choose.
    """
    groups: dict[tuple[str, str, str, int, int, int, str], list[Measurement]] = {}
    for m in measurements:
        key = (
            table_of(m.source),
            m.model,
            m.gpu,
            m.num_gpus_per_node,
            m.num_nodes,
            m.workload.seq_len,
            m.setting.method,
        )
        groups.setdefault(key, []).append(m)
    sweeps, skipped = [], []
    for (table, model, gpu, per_node, nodes, seq_len, method), rows in groups.items():
        gpus = per_node * nodes
        label = f"{table}: {model} on {gpus}× {gpu}, seq {seq_len}, {method}"
        by_setting: dict[str, list[Measurement]] = {}
        for row in rows:
            by_setting.setdefault(row.setting.model_dump_json(), []).append(row)
        if len(by_setting) < 2 and not all(row.oom for row in rows):
            skipped.append(label)
            continue
        candidates = tuple(Candidate(group[0].setting, tuple(group)) for group in by_setting.values())
        basis, note = time_basis(rows)
        sweeps.append(Sweep(label, candidates, basis, note))
    return sweeps, skipped


Predictor = Callable[[Sweep, Candidate, int | None], Prediction]
"""``predict(sweep, candidate, samples)``. For a sweep that states its dataset ``samples`` is None (use the
row's own workload); for one that does not, ``samples`` is the nominal dataset size, or None for the limit of
an infinite dataset (rank by time per sample)."""


def _choose(fitting: Sequence[Candidate], predictions: dict[str, Prediction]) -> Candidate | None:
    """The candidate ``search.choose`` takes among those predicted to fit (its tolerance tie-break included)."""
    if not fitting:
        return None
    scored = [predictions[c.id].scored for c in fitting]
    if any(s is None for s in scored):
        return min(fitting, key=lambda c: predictions[c.id].key)  # no planner's view: its key order decides
    best = choose([s for s in scored if s is not None], OBJECTIVE)
    return next(c for c in fitting if predictions[c.id].scored is best)


def judge(sweep: Sweep, predict: Predictor) -> Outcome:
    """Rank the sweep's candidates as the planner does and judge its choice against the measurements."""
    samples = None if sweep.dataset_known else NOMINAL_SAMPLES
    predictions = {c.id: predict(sweep, c, samples) for c in sweep.candidates}
    fitting = sorted((c for c in sweep.candidates if predictions[c.id].fits), key=lambda c: predictions[c.id].key)
    chosen = _choose(fitting, predictions)
    verdict_errors = tuple(c.id for c in sweep.candidates if predictions[c.id].fits != c.ran)
    comparable_ran = [c for c in sweep.candidates if c.ran and c.measured_time_s(sweep.basis) is not None]
    fastest = min(comparable_ran, key=lambda c: c.measured_time_s(sweep.basis) or 0.0) if comparable_ran else None
    stable: bool | None = None
    if chosen is not None and not sweep.dataset_known:
        at_infinity = {c.id: predict(sweep, c, None) for c in fitting}
        stable = _choose(fitting, at_infinity) == chosen
    ratio = None
    if chosen is None:
        status = "refused" if any(c.ran for c in sweep.candidates) else "correct refusal"
    elif not chosen.ran:
        status = "chose OOM"
    elif not sweep.comparable or fastest is None:
        status = "not comparable"
    else:
        chosen_time, fastest_time = chosen.measured_time_s(sweep.basis), fastest.measured_time_s(sweep.basis)
        assert chosen_time is not None and fastest_time is not None  # both ran on a comparable basis
        ratio = chosen_time / fastest_time
        status = "best" if ratio <= 1.0 else "slower"
    return Outcome(sweep, status, chosen, fastest, ratio, len(fitting), verdict_errors, stable, predictions)


def planner_predictor(coefficients_for: Callable[[Sweep], CostCoefficients]) -> Predictor:
    """The real planner's view: ``estimate_setting`` + ``search.run_time_s`` + ``search.rank_key``.

    ``samples`` given: the row's workload with that dataset size (only when the sweep does not state one);
    ``samples`` None with an unstated dataset: time per sample (a dataset so large that compile is free).
    """

    def predict(sweep: Sweep, candidate: Candidate, samples: int | None) -> Prediction:
        row = candidate.rows[0]
        case = prepare_cases([row])[0]
        workload = row.workload
        if not sweep.dataset_known and samples is not None:
            workload = workload.model_copy(update={"num_samples": samples, "dataset_tokens": None})
        estimate = estimate_setting(case.model, case.cluster, workload, candidate.setting, coefficients_for(sweep))
        if not sweep.dataset_known and samples is None:
            s = candidate.setting
            run = estimate.step_time_s / s.sequences_per_step(case.cluster.world_size)
        else:
            run = run_time_s(estimate)
        scored = Scored(candidate.setting, estimate, run)
        return Prediction(estimate.fits, rank_key(scored, OBJECTIVE), run, scored)

    return predict


@dataclass(frozen=True)
class Tally:
    """Counts over the judged sweeps (what the summary line of ``benchmarks/plan_quality.py`` states)."""

    sweeps: int
    best: int
    """Sweeps where the planner picked the fastest measured setting."""
    ratios: tuple[float, ...]
    """Measured time of the choice / fastest, one per comparable sweep."""
    chose_oom: int
    refused: int
    correct_refusals: int
    assumed_same_data: int
    """Sweeps compared under the same-data assumption (dataset not stated)."""
    not_comparable: int
    skipped: int
    """Single-setting groups skipped."""

    @property
    def median_ratio(self) -> float | None:
        """The median ratio over the comparable sweeps, or None without any."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def worst_ratio(self) -> float | None:
        """The largest ratio over the comparable sweeps, or None without any."""
        return max(self.ratios) if self.ratios else None


def tally(outcomes: Sequence[Outcome], skipped: int) -> Tally:
    """Count the outcomes by status, with the ratios of the comparable sweeps."""
    return Tally(
        sweeps=len(outcomes),
        best=sum(o.status == "best" for o in outcomes),
        ratios=tuple(o.ratio for o in outcomes if o.ratio is not None),
        chose_oom=sum(o.status == "chose OOM" for o in outcomes),
        refused=sum(o.status == "refused" for o in outcomes),
        correct_refusals=sum(o.status == "correct refusal" for o in outcomes),
        assumed_same_data=sum(o.sweep.basis == "run, dataset not stated" for o in outcomes),
        not_comparable=sum(o.status == "not comparable" for o in outcomes),
        skipped=skipped,
    )
