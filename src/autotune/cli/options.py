"""Option types shared by ``plan``, ``estimate``, ``trace``, ``sweep`` and ``launch`` (help texts from the schemas).

The eval options (``--eval-dataset``, ``--eval-fraction``, ``--eval-steps``) are launch's, declared here once:
``launch`` runs them, ``plan`` and ``estimate`` price them (and ``plan -o`` records them for the launch).

The setting options are declared in :class:`autotune.cli.setting_options.SettingOptions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.schemas.setting import DESCRIPTIONS
from autotune.schemas.trainer_options import TrainerOptions

# typer needs Optional[...] (not X | None) inside Annotated on Python 3.10.
ModelArg = Annotated[
    str,
    typer.Argument(
        help="Catalog model name (autotune models), a Hugging Face config.json or model directory, or a .gguf file."
    ),
]
GpuOpt = Annotated[str, typer.Option("--gpu", help="GPU name or alias (autotune gpus), e.g. 4090, a100, h100.")]
NumGpusOpt = Annotated[int, typer.Option("--num-gpus", help="GPUs per node.")]
NumNodesOpt = Annotated[int, typer.Option("--num-nodes", help="Nodes.")]
HostMemoryOpt = Annotated[
    float | None,
    typer.Option(
        "--host-memory-gib",
        help="Host RAM per node for CPU offload, GiB (default: assumed 2× the node's GPU memory).",
    ),
]
InterconnectOpt = Annotated[
    str | None,
    typer.Option(
        "--interconnect",
        help="The network: an inter-node profile (ib-8x400, ib-8x200, roce-8x400, efa-3200, eth-100g, eth-25g, …), an "
        "intra-node one (nvlink-4, pcie4-p2p, pcie-no-p2p, …) or both, comma separated; default: the GPU's own link "
        "and its platform's network (profiles/interconnects.yaml; the plan prints the one it assumed).",
    ),
]
SeqLenOpt = Annotated[int, typer.Option("--seq-len", help=DESCRIPTIONS["seq_len"])]
GlobalBatchOpt = Annotated[int, typer.Option("--global-batch-size", help=DESCRIPTIONS["global_batch_size"])]
NumSamplesOpt = Annotated[int | None, typer.Option("--num-samples", help=DESCRIPTIONS["num_samples"])]
DatasetTokensOpt = Annotated[int | None, typer.Option("--dataset-tokens", help=DESCRIPTIONS["dataset_tokens"])]
EpochsOpt = Annotated[float, typer.Option("--epochs", help=DESCRIPTIONS["epochs"])]
PlanDatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="Your training data (local .jsonl / .json / .parquet / .txt, or a cached hub dataset): tokenized as a "
        "launch would, its length distribution is reported and its packed blocks are the workload.",
    ),
]
TokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        help="Tokenizer for --dataset (model directory, .gguf or cached hub id; default: MODEL's own, if it has one).",
    ),
]
PlanDatasetFormatOpt = Annotated[
    str, typer.Option("--dataset-format", help="Format of --dataset: auto, instruction, chat or text.")
]
PackingOpt = Annotated[
    str,
    typer.Option(
        "--packing",
        help="With --dataset: packed (whole examples in blocks of seq_len), padded (one example per row, padded to "
        "its micro batch's longest), or auto (the one whose whole run is faster).",
    ),
]
MaxRowsOpt = Annotated[
    int, typer.Option("--max-rows", help="Rows of --dataset tokenized at most; the rest are assumed alike.")
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


def _eval_help(name: str) -> str:
    """The eval option's help: the training core's description (:class:`TrainerOptions`), the one text."""
    return TrainerOptions.model_fields[name].description or ""


EvalDatasetOpt = Annotated[str | None, typer.Option("--eval-dataset", help=_eval_help("eval_dataset"))]
EvalFractionOpt = Annotated[float | None, typer.Option("--eval-fraction", help=_eval_help("eval_fraction"))]
EvalStepsOpt = Annotated[int | None, typer.Option("--eval-steps", help=_eval_help("eval_steps"))]
