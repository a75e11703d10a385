"""One stated setting, evaluated: the inputs of ``estimate`` and ``trace``, and the estimate with its notes.

The options given fix the setting; the rest take :class:`autotune.schemas.setting.TrainingSetting`'s defaults
(:func:`setting_inputs`). :func:`estimate_one` prices it on the request's workload, or on a dataset's examples packed
or padded (:func:`estimate_dataset`), with the same notes ``plan`` gives (offload, dropout, kernels, masked
attention) and, when it does not fit, the nearest setting that does (:func:`nearest_note`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InvalidRequestError
from autotune.planner.packing import choose_packing
from autotune.planner.space import grad_sync_error, offload_accumulation_error, sharding_error
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.dataset_stats import PACKINGS, DatasetStats, Packing, dataset_batches
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, default_precision, default_sharding, fp8_error
from autotune.schemas.workload import Workload
from autotune.session.calibration_choice import coefficients_from_option
from autotune.session.dataset_lengths import (
    check_packing,
    dataset_samples,
    packing_choice_note,
    packing_layouts,
    packing_note,
)
from autotune.session.dataset_plan import eval_dataset_stats
from autotune.session.planning import PlanOptions
from autotune.session.resolve import (
    eval_data,
    evaluated_workload,
    resolve_cluster,
    resolve_model,
    setting_notes,
    validated,
)
from autotune.session.setting_options import SettingOptions


@dataclass(frozen=True)
class SettingInputs:
    """A resolved model, cluster, setting and workload from the command-line flags."""

    spec: ModelSpec
    source: str
    cluster: ClusterSpec
    notes: list[str]
    setting: TrainingSetting
    workload: Workload


def setting_inputs(
    model: str,
    gpu: str,
    num_gpus: int,
    num_nodes: int,
    host_memory_gib: float | None,
    options: SettingOptions,
    *,
    seq_len: int,
    interconnect: str | None = None,
    num_samples: int | None = None,
    dataset_tokens: int | None = None,
    epochs: float = 1.0,
) -> SettingInputs:
    """The one setting that ``estimate`` and ``trace`` evaluate: the options given, the setting's defaults for the rest.

    Sharding and precision not given take the cluster's defaults (:func:`default_sharding`,
    :func:`default_precision`); every other field its :class:`TrainingSetting` default. The global batch is
    micro batch × accumulation × GPUs.

    Raises:
        AutotuneError: unknown model or GPU, or an invalid setting (one line each).
    """
    spec, source = resolve_model(model)
    cluster, notes = resolve_cluster(gpu, num_gpus, num_nodes, host_memory_gib, interconnect)
    given = options.overrides().forced()
    defaults = {
        "sharding": default_sharding(cluster.world_size),
        "precision": default_precision(cluster.gpu.supports_bf16),
    }
    setting = validated(TrainingSetting, **{**defaults, **given})
    card = cluster.gpu
    problem = (
        grad_sync_error(setting.grad_sync, setting.sharding, cluster.world_size)
        or offload_accumulation_error(setting.sharding, setting.grad_accum, setting.grad_sync, cluster.world_size)
        or fp8_error(setting.fp8, setting.method, card.name, card.vendor, card.generation)
    )
    if problem:
        raise InvalidRequestError(problem)
    workload = validated(
        Workload,
        seq_len=seq_len,
        global_batch_size=setting.sequences_per_step(cluster.world_size),
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
    )
    return SettingInputs(spec, source, cluster, notes, setting, workload)


@dataclass(frozen=True)
class EstimateOutcome:
    """One stated setting's estimate: the inputs it was made from, the estimate, the dataset's layout, the notes."""

    inputs: SettingInputs
    """The resolved model, cluster, setting and workload (the workload before a dataset's layout and eval set)."""
    workload: Workload
    """The workload priced: the dataset's chosen layout and the eval set, where given."""
    estimate: Estimate
    dataset: DatasetStats | None
    """The dataset's statistics with the layout priced (``packing``), or None without ``dataset``."""
    notes: list[str]

    def json_dict(self) -> dict[str, Any]:
        """What ``autotune estimate --json`` prints (without ``trace``): the estimate, the setting, notes, dataset."""
        data = {
            **self.estimate.model_dump(mode="json"),
            "setting": self.inputs.setting.model_dump(mode="json"),
            "notes": self.notes,
        }
        if self.dataset is not None:
            data["dataset"] = self.dataset.model_dump(mode="json")
        return data


def estimate_one(options: PlanOptions) -> EstimateOutcome:
    """Estimate the setting ``options`` state (the rest at their defaults) on their workload, dataset and eval set.

    ``options.num_gpus`` is one count; the global batch is micro batch × accumulation × GPUs (``global_batch_size`` is
    not read).

    Raises:
        AutotuneError: unknown model or GPU, an invalid value, a sharding the GPUs cannot run, or what tokenizing
            the dataset refuses (one line each).
    """
    check_packing(options.packing, options.dataset)
    evaluation = eval_data(options.eval_dataset, options.eval_fraction, options.eval_steps)
    stats: DatasetStats | None = None
    notes: list[str] = []
    num_samples = options.num_samples
    if options.dataset is not None:
        sized = options.num_samples is not None or options.dataset_tokens is not None
        num_samples, stats, notes = dataset_samples(
            options.model, options.dataset, options.tokenizer, options.dataset_format, options.max_rows,
            options.seq_len, sized,
        )  # fmt: skip
    inputs = setting_inputs(
        options.model, options.gpu, options.num_gpus, options.num_nodes, options.host_memory_gib, options.setting,
        seq_len=options.seq_len, num_samples=num_samples, dataset_tokens=options.dataset_tokens, epochs=options.epochs,
        interconnect=options.interconnect,
    )  # fmt: skip
    spec, cluster, stated, workload = inputs.spec, inputs.cluster, inputs.setting, inputs.workload
    notes = notes + inputs.notes
    eval_stats = None
    if evaluation is not None and evaluation.eval_dataset is not None and workload.total_samples is not None:
        eval_stats = eval_dataset_stats(
            options.model, evaluation.eval_dataset, options.tokenizer, options.dataset_format, options.max_rows,
            options.seq_len,
        )  # fmt: skip
    rows = stats.rows_total if stats is not None else None
    evaluate = functools.partial(
        evaluated_workload, evaluation=evaluation, eval_steps=options.eval_steps, dataset_rows=rows,
        eval_stats=eval_stats,
    )  # fmt: skip
    coefficients, _ = coefficients_from_option(options.calibration)
    topology_error = sharding_error(stated.sharding, cluster.world_size)
    if topology_error:
        raise InvalidRequestError(topology_error)
    if stats is not None:
        chosen, workload, estimate, layout_notes = estimate_dataset(
            spec, cluster, workload, stated, coefficients, stats, options.packing, evaluate
        )
        stats = stats.model_copy(update={"packing": chosen})
        notes = layout_notes + notes
    else:
        workload = evaluate(workload)
        estimate = estimate_setting(spec, cluster, workload, stated, coefficients)
    notes += estimate_notes(spec, cluster, workload, stated, coefficients, estimate, options.host_memory_gib)
    return EstimateOutcome(inputs, workload, estimate, stats, notes)


def estimate_notes(
    spec: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    setting: TrainingSetting,
    coefficients: CostCoefficients,
    estimate: Estimate,
    host_memory_gib: float | None,
) -> list[str]:
    """The notes of one estimated setting, and the nearest setting that fits when it does not.

    The first are :func:`autotune.session.resolve.setting_notes`, the same as ``plan``'s.
    """
    notes = setting_notes(
        spec, cluster, workload, setting, coefficients, estimate.step_time_s, host_memory_gib, [setting]
    )
    if not estimate.fits:
        notes.append(nearest_note(spec, cluster, workload, estimate, setting.method, coefficients))
    return notes


def estimate_dataset(
    spec: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    setting: TrainingSetting,
    coefficients: CostCoefficients,
    stats: DatasetStats,
    packing: str,
    evaluate: Callable[[Workload], Workload] | None = None,
) -> tuple[Packing, Workload, Estimate, list[str]]:
    """The estimate of ``setting`` on ``stats``'s examples as ``packing`` says (``auto``: the faster whole run).

    ``workload``: its sequence length, batch and epochs (the dataset gives the size and batches); ``evaluate``: each
    layout's workload with its eval set priced (``resolve.evaluated_workload``). Returns the layout, its workload, its
    estimate and notes (the layout's workload, and with ``auto`` both runs' times). With ``auto`` and neither layout
    fitting: packed.
    """
    workloads = {layout: workload.with_dataset(*dataset_batches(stats, layout)) for layout in PACKINGS}
    if evaluate is not None:
        workloads = {layout: evaluate(workload) for layout, workload in workloads.items()}
    layouts = packing_layouts(packing)
    estimates = {
        layout: estimate_setting(spec, cluster, workloads[layout], setting, coefficients) for layout in layouts
    }
    fitting = {layout: e.total_time_s if e.fits else None for layout, e in estimates.items()}
    chosen = choose_packing(fitting) if any(t is not None for t in fitting.values()) else layouts[0]
    notes = [packing_note(stats, chosen)]
    if len(layouts) > 1:
        notes.append(
            packing_choice_note(chosen, {layout: e.total_time_s for layout, e in estimates.items()}, "estimate")
        )
    return chosen, workloads[chosen], estimates[chosen], notes


def nearest_note(
    spec: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    estimate: Estimate,
    method: str,
    coefficients: CostCoefficients,
) -> str:
    """'does not fit: …; nearest that fits: …' — the planner's best with the same method (else any method)."""
    from autotune.planner.fit import fit_shortfall, nearest_fitting
    from autotune.planner.request import PlanRequest

    request = PlanRequest(
        model=spec, model_source=spec.key, cluster=cluster, workload=workload, coefficients=coefficients
    )
    nearest = nearest_fitting(request, {"method": method})
    head = f"does not fit: {fit_shortfall(estimate)}"
    if nearest is None:
        return head + "; nothing fits this model and sequence length on these GPUs"
    e = nearest.estimate
    return head + (
        f"; nearest that fits: {nearest.setting.short()} (peak {e.peak_memory_gib:.1f} GiB, "
        f"{e.tokens_per_s:,.0f} tokens/s; autotune plan shows why)"
    )
