"""Chunked causal-LM cross-entropy (``loss_impl: chunked``): the full b·s·V logits never exist.

The output head's matmul and the cross-entropy run on at most ``CHUNK_TOKENS`` rows at a time, each
chunk under ``torch.utils.checkpoint`` (non-reentrant), so forward keeps only the chunk's inputs and
backward recomputes one chunk's logits at a time. This is the idea of Liger Kernel's fused linear
cross-entropy (Hsu et al. 2024, "Liger Kernel: Efficient Triton Kernels for LLM Training", §3.3) in
plain PyTorch (runs on the CPU; no Triton).

Legend: b micro batch, s sequence length, h hidden size, V vocabulary size, c chunk rows.

Memory: the loss holds at most a few c×V fp32 tensors at once (logits, their fp32 copy, the
log-softmax saved for backward, the gradient of the logits) instead of the same on b·s×V
(``autotune.costmodel.activations.logits_peak_bytes``). Time: the head's matmul runs once more per
chunk in backward (``autotune.costmodel.head_time``).

Numerics match transformers' ``ForCausalLMLoss`` (``transformers/loss/loss_utils.py``): labels are
shifted by one (the last position of each sequence predicts nothing), logits are upcast to fp32,
ignore index -100, reduction = sum / ``num_items_in_batch`` when the Trainer passes it (gradient
accumulation over the whole optimizer step), else the mean over non-ignored tokens.

How the Trainer uses it (:class:`ChunkedLossTrainer`): a forward pre-hook on the output head captures
the final hidden states (after the final norm) and hands the head an empty slice of them, so the
model's forward computes b×0×V logits; the loss is then computed from the captured hidden states and
the head's own weight (and bias). Gemma 2's final soft-capping (``tanh(z / cap) · cap``) is applied per
chunk. It reads the head's parameters outside the model's forward, which parameter-sharded runs
(FSDP, ZeRO-3) do not allow: those are refused by :func:`check_chunked_loss_supported`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import Trainer

from autotune.errors import ConfigError
from autotune.schemas.setting import PARAMETER_SHARDINGS
from autotune.trainer.data import IGNORE_INDEX

logger = logging.getLogger("autotune.trainer")

CHUNK_TOKENS = 1024
"""Rows of logits computed at once; equals ``autotune.costmodel.activations.CHUNKED_LOSS_TOKENS``
(kept as its own constant because the trainer does not import the cost model; a test checks both agree)."""


"""Shardings whose output head weight is only whole inside the head's own forward."""


def _chunk_loss_sum(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    softcap: float | None,
) -> torch.Tensor:
    """Summed fp32 cross-entropy of one chunk: ``hidden`` (c, h), ``weight`` (V, h), ``labels`` (c,)."""
    logits = F.linear(hidden, weight, bias).float()
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    return F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="sum")


def chunked_loss_sum(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    chunk_tokens: int = CHUNK_TOKENS,
    softcap: float | None = None,
) -> torch.Tensor:
    """Summed fp32 cross-entropy of rows ``hidden`` (n, h) against ``labels`` (n,), ``chunk_tokens`` rows at a time.

    Each chunk runs under a non-reentrant checkpoint (its logits are recomputed in backward).
    """
    total = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, hidden.shape[0], chunk_tokens):
        rows = slice(start, start + chunk_tokens)
        part = checkpoint(_chunk_loss_sum, hidden[rows], weight, bias, labels[rows], softcap, use_reentrant=False)
        total = total + part
    return total


