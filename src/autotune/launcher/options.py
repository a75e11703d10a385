"""What the launcher is asked to do (:class:`LaunchOptions`) and what it builds (:class:`LaunchSpec`).

The field descriptions are reused as the help of ``autotune launch``'s options; the trainer's own options
(and their defaults and bounds) come from :class:`autotune.schemas.trainer_options.TrainerOptions`.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from autotune.schemas._base import FrozenModel
from autotune.schemas.trainer_options import TrainerOptions

PLAN_FILE: Final[str] = "plan.yaml"
ACCELERATE_CONFIG_FILE: Final[str] = "accelerate_config.yaml"
DEEPSPEED_CONFIG_FILE: Final[str] = "deepspeed_config.json"
SLURM_SCRIPT_FILE: Final[str] = "launch.sbatch"
SKYPILOT_TASK_FILE: Final[str] = "sky.yaml"
TRAINER_MODULE: Final[str] = "autotune.trainer"

DISTRIBUTED_RUN_MODULE: Final[str] = "autotune.trainer.distributed_run"
"""Runs ``torchrun`` / ``accelerate`` so that a failed worker ends in one line and its exit code, not a
``ChildFailedError`` traceback (named here, not imported: the launcher never imports the training core)."""

INTERPRETER_MODULES: Final[dict[str, list[str]]] = {
    "python": [],
    "torchrun": ["-m", DISTRIBUTED_RUN_MODULE, "torchrun"],
    "accelerate": ["-m", DISTRIBUTED_RUN_MODULE, "accelerate"],
}
"""The launcher programs a spec names, as modules of an interpreter: runs use the interpreter that planned them
(``sys.executable``), so its environment, even when its ``bin`` directory is not on PATH. ``torchrun`` is
``torch.distributed.run``'s console script and ``accelerate`` is ``accelerate.commands.accelerate_cli``'s; both
run through :data:`DISTRIBUTED_RUN_MODULE`, which calls those same ``main`` functions."""

DEFAULT_MASTER_PORT: Final[int] = 29500
"""torchrun's and accelerate's default rendezvous port (``torch.distributed.run --master_port``)."""


class LaunchOptions(TrainerOptions):
    """The trainer's options (:class:`TrainerOptions`) plus process placement: SLURM, SkyPilot, node rank, rendezvous.

    Trainer options that were not given (not in ``model_fields_set``) are not passed on: the training core
    applies the same defaults.
    """

    slurm: bool = Field(
        default=False,
        description="Write a SLURM batch script (OUT/launch.sbatch) instead of running; --submit also submits it.",
    )
    submit: bool = Field(default=False, description="With --slurm: submit the script with sbatch once written.")
    skypilot: bool = Field(
        default=False,
        description="Write a SkyPilot task (OUT/sky.yaml) for the plan's GPU type, count and nodes instead of running, "
        "and print its `sky launch` command; nothing is started.",
    )
    bucket: str | None = Field(
        default=None,
        description="With --skypilot: the bucket that holds the output directory (outputs and checkpoints), mounted "
        "on the nodes so that sky down or a preemption loses nothing and a relaunch resumes; SkyPilot creates it or "
        "reuses the one it created (default: autotune-<output dir name>-<hash of its path>).",
    )
    spot: bool = Field(
        default=False,
        description="With --skypilot: run on spot instances as a SkyPilot managed job (sky jobs launch), which "
        "relaunches after a preemption and resumes from the newest checkpoint in the bucket.",
    )
    node_memory_gib: float | None = Field(
        default=None,
        gt=0,
        description="Host RAM per node the task asks for, GiB (autotune launch fills it from the plan).",
    )
    node_disk_gib: float | None = Field(
        default=None,
        gt=0,
        description="Disk per node the task asks for, GiB (autotune launch fills it from the plan).",
    )
    project_dir: str | None = Field(
        default=None,
        description="The autotune source checkout SkyPilot's nodes install from with its lock, constraints.txt "
        "(autotune launch passes the one this autotune was installed from).",
    )
    python: str = Field(
        default="python",
        min_length=1,
        description="Interpreter the SLURM script runs the launchers and the trainer with (autotune launch "
        "passes its own, sys.executable, so the job uses the environment that planned it).",
    )
    node_rank: int = Field(default=0, ge=0, description="Multi-node: rank of this node (0 = the main node).")
    main_process_ip: str | None = Field(default=None, description="Multi-node: address of node 0.")
    main_process_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Rendezvous port on node 0 (default 29500; single node: a free port).",
    )

    @property
    def runs_elsewhere(self) -> bool:
        """The run's processes start on other machines (SLURM's compute nodes, SkyPilot's cloud nodes), not here."""
        return self.slurm or self.skypilot


class LaunchSpec(FrozenModel):
    """Everything needed to start a run, built without touching the disk or starting a process.

    ``argv[0]`` is one of ``python``, ``torchrun``, ``accelerate``, ``sbatch`` or ``sky`` (``--skypilot``: printed
    for the user, never run), written literally so that specs are comparable with golden files; the runner replaces
    the first three with the current interpreter (``sys.executable``, with ``-m torch.distributed.run`` or
    ``-m accelerate.commands.accelerate_cli``).
    """

    argv: list[str] = Field(description="The command to run (launcher, launcher options, trainer, trainer options).")
    env: dict[str, str] = Field(description="Environment variables added to the current environment.")
    files: dict[str, str] = Field(description="Files to write: path relative to the output directory -> content.")
    num_nodes: int = Field(ge=1, description="Nodes the run spans.")
    num_processes_per_node: int = Field(ge=1, description="Training processes started on each node.")
    notes: list[str] = Field(default_factory=list, description="One-line remarks for the user.")
