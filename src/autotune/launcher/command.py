"""The per-node command: launcher (python / torchrun / accelerate launch) + trainer arguments.

Pure; see :mod:`autotune.launcher.spec` for how each sharding is started and why.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from pathlib import PurePath
from typing import Final

from autotune.errors import InvalidRequestError
from autotune.launcher.options import (
    ACCELERATE_CONFIG_FILE,
    DEEPSPEED_CONFIG_FILE,
    DEFAULT_MASTER_PORT,
    PLAN_FILE,
    TRAINER_MODULE,
    LaunchOptions,
)
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import (
    FSDP_SHARDINGS,
    OFFLOAD_SHARDINGS,
    SHARDINGS,
    ZERO_SHARDINGS,
    TrainingSetting,
    attention_run_error,
    fp8_installed,
    fp8_run_error,
    kernels_installed,
    kernels_run_error,
    stochastic_rounding_run_error,
)
from autotune.schemas.trainer_options import option_flag

RUN_ENV: Final[dict[str, str]] = {
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Added to every run: unbuffered output (logs arrive in order, also under SLURM) and no Rust
tokenizer thread pool (it deadlocks-or-warns when DataLoader workers fork after tokenization)."""


def output_path(options: LaunchOptions, name: str) -> str:
    """Path of a file in the run's output directory, as the command sees it."""
    return str(PurePath(options.output_dir) / name)


def comment_text(value: str) -> str:
    """Text safe inside a ``#`` comment line: control characters (a newline would end it) become '?'."""
    return "".join(char if char.isprintable() else "?" for char in value)


def shell_join(argv: list[str], references: Collection[str]) -> str:
    """``argv`` as one shell command line, each argument quoted (``shlex.quote``).

    The shell references in ``references`` (``$SLURM_NODEID``, ``$MASTER_ADDR``, ...) are double-quoted instead, so
    each node expands them.
    """
    return " ".join(f'"{arg}"' if arg in references else shlex.quote(arg) for arg in argv)


def node_command(
    plan: PlanFile,
    options: LaunchOptions,
    *,
    node_rank: str,
    master_addr: str | None = None,
    master_port: str | None = None,
) -> list[str]:
    """The command one node runs (launcher + trainer). Pure; used directly and by the SLURM script.

    ``node_rank`` / ``master_addr`` / ``master_port`` are strings so the SLURM script can pass shell
    references (``$SLURM_NODEID``); by default they come from ``options``.
    """
    cluster = plan.cluster
    sharding = plan.setting.sharding
    addr = master_addr if master_addr is not None else options.main_process_ip
    port = master_port if master_port is not None else _port(options)
    trainer = ["-m", TRAINER_MODULE, *trainer_args(plan, options)]
    if sharding == "none":
        return ["python", *trainer]
    if sharding in FSDP_SHARDINGS and not options.cpu:
        argv = ["accelerate", "launch", "--config_file", output_path(options, ACCELERATE_CONFIG_FILE)]
        if master_addr is not None:  # the SLURM script: placement known only at run time
            argv += ["--machine_rank", node_rank, "--main_process_ip", master_addr]
            argv += ["--main_process_port", port or str(DEFAULT_MASTER_PORT)]
        return [*argv, *trainer]
    argv = ["torchrun", "--nproc_per_node", str(cluster.num_gpus_per_node)]
    if cluster.num_nodes > 1:
        argv += ["--nnodes", str(cluster.num_nodes), "--node_rank", node_rank]
        argv += ["--master_addr", addr or "", "--master_port", port or str(DEFAULT_MASTER_PORT)]
    elif port is not None:
        argv += ["--master_port", port]
    else:
        argv += ["--standalone"]  # single node: a free rendezvous port, so several runs can share a machine
    return [*argv, *trainer]


def trainer_args(plan: PlanFile, options: LaunchOptions) -> list[str]:
    """Arguments of ``python -m autotune.trainer`` (the contract with the training core)."""
    args = [
        "--plan",
        output_path(options, PLAN_FILE),
        "--dataset",
        options.dataset,
        "--output-dir",
        options.output_dir,
        "--dataset-format",
        options.dataset_format,
    ]
    if options.max_steps is not None:
        args += ["--max-steps", str(options.max_steps)]
    if options.cpu:
        args.append("--cpu")
    if options.resume:
        args.append("--resume")
    if plan.setting.sharding in ZERO_SHARDINGS:
        args += ["--deepspeed-config", output_path(options, DEEPSPEED_CONFIG_FILE)]
    given = options.model_fields_set  # options not given keep the training core's (identical) defaults
    for name in (
        "save_steps",
        "logging_steps",
        "learning_rate",
        "warmup_ratio",
        "seed",
        "eval_dataset",
        "eval_fraction",
        "eval_steps",
        "report_to",
        "profile_steps",
    ):
        if name in given:
            args += [option_flag(name), str(getattr(options, name))]
    if options.full_determinism:
        args.append("--full-determinism")
    return args


def cpu_run_error(setting: TrainingSetting, world_size: int) -> str | None:
    """Why ``setting`` cannot run with ``--cpu`` on ``world_size`` processes, or None.

    FSDP: accelerate and the Trainer turn an FSDP request into DDP or one process without GPUs (the training
    core's runtime guard would stop it after start-up). DeepSpeed ZeRO runs on the CPU (gloo, DeepSpeed's CPU
    accelerator), and so does DDP. Fused kernels on the CPU are :func:`kernels_run_error`'s rule (the one home).
    The shardings suggested instead are those ``autotune plan`` searches for ``world_size``: on one GPU ``none`` and
    the offloading ones (``autotune.planner.space``; ZeRO without offload also runs there when named, but on one rank
    it only adds overhead), without FSDP.
    """
    if not setting.uses_fsdp:
        return None
    if world_size == 1:
        usable = [name for name in SHARDINGS if name == "none" or name in OFFLOAD_SHARDINGS]
    else:
        usable = [name for name in SHARDINGS if name != "none"]
    instead = [name for name in usable if name not in FSDP_SHARDINGS]
    return (
        f"--cpu cannot run sharding {setting.sharding}: FSDP needs GPUs (accelerate falls back to DDP "
        f"without them); re-plan with --sharding {' or '.join(instead)}, or run it on GPUs"
    )


