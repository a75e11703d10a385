"""What is trained on: sequence length, global batch, dataset size, how its sequences are batched, the eval set.

``Workload.batches`` is one of three kinds (a pydantic discriminated union on ``kind``), and readers ``match`` on it:

* ``filled`` (:class:`FilledBatches`): every sequence holds ``seq_len`` real tokens (the synthetic workload, or packed
  blocks priced as full blocks of one example each);
* ``padded`` (:class:`PaddedBatches`): one example per sequence, each micro batch padded to its longest example;
* ``packed`` (:class:`PackedBatches`): a dataset's examples packed into blocks of ``seq_len``, with what attention over
  them costs.

``Workload.eval`` (:class:`EvalSet`) is the held-out set each eval loss runs over and its schedule.

Plan files before schema 3, run reports before schema 4, the measurement files and CSV rows state these as flat
optional fields of the workload (``tokens_per_sample``, ``padded_length_quantiles``, ``eval_samples``, …);
:meth:`Workload._from_flat_fields` reads them into the sub-models.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from autotune.schemas._base import FrozenModel
from autotune.schemas.setting import DEFAULT_SEQ_LEN, DESCRIPTIONS, TrainingSetting


def expected_longest(sorted_lengths: tuple[int, ...], draws: int) -> float:
    """E[max of ``draws`` independent draws] from ``sorted_lengths`` (ascending, each equally likely).

    P(max ≤ x₍ₖ₎) = (k / N)ⁿ for the k-th of N sorted values and n draws, so E[max] = Σₖ x₍ₖ₎ ((k/N)ⁿ − ((k−1)/N)ⁿ).
    """
    count = len(sorted_lengths)
    return sum(length * (((k + 1) / count) ** draws - (k / count) ** draws) for k, length in enumerate(sorted_lengths))


class FilledBatches(FrozenModel):
    """Every sequence holds ``seq_len`` real tokens: the synthetic workload, or packed blocks without statistics.

    The training core packs a dataset into blocks of ``seq_len`` for it (``trainer.train``).
    """

    kind: Literal["filled"] = Field(default="filled", description="filled: every sequence seq_len real tokens.")


class PaddedLengths(FrozenModel):
    """A dataset's example lengths after truncation, from which a padded micro batch's tokens follow."""

    quantiles: tuple[int, ...] = Field(
        min_length=1,
        description="The kept examples' lengths after truncation, one per equal share of them "
        "(``dataset_stats.length_bins``), ascending: a micro batch is padded to its longest example.",
    )
    longest_tokens: int = Field(
        ge=1, description="The longest kept example after truncation (activation memory's worst micro batch)."
    )

    @model_validator(mode="after")
    def _ascending(self) -> PaddedLengths:
        quantiles = self.quantiles
        if list(quantiles) != sorted(quantiles) or quantiles[0] < 1 or self.longest_tokens < quantiles[-1]:
            raise ValueError("quantiles must ascend from at least 1 to at most longest_tokens")
        return self


class PaddedBatches(FrozenModel):
    """One example per sequence, each micro batch padded to its longest (``plan --dataset --packing padded``)."""

    kind: Literal["padded"] = Field(default="padded", description="padded: one example per sequence.")
    tokens_per_sample: float = Field(
        gt=0, description="Mean real tokens per sample when samples are shorter than seq_len and unpacked."
    )
    lengths: PaddedLengths | None = Field(
        default=None,
        description="The examples' length distribution (a dataset's); None = every example priced at the mean.",
    )


class PackedBatches(FrozenModel):
    """A dataset's examples packed into blocks of ``seq_len`` (``plan --dataset --packing packed``)."""

    kind: Literal["packed"] = Field(default="packed", description="packed: examples in blocks of seq_len.")
    attention_span_tokens: float = Field(
        gt=0,
        description="Σ lᵢ² / (blocks × seq_len) over the kept examples' lengths lᵢ after truncation, in tokens "
        "(``DatasetStats.attention_span_tokens`` × its packing efficiency): attention that stays inside each example "
        "costs this many keys per block token instead of the block's seq_len, Σ lᵢ² in all (flash-attn's varlen "
        "kernels on a flattened micro batch, which carries no block padding).",
    )
    multi_example_block_share: float = Field(
        ge=0,
        le=1,
        description="The share of the packed blocks that hold more than one example (their row gets a "
        "block-diagonal attention mask under sdpa / eager).",
    )


Batches = Annotated[FilledBatches | PaddedBatches | PackedBatches, Field(discriminator="kind")]
"""How a workload's sequences are batched: filled, padded or packed (module docstring)."""


