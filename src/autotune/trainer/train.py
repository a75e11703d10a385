"""Wire the training core together: plan → data → model → Trainer → checkpoints, weights, report."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import warnings
from datetime import datetime, timezone
from typing import Any

import torch
import transformers
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from autotune.errors import AutotuneError, ConfigError, TrainingDivergedError
from autotune.quiet import is_verbose, quiet_third_party
from autotune.run_lock import acquire, describe_owner
from autotune.schemas.packing import packed_layout
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan
from autotune.schemas.run_report import RunStatus
from autotune.schemas.setting import attention_run_error
from autotune.schemas.trainer_options import held_out_rows
from autotune.schemas.training_stack import (
    ALLOW_UNTESTED_ENV,
    installed_versions,
    untested_stack_allowed,
    untested_stack_error,
)
from autotune.schemas.workload import PaddedBatches
from autotune.trainer.activation_offload import offload_layer_activations
from autotune.trainer.args import TrainerArgs
from autotune.trainer.callbacks import (
    MetricsCallback,
    ProgressCallback,
    RunMetrics,
    StopOnNonFiniteLossCallback,
    StopOnSignalCallback,
)
from autotune.trainer.checkpoints import (
    ResumePoint,
    out_of_space,
    recorded_cpu_threads,
    resolve_start,
    write_manifest,
)
from autotune.trainer.chunked_loss import ChunkedLossTrainer
from autotune.trainer.consistency import check_model_matches_plan, check_resume_plan
from autotune.trainer.data import build_collator, build_train_dataset, detect_format, load_raw_dataset
from autotune.trainer.data_checks import check_local_file, check_rows
from autotune.trainer.fp8 import apply_fp8, check_fp8_runnable
from autotune.trainer.guard import check_runtime
from autotune.trainer.hf_args import build_training_arguments
from autotune.trainer.in_backward import in_backward_trainer_class
from autotune.trainer.kernels import apply_kernels, check_kernels_runnable
from autotune.trainer.model import (
    apply_method,
    choose_precision,
    count_parameters,
    load_model,
    load_tokenizer,
    resolve_source,
)
from autotune.trainer.profiling import profile_callbacks
from autotune.trainer.report import build_report, describe_device, write_report
from autotune.trainer.rounding import check_rounding_runnable, rounded_optimizer
from autotune.trainer.staged_save import staged_trainer_class

logger = logging.getLogger("autotune.trainer")


def check_output_dir(args: TrainerArgs) -> ResumePoint:
    """Refuse to overwrite a run; with --resume the newest intact checkpoint (see :mod:`.checkpoints`).

    Raises:
        ConfigError: OUT holds a run without --resume; --resume of a completed run, or with no
            intact checkpoint.
    """
    return resolve_start(args.run_dir, args.checkpoints_dir, args.report_path, resume=args.resume)


class _GuardCallback(TrainerCallback):
    """Runs the runtime guard once the Trainer has prepared the model (distributed wrappers in place)."""

    def __init__(self, plan: PlanFile) -> None:
        self.plan = plan
        self.trainer: Trainer | None = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        assert self.trainer is not None
        check_runtime(self.trainer, self.plan)


def _configure_logging() -> None:
    """Our progress at INFO on rank 0; third-party output only with ``AUTOTUNE_VERBOSE`` (see autotune.quiet).

    Called after the heavy imports: libraries such as DeepSpeed set their logger levels when they load.
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO if int(os.environ.get("RANK", "0")) == 0 else logging.WARNING)
    if is_verbose():
        transformers.logging.set_verbosity_warning()
        # torch.distributed's own deprecation notices, repeated every step by DeepSpeed's collectives
        warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    else:
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    quiet_third_party()


def seed_everything(seed: int, *, full_determinism: bool = False) -> None:
    """Seed Python, NumPy and torch once, before anything random (the adapters' init, data order, dropout).

    ``transformers.set_seed``; with ``full_determinism`` ``transformers.enable_full_determinism`` (also
    deterministic kernels). The Trainer seeds again with the same seed (``TrainingArguments.seed``), which
    is too late for the adapters: peft initialises them when the model is built.
    """
    if full_determinism:
        transformers.enable_full_determinism(seed)
    else:
        transformers.set_seed(seed)