def chunked_causal_lm_loss(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    labels: torch.Tensor,
    chunk_tokens: int = CHUNK_TOKENS,
    softcap: float | None = None,
    num_items_in_batch: torch.Tensor | int | None = None,
    lm_head_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Next-token cross-entropy of ``hidden_states @ lm_head_weight.T`` computed ``chunk_tokens`` rows at a time.

    Args:
        hidden_states: (b, s, h) final hidden states (after the model's final norm), any float dtype.
        lm_head_weight: (V, h) output head weight (the embedding matrix when tied).
        labels: (b, s) token ids, -100 where no loss is taken; shifted here (position t predicts t+1).
        chunk_tokens: rows of logits materialized at once (forward and backward).
        softcap: Gemma 2's ``final_logit_softcapping`` (``tanh(z / cap) · cap``), or None.
        num_items_in_batch: divisor of the summed loss (the Trainer's count of non-ignored shifted labels
            over the accumulated batch); None → mean over this batch's non-ignored tokens.
        lm_head_bias: (V,) output head bias, or None.

    Returns:
        Scalar fp32 loss, equal to transformers' ``ForCausalLMLoss`` on the full logits.

    Raises:
        ValueError: ``chunk_tokens`` < 1, or ``labels`` does not match ``hidden_states``' (b, s).
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    if labels.shape != hidden_states.shape[:-1]:
        raise ValueError(f"labels {tuple(labels.shape)} do not match hidden states {tuple(hidden_states.shape)}")
    shift_labels = F.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:].reshape(-1).to(hidden_states.device)
    hidden = hidden_states.reshape(-1, hidden_states.shape[-1])
    keep = shift_labels != IGNORE_INDEX
    count = keep.sum()
    if bool(count > 0):  # rows without a target need no logits (prompt tokens, padding, last positions)
        hidden, shift_labels = hidden[keep], shift_labels[keep]
    else:  # one ignored row keeps the graph (every parameter still receives a zero gradient)
        hidden, shift_labels = hidden[:1], shift_labels[:1]
    total = chunked_loss_sum(hidden, lm_head_weight, lm_head_bias, shift_labels, chunk_tokens, softcap)
    if num_items_in_batch is None:
        return total / count
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


def output_head(model: torch.nn.Module) -> torch.nn.Linear:
    """The output head (``get_output_embeddings()``) of a causal LM, through peft and accelerate wrappers.

    Raises:
        ConfigError: the model has no output head, or it is not a plain ``nn.Linear`` (e.g. LoRA targets
            ``lm_head``, or a quantized head), which the chunked loss cannot multiply by its weight.
    """
    inner: Any = model
    while hasattr(inner, "module") and isinstance(inner.module, torch.nn.Module):  # DDP / DeepSpeed engine
        inner = inner.module
    head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
    if type(head) is not torch.nn.Linear:
        raise ConfigError(
            f"loss_impl=chunked needs a plain linear output head, this model has {type(head).__name__}; "
            "use loss_impl=fp32-upcast (or leave lm_head out of lora_targets)"
        )
    return head


def final_logit_softcap(model: torch.nn.Module) -> float | None:
    """The config's ``final_logit_softcapping`` (Gemma 2), or None when the model has none."""
    inner: Any = model
    while hasattr(inner, "module") and isinstance(inner.module, torch.nn.Module):
        inner = inner.module
    value = getattr(getattr(inner, "config", None), "final_logit_softcapping", None)
    return float(value) if value is not None else None


def check_chunked_loss_supported(sharding: str) -> None:
    """Refuse ``loss_impl=chunked`` with a parameter-sharded run.

    Raises:
        ConfigError: ``sharding`` is fsdp, fsdp-offload, zero3 or zero3-offload (the head weight is a shard
            outside the head's forward).
    """
    if sharding in PARAMETER_SHARDINGS:
        raise ConfigError(
            f"loss_impl=chunked is not supported with sharding={sharding} (the output head weight is sharded); "
            "use loss_impl=fp32-upcast or sharding none / ddp / zero2"
        )


class _HeadInputCapture:
    """While active, a forward pre-hook on the head keeps its input and hands it an empty slice of it."""

    def __init__(self) -> None:
        self.hidden_states: torch.Tensor | None = None

    def hook(self, module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        hidden = args[0]
        self.hidden_states = hidden
        return (hidden[..., :0, :], *args[1:])  # (b, 0, h): the head computes b×0×V logits


@contextmanager
def capture_head_input(head: torch.nn.Module) -> Iterator[_HeadInputCapture]:
    """Within the block, calls of ``head`` record their input and compute no logits."""
    capture = _HeadInputCapture()
    handle = head.register_forward_pre_hook(capture.hook)
    try:
        yield capture
    finally:
        handle.remove()


class ChunkedLossTrainer(Trainer):
    """transformers ``Trainer`` whose loss is :func:`chunked_causal_lm_loss` (``loss_impl: chunked``).

    It reuses ``Trainer.compute_loss`` with a ``compute_loss_func``, so labels, ``num_items_in_batch``
    (counted over the whole accumulated step), the scaling across devices and ``loss_is_scaled_for_ga``
    follow transformers' own path for custom losses.
    """

    def __init__(self, *args: Any, chunk_tokens: int = CHUNK_TOKENS, **kwargs: Any) -> None:
        """Build the Trainer with the chunked loss (``chunk_tokens`` rows at a time) as its ``compute_loss_func``."""
        if kwargs.get("compute_loss_func") is not None:
            raise ValueError("ChunkedLossTrainer sets compute_loss_func itself")
        kwargs["compute_loss_func"] = self._chunked_loss
        super().__init__(*args, **kwargs)
        if self.model is None:
            raise ValueError("ChunkedLossTrainer needs a model")
        self.chunk_tokens = chunk_tokens
        self._head = output_head(self.model)
        self._softcap = final_logit_softcap(self.model)
        self._capture: _HeadInputCapture | None = None
        logger.info("loss: chunked cross-entropy, %d rows of logits at a time", chunk_tokens)

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> Any:
        """Trainer's ``compute_loss`` with the head's logits replaced by the chunked loss."""
        if "labels" not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        with capture_head_input(self._head) as capture:
            self._capture = capture
            try:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            finally:
                self._capture = None

    def _chunked_loss(
        self, outputs: Any, labels: torch.Tensor, num_items_in_batch: torch.Tensor | int | None = None
    ) -> torch.Tensor:
        capture = self._capture
        if capture is None or capture.hidden_states is None:
            raise RuntimeError("the chunked loss ran without the output head's input captured")
        return chunked_causal_lm_loss(
            capture.hidden_states,
            self._head.weight,
            labels,
            chunk_tokens=self.chunk_tokens,
            softcap=self._softcap,
            num_items_in_batch=num_items_in_batch,
            lm_head_bias=self._head.bias,
        )
