"""The request's option groups besides the setting: nodes, the run's size, the dataset and the eval set.

Each group is declared once, as a frozen dataclass whose fields carry their command-line flag and help
(:class:`autotune.session.setting_options.Flag`). ``plan``, ``estimate``, ``sweep``, ``trace`` and ``launch`` take a
group as one parameter (:func:`autotune.cli.option_groups.takes_option_groups` puts its options into the command's
signature), so an option is spelled, described and defaulted in one place; :meth:`PlanOptions.from_groups
<autotune.session.planning.PlanOptions.from_groups>` composes them into the one request.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any

from autotune.schemas.dataset_stats import DEFAULT_MAX_ROWS
from autotune.schemas.setting import DEFAULT_SEQ_LEN, DESCRIPTIONS
from autotune.schemas.trainer_options import TrainerOptions
from autotune.session.setting_options import Flag


def _trainer_help(name: str) -> str:
    """The training core's description of an option it runs (:class:`TrainerOptions`), the one text."""
    return TrainerOptions.model_fields[name].description or ""


@dataclass(frozen=True)
class OptionGroup:
    """Base of the option groups: their fields by name (what :class:`PlanOptions` takes)."""

    def values(self) -> dict[str, Any]:
        """The group's fields by name."""
        return asdict(self)

    def given(self) -> dict[str, Any]:
        """The fields given (not None), by name: what a schema that records what was given should receive."""
        return {name: value for name, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class NodeOptions(OptionGroup):
    """How many nodes, the host memory each has for CPU offload, and the network between the GPUs."""

    num_nodes: Annotated[int, Flag("--num-nodes", "Nodes.")] = 1
    host_memory_gib: Annotated[
        float | None,
        Flag(
            "--host-memory-gib", "Host RAM per node for CPU offload, GiB (default: assumed 2× the node's GPU memory)."
        ),
    ] = None
    interconnect: Annotated[
        str | None,
        Flag(
            "--interconnect",
            "The network: an inter-node profile (ib-8x400, ib-8x200, roce-8x400, efa-3200, eth-100g, eth-25g, …), an "
            "intra-node one (nvlink-4, pcie4-p2p, pcie-no-p2p, …) or both, comma separated; default: the GPU's own "
            "link and its platform's network (profiles/interconnects.yaml; the plan prints the one it assumed).",
        ),
    ] = None


@dataclass(frozen=True)
class SizeOptions(OptionGroup):
    """The run's size: samples or tokens, and epochs (without them, times are per step)."""

    num_samples: Annotated[int | None, Flag("--num-samples", DESCRIPTIONS["num_samples"])] = None
    dataset_tokens: Annotated[int | None, Flag("--dataset-tokens", DESCRIPTIONS["dataset_tokens"])] = None
    epochs: Annotated[float, Flag("--epochs", DESCRIPTIONS["epochs"])] = 1.0


@dataclass(frozen=True)
class DatasetOptions(OptionGroup):
    """The user's training data, tokenized as a launch would: its lengths, packed blocks or padded batches."""

    dataset: Annotated[
        str | None,
        Flag(
            "--dataset",
            "Your training data (local .jsonl / .json / .parquet / .txt, or a cached hub dataset): tokenized as a "
            "launch would, its length distribution is reported and its packed blocks are the workload.",
        ),
    ] = None
    tokenizer: Annotated[
        str | None,
        Flag(
            "--tokenizer",
            "Tokenizer for --dataset (model directory, .gguf or cached hub id; default: MODEL's own, if it has one).",
        ),
    ] = None
    dataset_format: Annotated[
        str, Flag("--dataset-format", "Format of --dataset: auto, instruction, chat or text.")
    ] = "auto"
    max_rows: Annotated[int, Flag("--max-rows", "Rows of --dataset tokenized at most; the rest are assumed alike.")] = (
        DEFAULT_MAX_ROWS
    )
    packing: Annotated[
        str,
        Flag(
            "--packing",
            "With --dataset: packed (whole examples in blocks of seq_len), padded (one example per row, padded to its "
            "micro batch's longest), or auto (the one whose whole run is faster).",
        ),
    ] = "auto"


@dataclass(frozen=True)
class EvalOptions(OptionGroup):
    """The eval set: launch runs it, plan and estimate price it (and ``plan -o`` records it for the launch)."""

    eval_dataset: Annotated[str | None, Flag("--eval-dataset", _trainer_help("eval_dataset"))] = None
    eval_fraction: Annotated[float | None, Flag("--eval-fraction", _trainer_help("eval_fraction"))] = None
    eval_steps: Annotated[int | None, Flag("--eval-steps", _trainer_help("eval_steps"))] = None


@dataclass(frozen=True)
class GridOptions(OptionGroup):
    """The table of GPU types × counts only: a deadline, a budget, prices (``plan`` with several GPUs or counts)."""

    deadline: Annotated[
        str | None, Flag("--deadline", "Longest acceptable run, e.g. 12h, 90m, 2d (needs the run's size).")
    ] = None
    budget: Annotated[float | None, Flag("--budget", "Most the run may cost, in the price table's currency (USD).")] = (
        None
    )
    price: Annotated[
        list[str] | None,
        Flag("--price", "GPU=PRICE per GPU-hour, e.g. h100=2.49; wins over the price tables. Repeatable."),
    ] = None


@dataclass(frozen=True)
class SuggestOptions(OptionGroup):
    """``calibrate --suggest K``: the model, GPU and plan space to suggest settings for; None = not given."""

    suggest: Annotated[
        int | None,
        Flag(
            "--suggest",
            "Write the K settings whose measurement most narrows the time predictions over the plan space of "
            "--model / --gpu (a CSV to fill in, at --template FILE) instead of calibrating.",
            min=1,
            max=50,
            metavar="K",
        ),
    ] = None
    model: Annotated[str | None, Flag("--model", "With --suggest: the model you will train.")] = None
    gpu: Annotated[str | None, Flag("--gpu", "With --suggest: the GPU you will train on.")] = None
    num_gpus: Annotated[int, Flag("--num-gpus", "With --suggest: GPUs (one node).", min=1, max=64)] = 1
    seq_len: Annotated[
        list[int] | None,
        Flag(
            "--seq-len",
            f"With --suggest: a sequence length you will choose among; repeat for several (default {DEFAULT_SEQ_LEN}).",
            min=8,
        ),
    ] = None

    def stray_flags(self) -> list[str]:
        """The --suggest-only options given without --suggest (the flags, for an error line)."""
        if self.suggest is not None:
            return []
        values = (("--model", self.model), ("--gpu", self.gpu), ("--seq-len", self.seq_len))
        return [flag for flag, value in values if value] + (["--num-gpus"] if self.num_gpus != 1 else [])


DEFAULT_NODES = NodeOptions()
DEFAULT_SIZE = SizeOptions()
NO_DATASET = DatasetOptions()
NO_EVAL = EvalOptions()
NO_GRID = GridOptions()
NO_SUGGESTION = SuggestOptions()
"""Each group with no option given: a command's default for its group parameter (the decorator replaces it)."""