def run(args: TrainerArgs) -> int:
    """Run one training invocation as the plan says; write checkpoints, final weights and the report.

    Returns:
        The process exit code: 0 when the run completed, 128 + N when signal N (SIGINT 2 → 130, SIGTERM
        15 → 143) stopped it after saving a checkpoint — the shell's convention for a process ended by a
        signal, so that a script can tell an interrupted run (resume it) from a finished one.

    Raises:
        ConfigError: an untested version of the training stack; bad plan (also one whose attention implementation
            or fused kernels cannot run), output directory,
            dataset or model source; the disk filled up (the message says what was kept).
        InvalidRequestError: the run directory is in use by another run.
        RuntimeGuardError: what runs is not what was planned.
        TrainingDivergedError: the loss became NaN/inf; the report (status failed) says at which step.
    """
    _configure_logging()
    stack_error = untested_stack_error(installed_versions())
    if stack_error and untested_stack_allowed():
        logger.warning("%s: running anyway (%s=1)", stack_error.split(";")[0], ALLOW_UNTESTED_ENV)
    elif stack_error:  # autotune launch refuses it before this; python -m autotune.trainer run by hand does here
        raise ConfigError(stack_error)
    seed_everything(args.seed, full_determinism=args.full_determinism)
    plan = load_plan(args.plan_path)
    attention_error = attention_run_error(plan.setting.attention_impl)
    if attention_error:  # a plan edited by hand: autotune launch refuses it before this
        raise ConfigError(f"{args.plan_path}: {attention_error}")
    check_kernels_runnable(plan.setting, cpu=args.cpu)
    check_fp8_runnable(plan.setting, cpu=args.cpu)
    check_rounding_runnable(plan.setting)
    created = not args.run_dir.exists()
    lock = acquire(args.output_dir) if int(os.environ.get("RANK", "0")) == 0 else None
    if lock is not None and lock.previous_owner:
        logger.info("took over the stale lock of %s (no longer running)", describe_owner(lock.previous_owner))
    try:
        stopped_by = _run(args, plan)
    except Exception as error:
        if not out_of_space(error, args.run_dir):
            raise
        raise ConfigError(  # one line saying what was kept, no traceback
            f"{' '.join(str(error).split())[:300]} — stopped; kept in {args.output_dir}: the plan, every "
            "checkpoint whose save finished (a partial one is ignored by --resume); free the space and resume "
            "with --resume"
        ) from error
    finally:
        if lock is not None:
            lock.release()
            if created:  # refused before anything was written: leave no empty directory behind
                with contextlib.suppress(OSError):
                    args.run_dir.rmdir()
    return 0 if stopped_by is None else 128 + stopped_by