class EvalSet(FrozenModel):
    """The held-out set each eval loss runs over (plan --eval-fraction / --eval-dataset) and how often it runs."""

    samples: int | None = Field(
        default=None,
        ge=1,
        description="Held-out sequences each eval loss runs over, counted as sequences of this workload (the eval "
        "set's tokens ÷ tokens_per_sequence). None = the run has no size: no eval priced.",
    )
    steps: int | None = Field(
        default=None,
        ge=1,
        description="An eval every N optimizer steps as well as at the end (--eval-steps); None = at the end only.",
    )


FLAT_FIELDS = (
    "tokens_per_sample",
    "padded_length_quantiles",
    "padded_longest_tokens",
    "packed_attention_span_tokens",
    "packed_multi_example_block_share",
    "eval_samples",
    "eval_steps",
)
"""The workload's fields before ``batches`` and ``eval`` (plan schema 2, run report schema 3, measurement files)."""


def _flat_padded(flat: dict[str, Any]) -> dict[str, Any] | None:
    """The padded batches the flat fields state, or None when they state none."""
    quantiles, longest = flat.get("padded_length_quantiles"), flat.get("padded_longest_tokens")
    if flat.get("tokens_per_sample") is None:
        if quantiles is not None or longest is not None:
            raise ValueError("padded_length_quantiles needs tokens_per_sample (the mean real tokens)")
        return None
    if flat.get("packed_attention_span_tokens") is not None:
        raise ValueError("packed_attention_span_tokens is for packed (not padded) batches only")
    lengths = None if quantiles is None and longest is None else {"quantiles": quantiles, "longest_tokens": longest}
    return {"kind": "padded", "tokens_per_sample": flat["tokens_per_sample"], "lengths": lengths}


def flat_batches(flat: dict[str, Any]) -> dict[str, Any] | None:
    """The ``batches`` of a workload written with :data:`FLAT_FIELDS`; None = filled (the default).

    ``tokens_per_sample`` (with ``padded_length_quantiles`` and ``padded_longest_tokens`` when a dataset gave them):
    padded; ``packed_attention_span_tokens`` and ``packed_multi_example_block_share``: packed; neither: filled.

    Raises:
        ValueError: fields of two kinds, or one of two fields that go together (one line naming them).
    """
    padded = _flat_padded(flat)
    if padded is not None:
        return padded
    span, share = flat.get("packed_attention_span_tokens"), flat.get("packed_multi_example_block_share")
    if span is None and share is None:
        return None
    if span is None or share is None:
        raise ValueError("packed_attention_span_tokens and packed_multi_example_block_share go together")
    return {"kind": "packed", "attention_span_tokens": span, "multi_example_block_share": share}


