"""What the launcher is asked to do (:class:`LaunchOptions`) and what it builds (:class:`LaunchSpec`).

The field descriptions are reused as the help of ``autotune launch``'s options.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from autotune.schemas._base import FrozenModel

DatasetFormat = Literal["auto", "instruction", "chat", "text"]
DATASET_FORMATS: Final[tuple[DatasetFormat, ...]] = ("auto", "instruction", "chat", "text")

PLAN_FILE: Final[str] = "plan.yaml"
ACCELERATE_CONFIG_FILE: Final[str] = "accelerate_config.yaml"
DEEPSPEED_CONFIG_FILE: Final[str] = "deepspeed_config.json"
SLURM_SCRIPT_FILE: Final[str] = "launch.sbatch"
TRAINER_MODULE: Final[str] = "autotune.trainer"

DEFAULT_MASTER_PORT: Final[int] = 29500
"""torchrun's and accelerate's default rendezvous port (``torch.distributed.run --master_port``)."""


class LaunchOptions(FrozenModel):
    """Run options that are not part of the plan: data, output, process placement, trainer knobs."""

    dataset: str = Field(
        min_length=1, description="Training data: a local JSONL / JSON / parquet file or a hub dataset name."
    )
    dataset_format: DatasetFormat = Field(
        default="auto",
        description="Dataset format: instruction, chat, text, or auto (detected from the keys).",
    )
    output_dir: str = Field(min_length=1, description="Run directory (must not exist unless --resume).")
    max_steps: int | None = Field(default=None, ge=1, description="Stop after this many optimizer steps.")
    cpu: bool = Field(default=False, description="Run on the CPU (multi-process runs use torchrun + gloo).")
    resume: bool = Field(default=False, description="Continue the run in --output-dir from its last checkpoint.")
    slurm: bool = Field(default=False, description="Write a SLURM batch script and submit it with sbatch.")
    node_rank: int = Field(default=0, ge=0, description="Multi-node: rank of this node (0 = the main node).")
    main_process_ip: str | None = Field(default=None, description="Multi-node: address of node 0.")
    main_process_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Rendezvous port on node 0 (default 29500; single node: a free port).",
    )
    save_steps: int | None = Field(default=None, ge=1, description="Checkpoint every N optimizer steps.")
    logging_steps: int | None = Field(default=None, ge=1, description="Log the loss every N optimizer steps.")
    learning_rate: float | None = Field(default=None, gt=0, description="Peak learning rate.")
    warmup_ratio: float | None = Field(
        default=None, ge=0, le=1, description="Fraction of the steps spent warming up the learning rate."
    )
    seed: int | None = Field(default=None, ge=0, description="Random seed.")


class LaunchSpec(FrozenModel):
    """Everything needed to start a run, built without touching the disk or starting a process.

    ``argv[0]`` is one of ``python``, ``torchrun``, ``accelerate`` or ``sbatch``, written literally
    so that specs are comparable with golden files; the runner replaces the first three with the
    current interpreter (``sys.executable``, with ``-m torch.distributed.run`` or
    ``-m accelerate.commands.accelerate_cli``).
    """

    argv: list[str] = Field(description="The command to run (launcher, launcher options, trainer, trainer options).")
    env: dict[str, str] = Field(description="Environment variables added to the current environment.")
    files: dict[str, str] = Field(description="Files to write: path relative to the output directory -> content.")
    num_nodes: int = Field(ge=1, description="Nodes the run spans.")
    num_processes_per_node: int = Field(ge=1, description="Training processes started on each node.")
    notes: list[str] = Field(default_factory=list, description="One-line remarks for the user.")
