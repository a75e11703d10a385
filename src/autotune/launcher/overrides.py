"""``--set key=value`` overrides of a plan's setting, workload and cluster, re-checked by the cost model.

Keys are field names of :class:`~autotune.schemas.setting.TrainingSetting` (``micro_batch_size``),
:class:`~autotune.schemas.setting.Workload` (``seq_len``) or
:class:`~autotune.schemas.plan.ClusterChoice` (``num_gpus_per_node``), bare or with their section
(``setting.grad_ckpt``, ``workload.seq_len``, ``cluster.num_nodes``), or of the plan's training recipe
:class:`~autotune.schemas.recipe.TrainingRecipe` (``training.learning_rate``; it follows a changed ``method``
unless it was edited); values are parsed by the
schemas' pydantic validation (``false``, ``2``, ``1e-4``, ``q_proj,v_proj``; ``none`` / ``null``
for an optional field).

The global batch stays ``micro_batch_size × grad_accum × world size`` (its definition in
:mod:`autotune.schemas.setting`): when an override changes one side, the free member follows
(``grad_accum`` when the micro batch, the global batch or the GPU count changes; the global batch
when only ``grad_accum`` changes), and a combination that cannot hold is refused.

The launcher does not import the cost model (dependency direction ``cli → launcher → schemas``):
the caller passes the estimator and the GPU catalog lookup as functions.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from autotune.errors import InvalidRequestError
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.plan import ClusterChoice, PlanFile
from autotune.schemas.recipe import TrainingRecipe, default_recipe
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.trainer_options import TrainerOptions, option_flag
from autotune.schemas.workload import Workload
from autotune.validation import format_validation_error

Estimator = Callable[[ModelSpec, ClusterSpec, Workload, TrainingSetting], Estimate]
"""``autotune.costmodel.estimate.estimate_setting``'s signature."""

GpuResolver = Callable[[str], GpuSpec]
"""GPU catalog key -> GpuSpec (``autotune.profiles.catalog.resolve_gpu(key)[0]``)."""

SECTIONS: Final[dict[str, type[BaseModel]]] = {
    "setting": TrainingSetting,
    "workload": Workload,
    "cluster": ClusterChoice,
    "training": TrainingRecipe,
}

_NONE_WORDS: Final[frozenset[str]] = frozenset({"none", "null", "~"})
_BATCH_KEYS: Final[frozenset[str]] = frozenset(
    {"micro_batch_size", "grad_accum", "global_batch_size", "num_gpus_per_node", "num_nodes"}
)


def valid_keys() -> list[str]:
    """Every overridable key, as ``section.field``."""
    return [f"{section}.{name}" for section, model in SECTIONS.items() for name in model.model_fields]


def parse_overrides(sets: Sequence[str]) -> dict[str, dict[str, str | None]]:
    """Split ``key=value`` strings into ``{section: {field: raw value}}`` (a later key wins).

    Raises:
        InvalidRequestError: no ``=``, or an unknown key (one line with the closest and the valid keys).
    """
    parsed: dict[str, dict[str, str | None]] = {section: {} for section in SECTIONS}
    for item in sets:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidRequestError(f"--set expects key=value (e.g. micro_batch_size=2), got {item!r}")
        section, name = _resolve_key(key)
        value = raw.strip()
        parsed[section][name] = None if value.lower() in _NONE_WORDS else value
    return parsed


def apply_overrides(
    plan: PlanFile,
    sets: Sequence[str],
    *,
    estimate: Estimator,
    resolve_gpu: GpuResolver,
) -> PlanFile:
    """The plan with ``sets`` applied and its prediction recomputed (``plan`` itself if ``sets`` is empty).

    ``estimate`` is called once, with the new setting on the new cluster; the returned plan's
    ``prediction`` is its result (check ``prediction.fits``).

    Raises:
        InvalidRequestError: malformed or unknown key, a value the schema rejects (naming the key),
            or a batch combination that cannot satisfy global = micro × accumulation × world size.
    """
    if not sets:
        return plan
    overrides = parse_overrides(sets)
    setting = _updated(plan.setting, overrides["setting"], "setting")
    workload = _updated(plan.workload, overrides["workload"], "workload")
    cluster = _updated(plan.cluster, overrides["cluster"], "cluster")
    training = _updated(plan.training, overrides["training"], "training")
    if setting.method != plan.setting.method and plan.training == default_recipe(plan.setting.method):
        training = _updated(default_recipe(setting.method), overrides["training"], "training")
    touched = {name for section in overrides.values() for name in section}
    if touched & _BATCH_KEYS:
        setting, workload = _keep_global_batch(setting, workload, cluster, touched)
    prediction = estimate(plan.model, cluster.spec(resolve_gpu(cluster.gpu)), workload, setting)
    return plan.model_copy(
        update={
            "setting": setting,
            "workload": workload,
            "cluster": cluster,
            "training": training,
            "prediction": prediction,
        }
    )


