"""The launch checks: one ordered list, walked by ``autotune launch`` and ``autotune launch --dry-run`` alike.

Every check runs before the run directory is created or anything is printed about the run; each refusal is one
line (an :class:`~autotune.errors.AutotuneError`, exit code 2) and leaves the file system as it was. A dry run
walks the same list: a check marked ``dry_run_warns`` (the training stack: a dry run plans on a machine that need
not train) is a warning there instead of a refusal. docs/launcher.md's list of checks is generated from
:data:`LAUNCH_CHECKS` (:func:`checks_markdown`; tools/check_docs.py fails when it is stale).

The rules themselves live with what they are about (command.py the topology and values, rundir.py the
directory, preflight.py the machine); this module is their order and their one-line summaries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from autotune.errors import AutotuneError, InvalidRequestError
from autotune.launcher import gpus, preflight, skypilot
from autotune.launcher.options import PLAN_FILE, SKYPILOT_TASK_FILE, LaunchOptions, LaunchSpec
from autotune.launcher.plan_gpus import GpuResolver, machine_gpus, too_few_gpus
from autotune.launcher.rundir import CHECKPOINTS_DIR, check_run_directory, newest_checkpoint_plan
from autotune.launcher.runner import differing_files
from autotune.launcher.spec import build_launch_spec
from autotune.schemas.dataset_stats import eval_is_training_data, fingerprint, fingerprint_difference
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_changes import plan_fingerprint, resume_plan_error
from autotune.schemas.plan_io import load_plan


@dataclass
class LaunchContext:
    """What the checks look at, and what they find out on the way (the spec, whether the run restarts)."""

    plan: PlanFile
    options: LaunchOptions
    dry_run: bool
    recheck: Callable[[PlanFile], list[str]] = lambda _plan: []
    """The plan-file re-check with ``autotune plan``'s rules (the CLI passes the cost model in); returns warnings."""
    resolve_gpu: GpuResolver = lambda _name: None
    """A GPU name → its catalog entry or None (the CLI passes the catalog's lookup in; the GPU type check)."""
    spec: LaunchSpec | None = None
    """The command and files, built by the plan-and-options check."""
    restart: bool = False
    """The output directory is a run that never trained: it starts again from step 0."""
    warnings: list[str] = field(default_factory=list)
    """One line each, printed after every check passed (a refused launch prints only its refusal)."""

    @property
    def out(self) -> Path:
        """The run directory."""
        return Path(self.options.output_dir)


@dataclass(frozen=True)
class LaunchCheck:
    """One launch check: its name, what it refuses (the docs' words) and the function that refuses it."""

    name: str
    summary: str
    """Markdown, one paragraph: what is refused (or warned), in the message's words."""
    run: Callable[[LaunchContext], None]
    """Raises an AutotuneError (one line) to refuse; may add warnings to the context."""
    dry_run_warns: bool = False
    """A dry run reports the refusal as a warning (``a launch here would stop: ...``) and goes on."""


def _check_plan(context: LaunchContext) -> None:
    context.warnings.extend(context.recheck(context.plan))


def _check_plan_and_options(context: LaunchContext) -> None:
    context.spec = _build_spec(context)  # refuses what it cannot build


def _build_spec(context: LaunchContext) -> LaunchSpec:
    """The launch spec of the context's plan and options, with the plan GPU's catalog entry (its SkyPilot offers)."""
    return build_launch_spec(context.plan, context.options, context.resolve_gpu(context.plan.cluster.gpu))


def _check_output_dir(context: LaunchContext) -> None:
    context.restart = check_run_directory(context.out, resume=context.options.resume)
    if not context.restart:
        return
    if context.options.resume:  # nothing to resume from: the core starts at step 0
        context.options = context.options.model_copy(update={"resume": False})
        context.spec = _build_spec(context)
    assert context.spec is not None
    differing = differing_files(context.spec, context.out)
    if differing:
        raise InvalidRequestError(
            f"{context.out} never trained (no checkpoint) but holds another launch's {differing[0].name}: remove "
            "the directory (it has no training state) or choose another --output-dir"
        )


