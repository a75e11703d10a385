"""The derived facts of one setting, built once and read by the memory and the time model alike.

A setting's dtypes, token counts, recompute passes, parameter facts (counts, the decoder's linears, what peft
builds for its adapters, the trainable parameters: each counted once here, so no term returns to ``params``) and —
the one decision both models used to make on their own — whether attention runs a flash / memory-efficient kernel
(no s×s scores in memory, the causal half skipped in time) or the math path (scores materialised, every score
computed). Memory and time take the answer from here, so they cannot disagree (issue 18: on the RX 7900 XTX the
time model ran math attention while memory assumed flash). Likewise how often SDPA's call carries an explicit mask
(:func:`masked_attention_share`: packed rows of several examples, padded micro batches) and what attention over
flattened packed rows costs (:func:`flattened_attention_span_tokens`), issue 26.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

from autotune.costmodel.fused_kernels import FusedKernels, fused_kernels
from autotune.costmodel.params import (
    NO_LORA,
    LinearModule,
    LoraLayout,
    ParamCounts,
    adapter_layout,
    count_params,
    linear_modules,
    lora_params,
)
from autotune.costmodel.precision import DtypeBytes, dtype_bytes
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.lora_targets import effective_lora_dropout
from autotune.schemas.model import ModelSpec
from autotune.schemas.packing import packed_layout
from autotune.schemas.setting import SCORE_ATTENTION_IMPLS, TrainingSetting
from autotune.schemas.workload import PackedBatches, PaddedBatches, PaddedLengths, Workload


def uses_flash_attention(setting: TrainingSetting, gpu: GpuSpec) -> bool:
    """True when attention runs a flash / memory-efficient kernel.

    That is SDPA, flash-attn or llm-foundry's Triton kernel on a GPU that has one
    (``GpuSpec.supports_flash_attention``); eager attention, or SDPA on a GPU without such a kernel (PyTorch's SDPA then
    falls back to the math path, ``sdp_utils``' backend selection), materialises the n_q·s scores per token.
    """
    return setting.attention_impl not in SCORE_ATTENTION_IMPLS and gpu.supports_flash_attention


PRE_FLASH_ATTENTION_2_GENERATIONS = frozenset({"turing", "volta"})
"""GPU generations with a memory-efficient attention kernel but no FlashAttention-2: flash-attn 2 needs compute
capability 8.0+ ("FlashAttention only supports Ampere GPUs or newer", Dao-AILab/flash-attention README), and torch
SDPA's flash backend checks sm80+ (``sdp_utils.cpp`` ``check_sm_version``); on these cards SDPA's mask-free call
already runs the memory-efficient kernel."""


def has_flash_attention_2(gpu: GpuSpec) -> bool:
    """True when ``gpu`` runs FlashAttention-2 (torch SDPA's flash backend, the flash-attn package).

    A GPU with a flash / memory-efficient kernel (``GpuSpec.supports_flash_attention``) of a generation newer than
    :data:`PRE_FLASH_ATTENTION_2_GENERATIONS`.
    """
    return gpu.supports_flash_attention and gpu.generation not in PRE_FLASH_ATTENTION_2_GENERATIONS


def masked_attention_share(setting: TrainingSetting, gpu: GpuSpec, workload: Workload) -> float:
    """Share of the micro batches whose SDPA call carries an explicit mask (the masked SDPA path), in 0..1.

    Only ``attention_impl: sdpa`` on a GPU with a flash kernel (:func:`uses_flash_attention`) can lose that kernel;
    eager and SDPA without one already run the math path. transformers 5.23 gives SDPA a 4D mask when a row of the
    micro batch restarts its ``position_ids`` (``masking_utils.find_packed_sequence_indices``: packed blocks of
    several examples, the ``row-per-block`` layout of ``schemas.packing.PACKED_LAYOUTS``) or when the padding mask
    has a 0 (``_ignore_causal_mask_sdpa`` skips the mask only when ``padding_mask.all()``: a padded micro batch whose
    rows differ in length); else it calls SDPA mask-free with ``is_causal`` and ``enable_gqa``. With a mask
    (``integrations/sdpa_attention.py``) ``use_gqa_in_sdpa`` is False on CUDA, so k and v are repeated to every
    query head (``repeat_kv``), and ``is_causal`` is False; torch's flash backend refuses any ``attn_mask``
    (``sdp_utils.cpp`` ``check_for_attn_mask``), so the memory-efficient (cutlass) kernel runs over all s² scores.

    The micro batch's rows are drawn independently (the Trainer's random sampler), b = the micro batch:

    * padded batches with their lengths (``PaddedBatches.lengths``): 1 − Σᵥ pᵥᵇ, pᵥ the share of the kept lengths
      equal to v (the micro batch is mask-free only when its rows are equally long; 0 for micro batch 1);
    * packed blocks (``PackedBatches.multi_example_block_share`` = m): 1 − (1 − m)ᵇ (mask-free only when every
      block holds one example: the core pads rows by continuing positions, ``trainer.packed.PackedCollator``);
    * anything else (filled sequences, the synthetic workload): 0.

    Not modelled: under ``torch.compile`` transformers cannot read the mask's values and keeps it always.
    """
    if setting.attention_impl != "sdpa" or not uses_flash_attention(setting, gpu):
        return 0.0
    rows = setting.micro_batch_size
    match workload.batches:
        case PaddedBatches(lengths=PaddedLengths(quantiles=quantiles)):
            counts = Counter(quantiles).values()
            return max(0.0, 1.0 - sum((count / len(quantiles)) ** rows for count in counts))
        case PackedBatches(multi_example_block_share=multi):
            return 1.0 - (1.0 - multi) ** rows
    return 0.0


def flattened_attention_span_tokens(setting: TrainingSetting, workload: Workload) -> float | None:
    """Keys per query token (before the causal half) when packed blocks run flattened, else None.

    ``flash_attention_2`` lays a packed micro batch out as one row (``PACKED_LAYOUTS``: ``flattened``) and its varlen
    kernel attends inside each example, Σ lᵢ² over the examples: per token Σ lᵢ² / Σ lᵢ
    (``PackedBatches.attention_span_tokens``) instead of the block's seq_len. None without that statistic (not a
    packed dataset, or a plan written before it) or for another layout.
    """
    match workload.batches:
        case PackedBatches(attention_span_tokens=span) if packed_layout(setting.attention_impl) == "flattened":
            return span
    return None


@dataclass(frozen=True)
class SettingContext:
    """One setting on one cluster, with the facts derived from it (every field is read by memory, time or both).

    Attributes:
        model, setting, cluster, workload: the inputs.
        dtypes: bytes per element (``precision.dtype_bytes``).
        counts: parameter counts (``params.count_params``).
        linear_modules: the decoder layers' linears (``params.linear_modules``).
        lora: what peft builds for the adapters (``params.lora_layout``; ``params.NO_LORA`` without adapters).
        trainable_params: parameters the optimizer updates: the adapters' (``params.lora_params``), else every one.
        flash_attention: :func:`uses_flash_attention`.
        masked_attention_share: :func:`masked_attention_share` (0 = SDPA always mask-free).
        attention_span_tokens: :func:`flattened_attention_span_tokens` (None: attention spans the sequence).
        seq_tokens: tokens computed per sequence, padding included (``Workload.computed_tokens_per_sequence``).
        tokens: tokens per micro batch (micro batch × ``seq_tokens``).
        peak_seq_tokens: tokens of the longest sequence a micro batch can hold (``Workload.peak_tokens_per_sequence``):
            what activation memory is sized for (padded batches: the longest example; else ``seq_tokens``).
        peak_tokens: micro batch × ``peak_seq_tokens``.
        forward_passes: forward passes per micro-step (2 with activation checkpointing: the recompute).
        lora_dropout: the dropout peft applies to the adapters (0 when a parameter target forces it off;
            :func:`autotune.schemas.lora_targets.effective_lora_dropout`); 0 without adapters.
        fused: the modules ``setting.kernels`` replaces with fused kernels (:func:`fused_kernels.fused_kernels`;
            none for ``kernels: none``): memory and time read their Liger variants from it.
    """

    model: ModelSpec
    setting: TrainingSetting
    cluster: ClusterSpec
    workload: Workload
    dtypes: DtypeBytes
    counts: ParamCounts
    linear_modules: tuple[LinearModule, ...]
    lora: LoraLayout
    trainable_params: int
    flash_attention: bool
    masked_attention_share: float
    attention_span_tokens: float | None
    seq_tokens: float
    tokens: float
    peak_seq_tokens: float
    peak_tokens: float
    forward_passes: int
    lora_dropout: float
    fused: FusedKernels

    @property
    def gpu(self) -> GpuSpec:
        """The cluster's GPU."""
        return self.cluster.gpu

    @property
    def masked_attention(self) -> bool:
        """True when some micro batch runs the masked SDPA path (memory is sized for the worst micro batch)."""
        return self.masked_attention_share > 0

    @property
    def layers(self) -> int:
        """Decoder layers."""
        return self.model.num_hidden_layers

    @property
    def world_size(self) -> int:
        """Data-parallel ranks (``ClusterSpec.world_size``)."""
        return self.cluster.world_size