def check_topology(plan: PlanFile, options: LaunchOptions) -> None:
    """Refuse what cannot be launched as asked (one line naming the fields and the fix).

    Also planned fused kernels on the CPU or without their package (:func:`kernels_run_error`; the package is
    looked up with ``importlib.util.find_spec``, not imported). The training stack's versions are a later check
    (:func:`autotune.launcher.preflight.check_stack_versions`).

    Raises:
        InvalidRequestError: see :func:`build_launch_spec`.
    """
    attention_error = attention_run_error(plan.setting.attention_impl)
    if attention_error:
        raise InvalidRequestError(attention_error)
    cpu_error = cpu_run_error(plan.setting, plan.cluster.world_size) if options.cpu else None
    if cpu_error:
        raise InvalidRequestError(cpu_error)
    setting = plan.setting
    kernels_error = kernels_run_error(
        setting.kernels,
        setting.loss_impl,
        cpu=options.cpu,
        installed=options.skypilot or kernels_installed(setting.kernels),  # SkyPilot's nodes install the extra
    )
    if kernels_error:
        raise InvalidRequestError(kernels_error)
    fp8_error = fp8_run_error(setting.fp8, cpu=options.cpu, installed=options.skypilot or fp8_installed())
    if fp8_error:
        raise InvalidRequestError(fp8_error)
    rounding_error = stochastic_rounding_run_error(
        setting.bf16_stochastic_rounding, installed=options.skypilot or fp8_installed()
    )
    if rounding_error:
        raise InvalidRequestError(rounding_error)
    cluster = plan.cluster
    world_size = cluster.world_size
    if plan.setting.sharding == "none" and world_size > 1:
        raise InvalidRequestError(
            f"sharding=none runs one process but the plan has {world_size} GPUs "
            f"({cluster.num_nodes} node(s) × {cluster.num_gpus_per_node}): --set sharding=ddp, "
            "or --set num_gpus_per_node=1 --set num_nodes=1"
        )
    if options.node_rank >= cluster.num_nodes:
        raise InvalidRequestError(
            f"--node-rank {options.node_rank} is out of range: the plan has {cluster.num_nodes} node(s) "
            f"(ranks 0..{cluster.num_nodes - 1})"
        )
    if cluster.num_nodes > 1 and not options.runs_elsewhere and options.main_process_ip is None:
        raise InvalidRequestError(
            f"the plan spans {cluster.num_nodes} nodes: give --main-process-ip (address of node 0) and "
            "--node-rank on each node, or use --slurm or --skypilot"
        )


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters and line breaks: C0, DEL, C1 (U+0085 NEL is one: YAML and Python's ``str.splitlines`` break a
line there) and the Unicode line / paragraph separators."""
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-]{0,252}[A-Za-z0-9])?$|^\[?[0-9A-Fa-f:.]+\]?$")
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_values(plan: PlanFile, options: LaunchOptions) -> None:
    """Refuse values that would change meaning in a command line, a shell script or a config file.

    Every value is also quoted where it is written (``shlex.quote`` in the sbatch script, YAML /
    JSON serializers for the configs, an argv list without a shell for the command); this check
    refuses what quoting cannot make safe or unambiguous: control characters (a newline ends an
    ``#SBATCH`` line or a comment and starts a command), a dataset that starts with ``-`` (read as
    an option by the trainer), an address that is not a host name or IP, a layer class that is not
    a Python identifier (it names a class to wrap, read by accelerate).

    Raises:
        InvalidRequestError: one line naming the field, its value (repr) and the fix.
    """
    values = {
        "--output-dir": options.output_dir,
        "--dataset": options.dataset,
        "plan model.key": plan.model.key,
        "plan model_source": plan.model_source,
        "plan cluster.gpu": plan.cluster.gpu,
        "plan model.decoder_layer_class": plan.model.decoder_layer_class,
    }
    if options.main_process_ip is not None:
        values["--main-process-ip"] = options.main_process_ip
    if options.eval_dataset is not None:
        values["--eval-dataset"] = options.eval_dataset
    for name, value in values.items():
        if _CONTROL.search(value):
            raise InvalidRequestError(
                f"{name} {value!r} contains a control character (newline, tab, ...); "
                "it would break the command or script it is written into: rename it"
            )
    for name, data in (("--dataset", options.dataset), ("--eval-dataset", options.eval_dataset)):
        if data is not None and data.startswith("-"):
            raise InvalidRequestError(f"{name} {data!r} starts with '-' and would be read as an option: use ./{data}")
    if options.main_process_ip is not None and not _HOST.match(options.main_process_ip):
        raise InvalidRequestError(f"--main-process-ip {options.main_process_ip!r} is not a host name or IP address")
    if not _CLASS_NAME.match(plan.model.decoder_layer_class):
        raise InvalidRequestError(
            f"plan model.decoder_layer_class {plan.model.decoder_layer_class!r} is not a Python class name"
        )
    if options.slurm and '"' in options.output_dir:
        raise InvalidRequestError(
            f"--output-dir {options.output_dir!r} contains '\"', which an #SBATCH line cannot hold: rename it"
        )


def _port(options: LaunchOptions) -> str | None:
    return None if options.main_process_port is None else str(options.main_process_port)
