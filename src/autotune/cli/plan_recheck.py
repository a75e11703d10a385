"""A plan about to be launched, re-validated against its model and card with the checks of ``autotune plan``.

A plan file can be edited by hand (or come from another autotune version); ``autotune launch`` and
``--dry-run`` run it through the same rules ``autotune plan`` applies to forced options, so that it is refused
or warned with the same words before anything is written:

- the GPU name resolves in the catalog (:func:`autotune.profiles.catalog.resolve_gpu`; unknown → refused);
- micro batch × accumulation × GPUs equals the global batch, and the forced setting runs on that card
  (:class:`autotune.planner.request.PlanRequest` and :func:`autotune.planner.space.check_overrides_supported`,
  e.g. ``sharding=fsdp`` on one GPU, qlora on a card without bitsandbytes; refused);
- ``seq_len`` above the model's ``max_position_embeddings`` (warned, as ``plan`` notes it);
- the setting, re-estimated with the plan's calibration, still fits the card (warned, as ``--set`` does).
"""

from __future__ import annotations

from autotune.errors import InvalidRequestError, UnknownNameError
from autotune.launcher.overrides import Estimator, GpuResolver
from autotune.planner.fit import fit_shortfall
from autotune.schemas.plan import PlanFile


def check_like_plan(plan: PlanFile, resolve_gpu: GpuResolver, *, prefix: str = "--set") -> None:
    """Refuse a setting that ``autotune plan`` would refuse as forced options, with the same checks and messages.

    The checks are :class:`~autotune.planner.request.PlanRequest`'s batch rule and
    :func:`autotune.planner.space.check_overrides_supported`.

    Raises:
        UnknownNameError: the plan's GPU is not in the catalog (the message of ``plan --gpu``).
        InvalidRequestError: one line, ``prefix: `` then the message ``autotune plan`` gives.
    """
    from autotune.planner.request import Overrides, PlanRequest
    from autotune.planner.space import check_overrides_supported
    from autotune.session.resolve import validated

    setting = plan.setting
    cluster = plan.cluster
    gpu = resolve_gpu(cluster.gpu)
    try:
        forced = Overrides(
            method=setting.method,
            sharding=setting.sharding,
            optimizer=setting.optimizer,
            precision=setting.precision,
            loss_impl=setting.loss_impl,
            micro_batch_size=setting.micro_batch_size,
            grad_accum=setting.grad_accum,
            grad_sync=setting.grad_sync,
            optimizer_in_backward=setting.optimizer_in_backward or None,
            fp8=setting.fp8 or None,
            bf16_stochastic_rounding=setting.bf16_stochastic_rounding or None,
            activation_offloading=setting.activation_offloading or None,
        )
        request = validated(
            PlanRequest,
            model=plan.model,
            model_source=plan.model_source,
            cluster=cluster.spec(gpu),
            workload=plan.workload,
            overrides=forced,
        )
        check_overrides_supported(request)
    except InvalidRequestError as error:
        raise InvalidRequestError(f"{prefix}: {error} (autotune plan refuses the same)") from None


def seq_len_warning(plan: PlanFile) -> str | None:
    """The note ``autotune plan`` prints for a sequence length above the model's maximum, or None."""
    from autotune.session.resolve import seq_len_note

    return seq_len_note(plan.model, plan.workload.seq_len)


def recheck_plan_file(
    plan: PlanFile,
    path: str,
    *,
    resolve_gpu: GpuResolver,
    estimate: Estimator | None,
    estimator_error: str = "",
) -> list[str]:
    """Re-validate a plan file before it is launched (see the module doc); returns warnings, one line each.

    Args:
        plan: the plan as loaded.
        path: the plan file's name, for the messages.
        resolve_gpu: the GPU catalog lookup (raises ``UnknownNameError``).
        estimate: the cost model with the plan's calibration
            (:func:`autotune.session.calibration_choice.plan_estimator`);
            None when that calibration cannot be found.
        estimator_error: why there is no estimator (said in a warning: the fit is then not re-checked).

    Raises:
        UnknownNameError / InvalidRequestError: what ``autotune plan`` refuses, prefixed with the file name.
    """
    try:
        check_like_plan(plan, resolve_gpu, prefix=path)
    except UnknownNameError as error:
        raise UnknownNameError(f"{path}: {error}") from None
    warnings = [f"{path}: {note}" for note in [seq_len_warning(plan)] if note]
    if estimate is None:
        warnings.append(f"{path}: the memory fit is not re-checked ({estimator_error})")
        return warnings
    prediction = estimate(plan.model, plan.cluster.spec(resolve_gpu(plan.cluster.gpu)), plan.workload, plan.setting)
    if not prediction.fits:
        warnings.append(f"{path}: re-estimated, the plan does not fit: {fit_shortfall(prediction)}")
    return warnings
