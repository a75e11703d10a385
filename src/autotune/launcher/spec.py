"""Build a :class:`LaunchSpec` from a plan: the command, its environment and the files to write.

Pure (accelerate's ``prepare_*_cmd_env`` habit): no disk, no processes, no heavy imports; the
runner (:mod:`autotune.launcher.runner`) does the rest. How each sharding is started:

- ``none``: ``python -m autotune.trainer`` (one process).
- ``ddp``: ``torchrun --nproc_per_node G -m autotune.trainer`` (+ ``--nnodes``, ``--node_rank``,
  ``--master_addr``, ``--master_port`` on several nodes); the Trainer wraps the model in DDP.
- ``fsdp`` / ``fsdp-offload``: ``accelerate launch --config_file OUT/accelerate_config.yaml -m
  autotune.trainer``; accelerate turns the YAML into ``ACCELERATE_USE_FSDP`` / ``FSDP_*`` variables
  that the Trainer's Accelerator reads. The multi-node placement is in the YAML.
- ``zero2`` / ``zero3`` / ``zero3-offload``: ``torchrun`` as for DDP, with ``--deepspeed-config
  OUT/deepspeed_config.json`` for the trainer (Trainer ``deepspeed=``). Why torchrun and not
  ``accelerate launch`` or ``deepspeed``: (1) one source of DeepSpeed settings: the JSON given to
  the Trainer; accelerate launch would add a second one (its DeepSpeed plugin from
  ``ACCELERATE_DEEPSPEED_*`` variables); (2) the same launcher on GPUs and on the CPU, where the
  Trainer + DeepSpeed + torchrun path is the one seen to work; (3) several nodes need only a
  reachable node 0 (static rendezvous), no ssh / pdsh host file as the ``deepspeed`` launcher does,
  so the same command runs under ``srun``.
- ``--cpu``: any multi-process run uses ``torchrun`` (``accelerate launch --cpu --num_processes 2``
  silently starts one process). A plan that cannot run on the CPU (FSDP, Liger kernels:
  :func:`autotune.launcher.command.cpu_run_error`) is refused before anything is written. Each process gets
  ``OMP_NUM_THREADS`` from :func:`autotune.launcher.cputhreads.cpu_threads` unless the user set it (so torchrun
  prints no banner about choosing it).
"""

from __future__ import annotations

import json

import yaml

from autotune.errors import InvalidRequestError
from autotune.launcher.backend_configs import accelerate_config, deepspeed_config
from autotune.launcher.command import RUN_ENV, check_topology, check_values, node_command, output_path
from autotune.launcher.cputhreads import cpu_thread_env
from autotune.launcher.options import (
    ACCELERATE_CONFIG_FILE,
    DEEPSPEED_CONFIG_FILE,
    PLAN_FILE,
    SKYPILOT_TASK_FILE,
    SLURM_SCRIPT_FILE,
    LaunchOptions,
    LaunchSpec,
)
from autotune.launcher.skypilot import (
    mounted_paths,
    sky_launch_command,
    skypilot_option_error,
    skypilot_task,
    task_yaml,
)
from autotune.launcher.slurm import slurm_script
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import plan_to_yaml
from autotune.schemas.setting import FSDP_SHARDINGS, ZERO_SHARDINGS


def build_launch_spec(plan: PlanFile, options: LaunchOptions, gpu: GpuSpec | None = None) -> LaunchSpec:
    """The command, environment and files that run ``plan`` with ``options``.

    ``gpu`` is the catalog entry of the plan's GPU (the launch checks pass it in: ``LaunchContext.resolve_gpu``); only
    ``--skypilot`` reads it (its SkyPilot offers), and refuses a GPU without one.

    Files always include ``plan.yaml`` (the exact plan run); plus ``accelerate_config.yaml`` (FSDP
    on GPUs), ``deepspeed_config.json`` (ZeRO), ``launch.sbatch`` (``options.slurm``, whose
    command is then ``sbatch OUT/launch.sbatch``) and ``sky.yaml`` (``options.skypilot``, whose command is
    then ``sky launch -c CLUSTER OUT/sky.yaml``, printed, never run by autotune).

    Raises:
        InvalidRequestError: an attention implementation the training core cannot run
            (``eager-legacy``: :func:`autotune.schemas.setting.attention_run_error`); the plan's topology
            cannot be launched as asked (sharding none on
            several GPUs, a multi-node run without the address of node 0, a node rank out of range,
            ZeRO optimizer offload with an 8-bit optimizer); a value that is unsafe in a command,
            script or config (see :func:`autotune.launcher.command.check_values`); ``--skypilot`` with options it
            cannot go with, or for a GPU SkyPilot has no name for (:mod:`autotune.launcher.skypilot`).
    """
    if not options.skypilot and (options.spot or options.bucket is not None):
        raise InvalidRequestError("--spot and --bucket shape the SkyPilot task: add --skypilot")
    skypilot_error = skypilot_option_error(options) if options.skypilot else None
    if skypilot_error:  # before the topology: "--skypilot with --cpu" says so, not "--cpu cannot run FSDP"
        raise InvalidRequestError(skypilot_error)
    check_topology(plan, options)
    check_values(plan, options)
    files = {PLAN_FILE: plan_to_yaml(plan)}
    notes: list[str] = []
    sharding = plan.setting.sharding
    if sharding in ZERO_SHARDINGS:
        files[DEEPSPEED_CONFIG_FILE] = json.dumps(deepspeed_config(plan, cpu=options.cpu), indent=2) + "\n"
    if sharding in FSDP_SHARDINGS and not options.cpu:
        config = accelerate_config(
            plan,
            node_rank=options.node_rank,
            main_process_ip=options.main_process_ip,
            main_process_port=options.main_process_port,
        )
        files[ACCELERATE_CONFIG_FILE] = yaml.safe_dump(config, sort_keys=False)
    argv = node_command(plan, options, node_rank=str(options.node_rank))
    cluster = plan.cluster
    if options.skypilot:
        argv = sky_launch_command(options)
        files[SKYPILOT_TASK_FILE] = task_yaml(skypilot_task(plan, options, gpu), argv)
        if plan.model_source not in mounted_paths(plan, options):
            notes.append(
                f"the nodes download {plan.model_source} from the Hugging Face hub: for a gated model add --secret "
                "HF_TOKEN to sky launch (it copies your token from this environment)"
            )
        if cluster.num_nodes > 1:
            notes.append(
                f"multi-node: the {cluster.num_nodes} nodes share {options.output_dir} through the task's bucket, but "
                "a relaunch does not resume by itself (each node would decide alone): after a stop, launch the plan "
                "again with --resume on the nodes"
            )
    elif options.slurm:
        files[SLURM_SCRIPT_FILE] = slurm_script(plan, options)
        argv = ["sbatch", output_path(options, SLURM_SCRIPT_FILE)]
    elif cluster.num_nodes > 1:
        notes.append(
            f"multi-node: run this on each of the {cluster.num_nodes} nodes with --node-rank "
            f"0..{cluster.num_nodes - 1} (this is node {options.node_rank}), or use --slurm"
        )
    env = dict(RUN_ENV)
    if options.cpu and not options.runs_elsewhere:  # under SLURM the compute node's cores are not this machine's
        env.update(cpu_thread_env(cluster.num_gpus_per_node))
    return LaunchSpec(
        argv=argv,
        env=env,
        files=files,
        num_nodes=cluster.num_nodes,
        num_processes_per_node=cluster.num_gpus_per_node,
        notes=notes,
    )