def _check_resumed_plan(context: LaunchContext) -> None:
    if not context.options.resume:
        return
    out = context.out
    recorded = newest_checkpoint_plan(out / CHECKPOINTS_DIR)
    if recorded is None:
        recorded = (plan_fingerprint(load_plan(out / PLAN_FILE)), PLAN_FILE)
    error = resume_plan_error(recorded[0], context.plan, recorded[1])
    if error:
        raise InvalidRequestError(error)
    assert context.spec is not None
    differing = differing_files(context.spec, out)
    if differing:
        raise InvalidRequestError(
            f"--resume: {differing[0]} differs from what this launch would write (a resumed run keeps its plan "
            f"and configs): launch {out / PLAN_FILE} with the same options, or use a new --output-dir"
        )


def _check_skypilot_task(context: LaunchContext) -> None:
    if not context.options.skypilot:
        return
    if not skypilot.skypilot_installed():
        context.warnings.append(
            "the SkyPilot task was not checked against SkyPilot's schema: skypilot is not installed here "
            f'(pip install -e ".[{skypilot.SKYPILOT_EXTRA}]", without the lock: SkyPilot needs an older click)'
        )
        return
    assert context.spec is not None  # built by the plan-and-options check
    error = skypilot.skypilot_schema_error(yaml.safe_load(context.spec.files[SKYPILOT_TASK_FILE]))  # as written
    if error:
        raise InvalidRequestError(f"the SkyPilot task does not pass SkyPilot's schema check: {error}")


def _check_stack_installed(context: LaunchContext) -> None:
    if context.options.skypilot:  # the nodes install the locked stack themselves
        return
    preflight.check_environment(context.plan)
    preflight.check_tracker(context.options.report_to)


def _check_stack_versions(context: LaunchContext) -> None:
    if not context.options.skypilot:
        preflight.check_stack_versions()


def _check_model(context: LaunchContext) -> None:
    preflight.check_model(context.plan, hub=not context.options.skypilot)


def _check_dataset(context: LaunchContext) -> None:
    hub = not context.options.skypilot  # SkyPilot's nodes download hub data, not this machine
    preflight.check_dataset(context.options.dataset, context.options.dataset_format, hub=hub)
    if context.options.eval_dataset is not None:
        preflight.check_dataset(context.options.eval_dataset, context.options.dataset_format, hub=hub)
        same = eval_is_training_data(context.options.dataset, context.options.eval_dataset)
        if same:
            context.warnings.append(same)
    planned = context.plan.dataset
    if planned is not None:
        difference = fingerprint_difference(planned.fingerprint, fingerprint(context.options.dataset))
        if difference:
            context.warnings.append(
                f"the plan was made for the dataset {planned.fingerprint.path}, this launch trains on "
                f"{context.options.dataset} ({difference}): its blocks and the run's time were for that data"
            )


def _check_gpu(context: LaunchContext) -> None:
    if not (context.options.cpu or context.options.runs_elsewhere):
        preflight.check_gpu_visible()


def _check_gpu_type_and_count(context: LaunchContext) -> None:
    if context.options.cpu or context.options.runs_elsewhere:
        return
    names = gpus.detect_gpus()
    if not names:  # no nvidia-smi / rocm-smi: torch's probe above is all that can be said
        return
    found = machine_gpus(names, context.resolve_gpu)
    few = too_few_gpus(context.plan.cluster, found)
    if few:
        raise InvalidRequestError(f"{few}: plan again with --num-gpus {found.visible} (nothing was written)")
    planned = context.plan.cluster.gpu
    if found.spec is None:
        context.warnings.append(
            f"this machine's GPU '{found.name}' is not in the catalog: the plan's memory and time are for {planned}"
        )
        return
    if found.spec.key == planned:
        return
    prediction = context.plan.prediction
    needed_gib = prediction.peak_reserved_gib + prediction.cuda_context_gib
    if found.spec.memory_gib < needed_gib:
        raise InvalidRequestError(
            f"the plan is for {planned}; this machine's {found.spec.key} has {found.spec.memory_gib:g} GiB, less than "
            f"the {needed_gib:.1f} GiB its predicted peak needs: plan again with --gpu {found.spec.key} (nothing was "
            "written)"
        )
    context.warnings.append(
        f"the plan is for {planned}, this machine has {found.spec.key}: its memory and time were predicted for "
        f"{planned} (autotune plan ... --gpu {found.spec.key} plans for this card)"
    )