class Workload(FrozenModel):
    """What is trained on: sequence length, global batch, dataset size, its batches and the eval set."""

    seq_len: int = Field(default=DEFAULT_SEQ_LEN, ge=8, le=1_048_576, description=DESCRIPTIONS["seq_len"])
    global_batch_size: int = Field(default=32, ge=1, le=1_048_576, description=DESCRIPTIONS["global_batch_size"])
    num_samples: int | None = Field(default=None, ge=1, description=DESCRIPTIONS["num_samples"])
    dataset_tokens: int | None = Field(default=None, ge=1, description=DESCRIPTIONS["dataset_tokens"])
    epochs: float = Field(default=1.0, gt=0, le=1000, description=DESCRIPTIONS["epochs"])
    batches: Batches = Field(
        default_factory=FilledBatches,
        description="How the sequences are batched: filled (every sequence seq_len real tokens), padded (one example "
        "per sequence, padded to the micro batch's longest) or packed (a dataset's examples in blocks of seq_len).",
    )
    eval: EvalSet | None = Field(
        default=None, description="The held-out set of the eval loss and its schedule; None = no eval."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_flat_fields(cls, data: Any) -> Any:
        """Read a workload written with the flat fields (:data:`FLAT_FIELDS`) into ``batches`` and ``eval``.

        Plan files before schema 3, run reports before schema 4, the shipped measurement files and CSV rows.

        Raises:
            ValueError: flat and nested fields together, or flat fields that contradict each other.
        """
        if not isinstance(data, dict) or not any(key in data for key in FLAT_FIELDS):
            return data
        if "batches" in data or "eval" in data:
            raise ValueError(f"give batches and eval, or the fields of plans before schema 3 ({FLAT_FIELDS[0]}, …)")
        upgraded = {key: value for key, value in data.items() if key not in FLAT_FIELDS}
        batches = flat_batches(data)
        if batches is not None:
            upgraded["batches"] = batches
        if data.get("eval_samples") is not None or data.get("eval_steps") is not None:
            upgraded["eval"] = {"samples": data.get("eval_samples"), "steps": data.get("eval_steps")}
        return upgraded

    @model_validator(mode="after")
    def _within_seq_len(self) -> Workload:
        if self.num_samples is not None and self.dataset_tokens is not None:
            raise ValueError("give either num_samples or dataset_tokens, not both")
        match self.batches:
            case PaddedBatches(lengths=PaddedLengths(longest_tokens=longest)) if longest > self.seq_len:
                raise ValueError("batches.lengths.longest_tokens is at most seq_len")
            case PackedBatches(attention_span_tokens=span) if span > self.seq_len:
                raise ValueError("batches.attention_span_tokens is at most seq_len")
        return self

    @property
    def tokens_per_sequence(self) -> float:
        """Real tokens per sequence: padded batches' mean example (at most seq_len), else seq_len (filled / packed)."""
        match self.batches:
            case PaddedBatches(tokens_per_sample=mean):
                return min(float(self.seq_len), mean)
        return float(self.seq_len)

    def computed_tokens_per_sequence(self, micro_batch_size: int) -> float:
        """Tokens computed per sequence of a micro batch of ``micro_batch_size``: padding included.

        Padded batches with their lengths: every row is padded to the micro batch's longest example, so a row computes
        E[max of b lengths] tokens, b = the micro batch, the lengths drawn independently (the Trainer's random
        sampler) from the quantiles, each equally likely: Σₖ qₖ ((k+1)ⁿ − kⁿ) / Nⁿ over the N sorted quantiles, n = b
        (the distribution of the maximum of n draws; at least the mean real length). Otherwise
        :attr:`tokens_per_sequence`.
        """
        match self.batches:
            case PaddedBatches(lengths=PaddedLengths(quantiles=quantiles)):
                return max(self.tokens_per_sequence, expected_longest(quantiles, micro_batch_size))
        return self.tokens_per_sequence

    @property
    def peak_tokens_per_sequence(self) -> float:
        """Tokens of the longest sequence a micro batch can hold (memory's worst case).

        The longest example of padded batches with their lengths, else :attr:`tokens_per_sequence`.
        """
        match self.batches:
            case PaddedBatches(lengths=PaddedLengths(longest_tokens=longest)):
                return float(longest)
        return self.tokens_per_sequence

    def with_dataset(self, num_samples: int, batches: FilledBatches | PaddedBatches | PackedBatches) -> Workload:
        """This workload with a dataset's sequences and batches in place of its size and batches, validated together.

        ``num_samples``: the dataset's sequences (``dataset_stats.dataset_batches``: its blocks or examples).

        Raises:
            pydantic.ValidationError: the statistics do not fit ``seq_len`` (a bug of the caller, not user input).
        """
        update = {"num_samples": num_samples, "dataset_tokens": None, "batches": batches}
        return Workload.model_validate({**self.model_dump(), **update})

    def optimizer_steps(self, setting: TrainingSetting, world_size: int) -> int | None:
        """Optimizer steps of the whole run, as the HF Trainer counts them; None without a dataset size.

        The one count of the run's length: the cost model's whole run (``costmodel.estimate``) and the calibration's
        fit of whole-run times (``calibration.time_fit``) both read it.

        With ``num_samples`` N: each of ``world_size`` ranks reads ⌈N / world⌉ sequences (DistributedSampler pads
        to equal shares), in ⌈· / micro batch⌉ micro batches (the last one partial, ``drop_last`` False), which
        make ⌈· / grad_accum⌉ optimizer steps per epoch (the last one short), and the run is ⌈epochs × that⌉ steps
        (transformers 5.23 ``Trainer.set_initial_training_values``: ``num_update_steps_per_epoch`` and
        ``max_steps = ceil(num_train_epochs * num_update_steps_per_epoch)``). With ``dataset_tokens`` only: the
        sequences it makes ÷ the global batch, rounded up.
        """
        if self.num_samples is not None:
            micro_batches = math.ceil(math.ceil(self.num_samples / world_size) / setting.micro_batch_size)
            per_epoch = max(1, math.ceil(micro_batches / setting.grad_accum))
            return math.ceil(self.epochs * per_epoch)
        samples = self.total_samples
        return max(1, math.ceil(samples / setting.sequences_per_step(world_size))) if samples is not None else None

    def num_evals(self, optimizer_steps: int) -> int:
        """Eval losses a run of ``optimizer_steps`` computes: 0 without an eval set of known size.

        transformers 5.23 ``DefaultFlowCallback.on_step_end`` evaluates when ``global_step % eval_steps == 0`` and at
        the last step when it is not a multiple, and the core adds the final eval when there is no ``eval_steps``
        (``trainer.train._run``, unless the last step was just evaluated): ⌈steps / eval_steps⌉, else 1.
        """
        match self.eval:
            case EvalSet(samples=int(), steps=int() as steps):
                return math.ceil(optimizer_steps / steps)
            case EvalSet(samples=int()):
                return 1
        return 0

    @property
    def total_samples(self) -> float | None:
        """Sequences over all epochs, or None when the dataset size is not given."""
        if self.num_samples is not None:
            return self.num_samples * self.epochs
        if self.dataset_tokens is not None:
            return self.dataset_tokens / self.tokens_per_sequence * self.epochs
        return None
