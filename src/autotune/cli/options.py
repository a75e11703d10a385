"""Option types shared by ``plan``, ``estimate``, ``trace``, ``sweep`` and ``launch`` (help texts from the schemas).

The option groups (nodes, the run's size, the dataset, the eval set, the setting) are declared once in the session
layer (:mod:`autotune.session.option_groups`, :class:`autotune.session.setting_options.SettingOptions`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.schemas.setting import DESCRIPTIONS

# typer needs Optional[...] (not X | None) inside Annotated on Python 3.10.
ModelArg = Annotated[
    str,
    typer.Argument(
        help="Catalog model name (autotune models), a Hugging Face config.json or model directory, or a .gguf file."
    ),
]
GpuOpt = Annotated[str, typer.Option("--gpu", help="GPU name or alias (autotune gpus), e.g. 4090, a100, h100.")]
NumGpusOpt = Annotated[int, typer.Option("--num-gpus", help="GPUs per node.")]
SeqLenOpt = Annotated[int, typer.Option("--seq-len", help=DESCRIPTIONS["seq_len"])]
GlobalBatchOpt = Annotated[int, typer.Option("--global-batch-size", help=DESCRIPTIONS["global_batch_size"])]
PlanGlobalBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--global-batch-size",
        help=DESCRIPTIONS["global_batch_size"] + " Default 32; when it is not given and nothing fits at 32, the "
        "planner chooses the largest smaller power of two that fits and says so in a note.",
    ),
]
ObjectiveOpt = Annotated[
    str, typer.Option("--objective", help="quality (full > LoRA > QLoRA, then fastest), speed, or memory.")
]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="Calibration YAML from 'autotune calibrate' (default: your calibration.yaml in the user config dir "
        "when it exists, else the shipped fit; a note on stderr names the file used).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