def _run(args: TrainerArgs, plan: PlanFile) -> int | None:
    setting = plan.setting
    start = check_output_dir(args)
    for line in start.skipped:
        logger.warning("skipped checkpoint %s", line)
    if start.checkpoint is not None:
        check_resume_plan(start.checkpoint, plan)
        logger.info("resuming from %s (step %d)", start.checkpoint, start.step)
        threads = recorded_cpu_threads(start.checkpoint)
        if args.cpu and threads is not None and threads != torch.get_num_threads():
            logger.info("computing with %d CPU threads, as the run did before the stop", threads)
            torch.set_num_threads(threads)
    resume_from = start.checkpoint
    checked = check_local_file(args.dataset, args.dataset_format)  # streamed, names the line; before loading
    raw = load_raw_dataset(args.dataset)
    fmt = detect_format(list(raw.column_names), args.dataset_format, args.dataset)
    if not checked:
        check_rows(raw, fmt, args.dataset)

    source = resolve_source(plan.model_source)
    tokenizer = load_tokenizer(source)
    pack = not isinstance(plan.workload.batches, PaddedBatches)  # filled and packed workloads train on packed blocks
    layout = packed_layout(setting.attention_impl) if pack else None
    if pack and layout is None:
        logger.warning("attention_impl %s cannot keep packed examples apart: padded batches", setting.attention_impl)
    raw, eval_raw = _eval_split(raw, fmt, args)
    train_dataset = build_train_dataset(raw, tokenizer, fmt, plan.workload.seq_len, layout is not None, args.dataset)
    eval_dataset = None
    if eval_raw is not None:
        eval_name = args.eval_dataset or f"{args.dataset} (held out: {args.eval_fraction})"
        packed = layout is not None
        eval_dataset = build_train_dataset(eval_raw, tokenizer, fmt, plan.workload.seq_len, packed, eval_name)

    precision = choose_precision(setting, args.cpu)
    training_args = build_training_arguments(plan, args, precision)  # before the model: ZeRO-3 init
    _ = training_args.device  # initialises the process group, so ZeRO-3 partitions over every rank
    if training_args.deepspeed:
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo" if args.cpu else "nccl")  # reuses the process group
    device_map = None
    if setting.method == "qlora" and not args.cpu and torch.cuda.is_available():
        device_map = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    model = load_model(source, setting, precision, device_map)
    check_model_matches_plan(model.config, plan)
    apply_kernels(model, setting)  # before peft: Liger patches the base model's modules
    apply_fp8(model, setting)  # before peft: the base linears become torchao Float8Linear
    model = apply_method(model, setting)
    if setting.activation_offloading:  # each decoder layer's saved tensors on the host (trainer/activation_offload.py)
        offload_layer_activations(model)
    trainable, total = count_parameters(model)
    logger.info(
        "model %s (%s): %s of %s parameters train", plan.model.key, setting.short(), f"{trainable:,}", f"{total:,}"
    )

    tracker_directories(args)
    metrics = RunMetrics()
    if resume_from is not None:
        metrics.restore_history(resume_from)  # the report holds the whole run, not only the steps after the resume
    progress = ProgressCallback(metrics)
    stopper = StopOnSignalCallback()
    diverged = StopOnNonFiniteLossCallback()
    guard = _GuardCallback(plan)
    base_class: type[Trainer] = ChunkedLossTrainer if setting.loss_impl == "chunked" else Trainer
    if setting.optimizer_in_backward:  # per-parameter optimizers stepped by hooks (trainer/in_backward.py)
        base_class = in_backward_trainer_class(base_class)
    trainer_class = staged_trainer_class(base_class, plan)
    trainer = trainer_class(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=build_collator(tokenizer, layout),
        processing_class=tokenizer,
        optimizer_cls_and_kwargs=rounded_optimizer(setting, training_args),
        callbacks=[
            guard,
            MetricsCallback(metrics, setting.grad_accum),
            progress,
            stopper,
            diverged,
            *profile_callbacks(args, metrics),
        ],
    )
    guard.trainer = trainer
    trainer.remove_callback(PrinterCallback)  # the progress callback reports; no raw log dicts on stdout
    resumed_from_step = start.step
    started_at = datetime.now(timezone.utc)
    status: RunStatus = "completed"
    message = ""
    stopper.install()
    try:
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
    except BaseException as error:  # the runtime guard (an AutotuneError) included: the report says failed
        status, message = "failed", f"{type(error).__name__}: {' '.join(str(error).split())[:500]}"
        try:
            _finish(trainer, plan, args, status, message, resumed_from_step, metrics, started_at)
        except AutotuneError as report_error:  # e.g. the disk is full: the report cannot be written either
            logger.error("%s", report_error)
        raise
    finally:
        stopper.restore()
        progress.stop()
    if diverged.stopped:
        message = diverged.message(float(training_args.learning_rate))
        _finish(trainer, plan, args, "failed", message, resumed_from_step, metrics, started_at)
        raise TrainingDivergedError(message)
    if stopper.stopped:
        status, message = "interrupted", f"{stopper.signal_name} at step {trainer.state.global_step}; checkpoint saved"
    else:
        if eval_dataset is not None and metrics.eval_loss_steps[-1:] != [trainer.state.global_step]:
            trainer.evaluate()  # the final eval loss (unless --eval-steps just computed it)
        trainer.save_model(str(args.final_dir))
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(str(args.final_dir))
            write_manifest(args.final_dir, trainer.state.global_step, plan)  # what autotune export checks
    _finish(trainer, plan, args, status, message, resumed_from_step, metrics, started_at)
    if not stopper.stopped:
        return None
    return stopper.requested if stopper.requested is not None else int(signal.SIGTERM)  # another rank's signal


