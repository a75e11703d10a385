"""Plan → launch: pure builders and a thin runner that writes the run directory and starts the shared training core.

The builders make the command, environment, accelerate / DeepSpeed configs, SLURM script and SkyPilot task.

No heavy imports here (ruff TID253): the training stack runs in the subprocess. The launcher imports
only schemas (import-linter checks it); the CLI passes the cost model and the GPU catalog in as functions.

Modules:
  options          LaunchOptions (TrainerOptions + process placement), LaunchSpec, file names
  overrides        ``--set key=value`` on a plan, re-estimated; micro-batch neighbours
  checks           LAUNCH_CHECKS: every launch check in order, walked by launch and --dry-run alike
  spec             build_launch_spec: plan + options → LaunchSpec
  command          the per-node command and the trainer's arguments
  backend_configs  accelerate (FSDP) YAML and DeepSpeed JSON
  slurm            the SLURM batch script
  skypilot         the SkyPilot task (OUT/sky.yaml) for the plan's GPU type, count and nodes
  skypilot_offers  the task's resources from the plan GPU's SkyPilot offers (its catalog entry; any_of)
  relaunch         on a SkyPilot node: a relaunch resumes a run that trained, restarts one that did not
  runner           write the run directory, run the command
  gpus             this machine's GPUs (nvidia-smi / rocm-smi)
  plan_gpus        the plan's GPU type and count against this machine's (launch and probe)
  cputhreads       OMP_NUM_THREADS of a --cpu run's processes (idle physical cores shared out)
  preflight        the machine's checks (dataset, model, training stack, GPU), run from checks
  rundir           whether a run directory ever trained; reusing one that did not
"""

from autotune.launcher.backend_configs import accelerate_config, deepspeed_config
from autotune.launcher.options import LaunchOptions, LaunchSpec
from autotune.launcher.overrides import Estimator, GpuResolver, apply_overrides, changed_fields
from autotune.launcher.runner import check_output_dir, prepare_output_dir, run_command, run_launch
from autotune.launcher.slurm import slurm_script
from autotune.launcher.spec import build_launch_spec

__all__ = [
    "Estimator",
    "GpuResolver",
    "LaunchOptions",
    "LaunchSpec",
    "accelerate_config",
    "apply_overrides",
    "build_launch_spec",
    "changed_fields",
    "check_output_dir",
    "deepspeed_config",
    "prepare_output_dir",
    "run_command",
    "run_launch",
    "slurm_script",
]