@dataclass(frozen=True)
class ParameterFacts:
    """The parameter facts of a model and its adapters (the ``SettingContext`` fields of the same names)."""

    counts: ParamCounts
    linear_modules: tuple[LinearModule, ...]
    lora: LoraLayout
    trainable_params: int


@functools.lru_cache(maxsize=512)
def parameter_facts(model: ModelSpec, adapters: bool, rank: int, targets: tuple[str, ...]) -> ParameterFacts:
    """Count ``model``'s parameters and, with ``adapters``, what peft builds for ``targets`` at ``rank`` (cached).

    The one place a setting's walk enters ``params``: the candidates of a plan share a model and a few adapter
    shapes, so each is counted once.

    Raises:
        InvalidRequestError: LoRA targets or rank the model cannot take (``params.lora_adapters``).
    """
    counts = count_params(model)
    return ParameterFacts(
        counts=counts,
        linear_modules=linear_modules(model),
        lora=adapter_layout(model, rank, targets) if adapters else NO_LORA,
        trainable_params=lora_params(model, rank, targets) if adapters else counts.total_params,
    )


def setting_context(
    model: ModelSpec, setting: TrainingSetting, cluster: ClusterSpec, workload: Workload
) -> SettingContext:
    """Derive a :class:`SettingContext` (pure; no I/O).

    Raises:
        InvalidRequestError: LoRA targets or rank the model cannot take (``params.lora_adapters``).
    """
    seq = workload.computed_tokens_per_sequence(setting.micro_batch_size)
    peak_seq = max(seq, workload.peak_tokens_per_sequence)
    adapters = setting.uses_adapters
    dropout = effective_lora_dropout(model.model_type, setting.lora_targets, setting.lora_dropout) if adapters else 0.0
    facts = parameter_facts(model, adapters, setting.lora_rank, setting.lora_targets)
    return SettingContext(
        model=model,
        setting=setting,
        cluster=cluster,
        workload=workload,
        dtypes=dtype_bytes(setting, cluster.gpu),
        counts=facts.counts,
        linear_modules=facts.linear_modules,
        lora=facts.lora,
        trainable_params=facts.trainable_params,
        flash_attention=uses_flash_attention(setting, cluster.gpu),
        masked_attention_share=masked_attention_share(setting, cluster.gpu, workload),
        attention_span_tokens=flattened_attention_span_tokens(setting, workload),
        seq_tokens=seq,
        tokens=setting.micro_batch_size * seq,
        peak_seq_tokens=peak_seq,
        peak_tokens=setting.micro_batch_size * peak_seq,
        forward_passes=1 + int(setting.grad_ckpt),
        lora_dropout=dropout,
        fused=fused_kernels(model, setting),
    )