def _check_build_locks(context: LaunchContext) -> None:
    if context.plan.setting.uses_deepspeed and not context.options.skypilot:
        context.warnings.extend(preflight.describe_build_lock(lock) for lock in preflight.extension_build_locks())


LAUNCH_CHECKS: Final[tuple[LaunchCheck, ...]] = (
    LaunchCheck(
        "plan",
        "the plan file: a valid plan (`schema_version` an integer, known keys), re-checked with `autotune plan`'s "
        "rules and words — the GPU name is in the catalog (`unknown GPU 'rtx-9999': closest are …`), micro batch × "
        "accumulation × GPUs equals the global batch, the forced sharding / method / optimizer / precision run on "
        "that card (`--sharding fsdp needs more than one GPU …`); a `seq_len` above the model's "
        "`max_position_embeddings` and a setting that no longer fits the card when re-estimated are warned (as "
        "`plan` notes them);",
        _check_plan,
    ),
    LaunchCheck(
        "plan and options",
        "the plan and the options: `--cpu` with a plan that cannot run on the CPU (FSDP: accelerate falls back to "
        "DDP without GPUs, so the message names the shardings `plan` accepts for that many GPUs; `kernels: liger`: "
        "Triton GPU kernels), an attention implementation today's transformers cannot run, a topology that cannot "
        "be launched as asked, a value that would change meaning in a command or script (below); `--skypilot` with "
        "`--slurm`, `--cpu`, `--resume`, `--node-rank` or `--main-process-ip`, without a source checkout to install "
        "from, for a card SkyPilot has no name for (`--skypilot: SkyPilot has no accelerator name for rx-7900-xtx "
        "…`) or a node size no listed provider rents, with a mounted path a shell would read (SkyPilot writes "
        "`file_mounts` destinations unquoted into the node's `sudo mkdir -p` / `ln -s`) or a `--bucket` that is not a "
        "bucket name; `--spot` / `--bucket` without `--skypilot`;",
        _check_plan_and_options,
    ),
    LaunchCheck(
        "SkyPilot task",
        "with `--skypilot`: the task passes SkyPilot's own schema check where `skypilot` is installed (the optional "
        "extra; without it this is warned, not checked);",
        _check_skypilot_task,
    ),
    LaunchCheck(
        "output directory",
        "the output directory: missing (its nearest existing parent must be a writable directory) for a new run; "
        "refused when it is a regular file, an empty directory, a directory of your files (no `plan.yaml` written "
        "by `autotune launch`), a run in use by a live process (its lock), a run that trained (without "
        "`--resume`), or a completed run (with `--resume`). `--resume` is refused in any directory that is not a "
        "run, so a refused resume never writes into your folder; a run that never trained but holds another "
        "launch's files is refused;",
        _check_output_dir,
    ),
    LaunchCheck(
        "resumed plan",
        "with `--resume`: the plan is the one the run was trained with (the newest checkpoint's manifest, else "
        "`OUT/plan.yaml`); the message lists the changed fields (`setting.lora_rank 16 → 8`), and the launcher's "
        "other files must be the ones this launch writes;",
        _check_resumed_plan,
    ),
    LaunchCheck(
        "training stack installed",
        "the training stack is installed, and the package of `--report-to`'s tracker (`--report-to wandb needs the "
        "wandb package …`; a dry run warns instead); not with `--skypilot`, whose nodes install the locked stack "
        "(also for the next check);",
        _check_stack_installed,
        dry_run_warns=True,
    ),
    LaunchCheck(
        "training stack versions",
        "the installed training stack is within the tested versions (`AUTOTUNE_ALLOW_UNTESTED_STACK=1` lets an "
        "untested one through, logged as a warning);",
        _check_stack_versions,
    ),
    LaunchCheck(
        "model",
        "the model: a local directory has weights and a tokenizer, a `.gguf` file exists, a hub id is in the local "
        "Hugging Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub`, `~/.cache/huggingface/hub`) with weights and a "
        "tokenizer — or else `HF_HUB_OFFLINE` is unset and the hub answers a TCP connection within 5 s (nothing is "
        "downloaded), so an offline launch of an uncached model fails at once instead of after the download's "
        "retries (the message says `hf download MODEL`); with `--skypilot` only local weights are checked (the nodes "
        "download a hub model);",
        _check_model,
    ),
    LaunchCheck(
        "dataset",
        "the dataset: a local `.jsonl` / `.json` / `.txt` file is read whole, streamed line by line, and every row is "
        "checked — invalid UTF-8, a broken JSON line, a record that is not an object, a field of the wrong type, no "
        "rows, every row empty — naming the file's line (`dataset data.jsonl line 2: not valid JSON (Expecting ',' "
        "delimiter, column 1)`); the training core runs the same check before `datasets` loads the file. A hub "
        "dataset (`tatsu-lab/alpaca`) is in the `datasets` cache (`$HF_DATASETS_CACHE`, `$HF_HOME/datasets`, "
        "`~/.cache/huggingface/datasets`; where `datasets.load_dataset` looks offline) — or else the hub is allowed "
        "and reachable, as for the model; `--eval-dataset` is checked the same way. A plan made with "
        "`plan --dataset` warns when the launch's data is another file (path, size and a hash of its first MiB); with "
        "`--skypilot` a hub dataset is not checked here (the nodes download it);",
        _check_dataset,
    ),
    LaunchCheck(
        "GPU",
        "without `--cpu` (and without `--slurm` / `--skypilot`, whose GPUs are on other machines), torch sees a GPU on "
        "this machine (a dry run too: add `--cpu` to dry-run a CPU launch on a machine without a GPU);",
        _check_gpu,
    ),
    LaunchCheck(
        "GPU type and count",
        "without `--cpu` / `--slurm` / `--skypilot`, the GPUs `nvidia-smi -L` (or `rocm-smi`) lists, narrowed by "
        "`CUDA_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` / `ROCR_VISIBLE_DEVICES`: fewer than the plan's GPUs per node "
        "is refused (`the plan runs 2 GPUs per node, this machine shows 1 (…): plan again with --num-gpus 1`); "
        "another card than the plan's is warned, and refused when it has less memory than the plan's predicted peak "
        "reserved + CUDA context; without either tool nothing more is checked;",
        _check_gpu_type_and_count,
    ),
    LaunchCheck(
        "extension build locks",
        "a DeepSpeed plan run here: a leftover build lock of torch's C++ extensions (a killed build makes DeepSpeed "
        "wait forever) is warned, never deleted.",
        _check_build_locks,
    ),
)
"""Every launch check, in the order they run (the order docs/launcher.md promises)."""


def run_checks(context: LaunchContext, checks: tuple[LaunchCheck, ...] = LAUNCH_CHECKS) -> LaunchContext:
    """Walk ``checks`` in order on ``context``; stop at the first refusal.

    Returns:
        The context, with the spec built, ``restart`` decided and the warnings to print.

    Raises:
        AutotuneError: the first check that refuses (a ``dry_run_warns`` check in a dry run warns instead).
    """
    for check in checks:
        try:
            check.run(context)
        except AutotuneError as error:
            if not (context.dry_run and check.dry_run_warns):
                raise
            context.warnings.append(f"a launch here would stop: {error}")
    return context


def checks_markdown(checks: tuple[LaunchCheck, ...] = LAUNCH_CHECKS) -> str:
    """docs/launcher.md's numbered list of the checks (generated; tools/check_docs.py compares it)."""
    return "".join(f"{index}. {check.summary}\n" for index, check in enumerate(checks, start=1))