def changed_fields(before: PlanFile, after: PlanFile) -> list[tuple[str, Any, Any]]:
    """``(section.field, old, new)`` for every setting / workload / cluster / training field that differs."""
    changes: list[tuple[str, Any, Any]] = []
    for section in SECTIONS:
        old = getattr(before, section).model_dump()
        new = getattr(after, section).model_dump()
        changes += [(f"{section}.{name}", old[name], new[name]) for name in old if old[name] != new[name]]
    return changes


def _resolve_key(key: str) -> tuple[str, str]:
    section, dot, name = key.partition(".")
    if dot and section in SECTIONS and name in SECTIONS[section].model_fields:
        return section, name
    if not dot:
        for candidate, model in SECTIONS.items():
            if key in model.model_fields:
                return candidate, key
    run_option = key.rpartition(".")[2]
    if run_option in TrainerOptions.model_fields:
        raise InvalidRequestError(
            f"--set: '{key}' is a run option, not a plan field: use {option_flag(run_option)} instead"
        )
    bare = [name for model in SECTIONS.values() for name in model.model_fields]
    close = difflib.get_close_matches(key.rpartition(".")[2], bare, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise InvalidRequestError(
        f"--set: unknown key '{key}' ({hint}valid keys, the section is optional: {', '.join(valid_keys())})"
    )


def _updated(current: Any, changes: dict[str, Any], section: str) -> Any:
    if not changes:
        return current
    model = type(current)
    try:
        return model.model_validate({**current.model_dump(), **changes})
    except ValidationError as error:
        raise InvalidRequestError(f"--set {section}: {format_validation_error(error, model)}") from None


def _keep_global_batch(
    setting: TrainingSetting, workload: Workload, cluster: ClusterChoice, touched: set[str]
) -> tuple[TrainingSetting, Workload]:
    world_size = cluster.world_size
    per_accum = setting.micro_batch_size * world_size
    product = per_accum * setting.grad_accum
    if "grad_accum" in touched and "global_batch_size" not in touched:
        return setting, _updated(workload, {"global_batch_size": product}, "workload")
    if "grad_accum" not in touched:
        grad_accum, remainder = divmod(workload.global_batch_size, per_accum)
        if grad_accum >= 1 and remainder == 0:
            return _updated(setting, {"grad_accum": grad_accum}, "setting"), workload
    elif product == workload.global_batch_size:
        return setting, workload
    raise InvalidRequestError(
        f"global_batch_size {workload.global_batch_size} != micro_batch_size {setting.micro_batch_size} "
        f"× grad_accum {setting.grad_accum} × {world_size} GPU(s): set grad_accum and global_batch_size "
        f"so that they match (e.g. --set grad_accum=N alone makes global_batch_size follow)"
    )


def micro_batch_neighbours(plan: PlanFile, *, estimate: Estimator, resolve_gpu: GpuResolver) -> list[PlanFile]:
    """The plan with micro batch ×2 (accumulation ÷2) and ÷2 (accumulation ×2), where both stay whole.

    The global batch stays the same; each neighbour's prediction is recomputed with ``estimate``
    (``autotune probe`` measures these to pin the micro-batch dependence of the cost model).
    """
    setting = plan.setting
    pairs = []
    if setting.grad_accum % 2 == 0:
        pairs.append((setting.micro_batch_size * 2, setting.grad_accum // 2))
    if setting.micro_batch_size % 2 == 0:
        pairs.append((setting.micro_batch_size // 2, setting.grad_accum * 2))
    return [
        apply_overrides(
            plan, [f"micro_batch_size={micro}", f"grad_accum={accum}"], estimate=estimate, resolve_gpu=resolve_gpu
        )
        for micro, accum in pairs
    ]
