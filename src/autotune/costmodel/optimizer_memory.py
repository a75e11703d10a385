"""Optimizer-state bytes the memory levers change: paged 8-bit states in managed memory, the optimizer in backward.

Used by :mod:`autotune.costmodel.memory` (its module docstring describes the phases these parts enter).
"""

from __future__ import annotations

from autotune.costmodel.params import ParamCounts, linear_modules, lora_params
from autotune.costmodel.precision import DtypeBytes
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting

EMBEDDING_32BIT_STATE_BYTES = 8.0
"""Bytes per embedding parameter of AdamW state under a bitsandbytes 8-bit optimizer in the HF Trainer: its
``create_optimizer`` registers every ``nn.Embedding`` with ``GlobalOptimManager.register_module_override(module,
'weight', {'optim_bits': 32})`` (transformers ``trainer.py``), so those two moments are fp32. Llama-3-8B: 525M
embedding parameters, +2.9 GiB over 8-bit states (the core's compiled full run measured 65.50 GiB, 60.42 predicted
without it). Paged 8-bit states live in managed memory, outside the allocated peak; sharded flat parameters do not
match the module override."""

PAGED_MIN_PARAMS = 100_000
"""bitsandbytes pages the state of parameters with at least this many elements (``Optimizer8bit.get_state_buffer``:
``p.numel() < 1e5`` stays on the caching allocator)."""


def largest_trainable_tensor_params(model: ModelSpec, setting: TrainingSetting, counts: ParamCounts) -> float:
    """Elements of the largest trainable tensor: the most gradient the optimizer in backward holds at once.

    Full fine-tuning: the embedding, the output head or the largest decoder linear (one instance; an MoE whose
    experts are one stored parameter is under-counted by its expert count). Adapter methods: every adapter's gradient
    is counted (a bound: they are a few hundred MiB at most, and each adapter's is too small to matter alone).
    """
    if setting.uses_adapters:
        return lora_params(model, setting.lora_rank, setting.lora_targets)
    linears = (m.in_features * m.out_features for m in linear_modules(model))
    return float(max(counts.embedding_params, counts.lm_head_params, *linears))


def paged_optimizer_bytes(model: ModelSpec, setting: TrainingSetting, counts: ParamCounts, dtypes: DtypeBytes) -> float:
    """Bytes of a paged 8-bit optimizer's states held in managed memory (module docstring); 0 unless paged.

    Full fine-tuning only: every trainable tensor but the norms and biases has at least ``PAGED_MIN_PARAMS`` elements;
    the embedding's states are 32-bit (``EMBEDDING_32BIT_STATE_BYTES``, the Trainer's override). Adapter tensors are
    rank × width, mostly under the threshold: their states stay on the allocator (a bound; a few MiB). Sharded and
    offloaded runs use their own optimizers (the planner does not pair them with bitsandbytes).
    """
    if setting.optimizer != "paged-adamw-8bit" or setting.uses_adapters or setting.shards_states:
        return 0.0
    paged = counts.total_params - unpaged_params(counts) - counts.embedding_params
    return paged * EIGHT_BIT_MOMENTS_BYTES + counts.embedding_params * EMBEDDING_32BIT_STATE_BYTES


EIGHT_BIT_MOMENTS_BYTES = 2.0
"""Bytes per parameter of the two uint8 moments of a bitsandbytes 8-bit optimizer (what ``get_state_buffer`` pages);
the fp32 absmax per 256-element block of each is a plain ``torch.zeros`` on the allocator
(``Optimizer8bit.init_state``)."""


def unpaged_params(counts: ParamCounts) -> int:
    """Parameters below ``PAGED_MIN_PARAMS`` in a full fine-tune: the norms and biases.

    All but the linears, the embedding and the output head; their paged-optimizer states stay on the caching allocator.
    """
    linear_like = counts.decoder_linear_params + counts.embedding_params + counts.lm_head_params
    return max(0, counts.total_params - linear_like)


def late_embedding_gradient_bytes(
    model: ModelSpec, setting: TrainingSetting, counts: ParamCounts, dtypes: DtypeBytes
) -> float:
    """The input embedding's gradient where the backward allocates it last, after the first layer's working set; else 0.

    The embedding lookup is the forward's first op, so autograd runs its backward (``embedding_dense_backward``: a new
    vocab × hidden gradient) after every decoder layer's, when the first layer's working activations are already
    freed. So the late-backward phase (every gradient beside one layer's working set, ``memory.memory_phases``) holds
    all gradients but this one; the moment after, all gradients without the working set, is the optimizer step's
    phase. A new tensor there only in full fine-tuning with one micro-step per optimizer step (with accumulation the
    gradient persists from the earlier micro-steps), an untied embedding (a tied one's gradient is created by the
    output head, at the start of the backward), unsharded gradients on the GPU, and the optimizer stepped after the
    backward (in the backward, gradients are one tensor at a time already). Measured: Llama-3-8B full, paged 8-bit
    AdamW, micro batch 2, 2048 tokens, checkpointing: the trace's peak is the optimizer step's (30.20 GiB), 1.0 GiB
    under the late backward counted with this gradient (``benchmarks/trace_agreement.py --levers``).
    """
    if setting.uses_adapters or setting.grad_accum > 1 or setting.optimizer_in_backward or model.tie_word_embeddings:
        return 0.0
    if setting.shards_states or setting.offloads_to_cpu:
        return 0.0
    return counts.embedding_params * dtypes.grad_bytes
