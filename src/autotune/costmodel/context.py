"""The derived facts of one setting, built once and read by the memory and the time model alike.

A setting's dtypes, token counts, recompute passes, parameter facts (counts, the decoder's linears, what peft
builds for its adapters, the trainable parameters: each counted once here, so no term returns to ``params``) and —
the one decision both models used to make on their own — whether attention runs a flash / memory-efficient kernel
(no s×s scores in memory, the causal half skipped in time) or the math path (scores materialised, every score
computed). Memory and time take the answer from here, so they cannot disagree (issue 18: on the RX 7900 XTX the
time model ran math attention while memory assumed flash).
"""

from __future__ import annotations

import functools
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
from autotune.schemas.setting import SCORE_ATTENTION_IMPLS, TrainingSetting, Workload


def uses_flash_attention(setting: TrainingSetting, gpu: GpuSpec) -> bool:
    """True when attention runs a flash / memory-efficient kernel.

    That is SDPA, flash-attn or llm-foundry's Triton kernel on a GPU that has one
    (``GpuSpec.supports_flash_attention``); eager attention, or SDPA on a GPU without such a kernel (PyTorch's SDPA then
    falls back to the math path, ``sdp_utils``' backend selection), materialises the n_q·s scores per token.
    """
    return setting.attention_impl not in SCORE_ATTENTION_IMPLS and gpu.supports_flash_attention


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
        seq_tokens=seq,
        tokens=setting.micro_batch_size * seq,
        peak_seq_tokens=peak_seq,
        peak_tokens=setting.micro_batch_size * peak_seq,
        forward_passes=1 + int(setting.grad_ckpt),
        lora_dropout=dropout,
        fused=fused_kernels(model, setting),
    )