TRACKER_DIRECTORIES: dict[str, tuple[str, str]] = {
    "tensorboard": ("TENSORBOARD_LOGGING_DIR", "tensorboard"),
    "wandb": ("WANDB_DIR", ""),
    "mlflow": ("MLFLOW_TRACKING_URI", "mlruns"),
}
"""``--report-to`` → (the variable its transformers integration reads for where to write, the run directory's
subfolder): ``TensorBoardCallback`` reads ``TENSORBOARD_LOGGING_DIR`` (else ``./runs/…`` of the working directory),
wandb ``WANDB_DIR`` (else ``./wandb``), mlflow ``MLFLOW_TRACKING_URI`` (else ``./mlruns``). trackio keeps its own."""


def tracker_directories(args: TrainerArgs) -> None:
    """Point the tracker's files into the run directory, unless the user set the variable (theirs wins)."""
    entry = TRACKER_DIRECTORIES.get(args.report_to)
    if entry is None:
        return
    variable, subfolder = entry
    path = args.run_dir / subfolder if subfolder else args.run_dir
    value = path.as_uri() if variable == "MLFLOW_TRACKING_URI" else str(path)
    os.environ.setdefault(variable, value)


def _eval_split(raw: Any, fmt: str, args: TrainerArgs) -> tuple[Any, Any | None]:
    """(training rows, held-out rows or None) for the eval loss.

    ``--eval-dataset`` is loaded and checked like ``--dataset``; ``--eval-fraction`` of ``raw`` is held out by
    ``datasets.Dataset.train_test_split`` seeded with ``--seed`` (the same split on every resume).

    Raises:
        ConfigError: the eval data cannot be loaded or its rows fail the row check, or the split leaves no row on a
            side.
    """
    if args.eval_dataset is not None:
        checked = check_local_file(args.eval_dataset, args.dataset_format)
        eval_raw = load_raw_dataset(args.eval_dataset)
        eval_fmt = detect_format(list(eval_raw.column_names), args.dataset_format, args.eval_dataset)
        if eval_fmt != fmt:
            raise ConfigError(f"--eval-dataset {args.eval_dataset} is {eval_fmt} data, --dataset is {fmt}")
        if not checked:
            check_rows(eval_raw, fmt, args.eval_dataset)
        return raw, eval_raw
    if args.eval_fraction is None:
        return raw, None
    try:
        held_out = held_out_rows(len(raw), args.eval_fraction)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    split = raw.train_test_split(test_size=held_out, seed=args.seed, shuffle=True)
    logger.info("held out %d of %d rows of %s for the eval loss (seed %d)", held_out, len(raw), args.dataset, args.seed)
    return split["train"], split["test"]


def _finish(
    trainer: Trainer,
    plan: PlanFile,
    args: TrainerArgs,
    status: RunStatus,
    message: str,
    resumed_from_step: int,
    metrics: RunMetrics,
    started_at: datetime,
) -> None:
    """Write the report (rank 0) and tear down the process group (runs without it may abort at exit).

    After a failure there is no barrier and no cross-rank reduction: other ranks may be gone.
    """
    report = build_report(
        plan=plan,
        status=status,
        message=message,
        steps=int(trainer.state.global_step),
        max_steps=int(trainer.state.max_steps),
        resumed_from_step=resumed_from_step,
        metrics=metrics,
        world_size=int(trainer.args.world_size),
        device=describe_device(args.cpu),
        started_at=started_at,
        finished_at=datetime.now(timezone.utc),
        reduce_over_ranks=status != "failed",
    )
    if trainer.is_world_process_zero():
        write_report(report, args.report_path)
        logger.info("%s at step %d/%d; report in %s", status, report.steps, report.max_steps, args.report_path)
    _teardown(barrier=status != "failed")


def _teardown(barrier: bool = False) -> None:
    """Destroy the process group if there is one (runs without it sometimes abort at exit)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        if barrier:
            torch.distributed.barrier()
        torch.distributed.destroy_process_group()
