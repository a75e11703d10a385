"""Activation and logits memory for Llama-style decoder blocks, per token, derived op by op.

Method: follow the forward of one transformers decoder layer (``modeling_llama.py``: RMSNorm → q/k/v
projections → RoPE → SDPA → o_proj → RMSNorm → gate/up → act → mul → down) and add up the tensors that
autograd saves for backward, as Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", section 4.1, eq. 1: ``s·b·h·(34 + 5·a·s/h)`` bytes per layer for GPT) do for GPT.
Differences from that paper: gated MLP (4 tensors of width I instead of 2 of 4h), GQA (k/v width
n_kv·d), RMSNorm (transformers upcasts its input to fp32 and saves it), no dropout, and flash /
memory-efficient attention (Dao et al. 2022) which saves only q, k, v, the output and the log-sum-exp,
so the ``5·a·s/h`` score term disappears unless the math kernel runs.

Frozen weights change what is saved: a linear layer whose weight does not require grad does not save
its input, nor does a norm's weight multiplication. LoRA adapters (peft) cast their input to the fp32
adapter dtype, apply dropout (saving a 1-byte mask) and save the fp32 result for ``lora_A``.

Fused kernels (``kernels: liger``; the ``fused`` argument, from the setting's context): Liger's RMSNorm saves its
input and an fp32 rstd per token instead of the fp32 copy and the normalized copy, its SwiGLU saves gate and up
outputs (no activation output), and its fused linear cross-entropy keeps one chunk of logits and the gradients it
computed in forward instead of the logits and the loss's copies (``autotune.costmodel.fused_kernels``).

Assumptions: residual stream and matmul dtypes come from ``precision.dtype_bytes``; activation
checkpointing checkpoints every decoder layer (transformers' ``gradient_checkpointing_enable``), so only
each layer's input stays alive and one layer's activations are recomputed at a time. All results are
bytes per token (multiply by b·s) unless the name says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.costmodel.adapter_activations import (
    adapter_input_bytes,
    adapter_saved_bytes_per_token,
    shared_adapter_input_bytes_per_token,
)
from autotune.costmodel.fused_kernels import (
    NO_FUSED_KERNELS,
    FusedKernels,
    liger_loss_peak_bytes,
    liger_norm_saved_bytes,
    liger_swiglu_saved_bytes,
)
from autotune.costmodel.params import LoraLayout
from autotune.costmodel.precision import MASK_BYTES, DtypeBytes
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting

FP32_BYTES = 4.0
ALTERNATING_MASK_MODEL_TYPES = ("gemma2",)
"""Architectures whose layers alternate sliding-window and global attention: transformers builds one mask per
layer type (``modeling_gemma2.py``: ``causal_mask_mapping`` with ``full_attention`` and ``sliding_attention``)."""
CHUNKED_LOSS_TOKENS = 1024
"""Rows of logits a chunked cross-entropy materializes at once (Liger-style fused linear CE chunk)."""


@dataclass(frozen=True)
class LayerActivationBytes:
    """Saved-for-backward bytes of one decoder layer per token, by part.

    Attributes:
        norms: the two (four for Gemma 2) RMSNorms.
        attention: q/k/v after RoPE, attention output, log-sum-exp, o_proj input.
        attention_scores: the s×s score and probability matrices (math kernel only), per token.
        mlp: gate output, activation output, up output, down input.
        adapters: LoRA inputs (fp32 copies) and dropout masks; for parameter adapters (an MoE's experts) the base
            inputs their merged weights keep (``autotune.costmodel.param_adapters``).
        attention_side: the part still saved when the attention core runs its backward (the layer's backward
            runs the MLP, the post-attention norms and o_proj first, freeing what they saved): the input norm,
            q/k/v, the attention core's saved tensors and the q/k/v adapters' inputs.
    """

    norms: float
    attention: float
    attention_scores: float
    mlp: float
    adapters: float
    attention_side: float = 0.0

    @property
    def total(self) -> float:
        """Sum of the parts, bytes per token per layer."""
        return self.norms + self.attention + self.attention_scores + self.mlp + self.adapters


def layer_activation_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    seq_len: float,
    flash_attention: bool,
    fused: FusedKernels = NO_FUSED_KERNELS,
    *,
    lora: LoraLayout,
    masked_attention: bool = False,
) -> LayerActivationBytes:
    """Bytes one decoder layer saves for backward, per token (derivation in the module docstring).

    Args:
        model: the architecture (shapes).
        setting: the training setting (whether it trains adapters, and which LoRA targets).
        dtypes: bytes per element implied by the setting.
        seq_len: tokens per sequence (only the math-attention score term depends on it).
        flash_attention: True when SDPA runs a flash / memory-efficient kernel.
        fused: the modules that run fused kernels (``SettingContext.fused``).
        lora: what peft builds for the adapters (``SettingContext.lora``, counted once).
        masked_attention: SDPA gets an explicit mask (``SettingContext.masked_attention``).
    """
    h, q_dim = model.hidden_size, model.q_dim
    m_b = dtypes.compute_bytes
    frozen = setting.uses_adapters
    num_norms = model.norms_per_layer

    norms = _layer_norm_bytes(model, dtypes, frozen, fused)
    clamp = legacy_clamp_bytes_per_score(setting, dtypes) if not flash_attention else 0.0
    attention, scores = _attention_bytes(model, m_b, seq_len, flash_attention, clamp, masked_attention)
    # o_proj saves its input only when its weight is trained; after SDPA that input is a view of the saved
    # output (the kernels write (b, s, n, d)), after eager attention a contiguous copy.
    if not frozen and not flash_attention:
        attention += m_b * q_dim
    mlp = _mlp_bytes(model, dtypes, frozen, fused)
    # Residual dropout on the attention and MLP outputs: CUDA's native_dropout saves a 1-byte mask each.
    if model.residual_dropout > 0:
        attention += MASK_BYTES * h
        mlp += MASK_BYTES * h
    adapters, qkv_adapters = (
        adapter_saved_bytes_per_token(model, setting, dtypes, flash_attention, lora) if frozen else (0.0, 0.0)
    )
    input_norm = norms / num_norms if num_norms else 0.0
    return LayerActivationBytes(
        norms=norms,
        attention=attention,
        attention_scores=scores,
        mlp=mlp,
        adapters=adapters,
        attention_side=input_norm + attention + scores + qkv_adapters,
    )


def _layer_norm_bytes(model: ModelSpec, dtypes: DtypeBytes, frozen: bool, fused: FusedKernels) -> float:
    """Bytes per token that a layer's norms save (and, when the projections train, the autocast casts of their output).

    Liger's RMSNorm saves X (residual dtype) and an fp32 rstd; its output is still saved by trained projections
    reading it (:func:`liger_norm_saved_bytes`); otherwise :func:`norm_saved_bytes` per norm.
    """
    h, num_norms = model.hidden_size, model.norms_per_layer
    casts = autocast_input_casts(model, dtypes)
    if fused.rms_norm:
        per_h, per_token = liger_norm_saved_bytes(dtypes)
        output = 0.0 if frozen or casts > 0 else dtypes.residual_bytes
        norms = num_norms * ((per_h + output) * h + per_token)
    else:
        norms = num_norms * norm_saved_bytes(model, dtypes, frozen, casts > 0) * h
    if not frozen:
        norms += casts * dtypes.compute_bytes * h
    return norms


def _mlp_bytes(model: ModelSpec, dtypes: DtypeBytes, frozen: bool, fused: FusedKernels) -> float:
    """Bytes per token that a layer's MLP saves (per routed expert for an MoE).

    The activation saves its input (several tensors for a composed one: :func:`activation_saved_bytes`); gated MLP:
    mul saves the activation's output and up's output; down saves its input when it trains. Liger's SiLU·mul saves
    the gate and up outputs and recomputes silu (:func:`liger_swiglu_saved_bytes`).
    """
    m_b, inter = dtypes.compute_bytes, model.intermediate_size
    down_input = 0.0 if frozen else m_b * inter
    if fused.swiglu:
        mlp = liger_swiglu_saved_bytes(dtypes) * inter + down_input
    else:
        mlp = activation_saved_bytes(model, dtypes) * inter + down_input
        if model.mlp_gated:
            mlp += 2 * m_b * inter
    if model.mlp_bias or model.num_experts > 1:
        mlp *= model.num_experts_per_token
    return mlp


COMPOSED_ACTIVATION_SAVED_TENSORS: dict[str, int] = {"gelu_new": 4, "gelu_fast": 7, "quick_gelu": 2, "gelu_python": 3}
"""Input-width tensors that transformers' ``ACT2FN[hidden_act]`` saves for backward when the activation is written as
several torch ops (``transformers/activations.py``: ``NewGELUActivation``, ``FastGELUActivation``,
``QuickGELUActivation``, ``GELUActivation(use_gelu_python=True)``), counted with
``torch.autograd.graph.saved_tensors_hooks`` in bf16 (``tests/unit/costmodel/test_activations.py`` recounts them).
Every other activation (silu, gelu, gelu_pytorch_tanh, relu) is one op that saves its input: 1."""


def activation_saved_bytes(model: ModelSpec, dtypes: DtypeBytes) -> float:
    """Bytes the MLP's activation function saves for backward per element of its input (width I per token).

    One compute-dtype tensor per saved tensor (:data:`COMPOSED_ACTIVATION_SAVED_TENSORS`), except ``gelu_new`` under
    autocast: ``pow`` is on CUDA autocast's fp32 list (PyTorch AMP docs, "CUDA Ops that can autocast to float32"),
    so the pow input is an fp32 copy and the tanh output and ``1 + tanh`` are fp32: 3 fp32 tensors + ``0.5·x`` in
    the compute dtype (derived; a CPU trace cannot show it: CPU autocast leaves ``pow`` in bf16).
    """
    m_b = dtypes.compute_bytes
    if model.hidden_act == "gelu_new" and dtypes.autocast:
        return 3 * FP32_BYTES + m_b
    return COMPOSED_ACTIVATION_SAVED_TENSORS.get(model.hidden_act, 1) * m_b


def norm_saved_bytes(model: ModelSpec, dtypes: DtypeBytes, frozen: bool, cast_for_projections: bool) -> float:
    """Bytes one norm of a decoder layer saves for backward per element of its (h-wide) input.

    RMSNorm (transformers' ``LlamaRMSNorm``): the input upcast to fp32 (saved for pow / mul); a trainable weight also
    keeps the normalized value cast back to the residual dtype (saved by the weight's mul). LayerNorm
    (``nn.LayerNorm`` → ``native_layer_norm``): its input (and a per-token mean / rstd), in fp32 under autocast —
    ``layer_norm`` is on CUDA autocast's fp32 list (PyTorch AMP docs, "CUDA Ops that can autocast to float32").
    Either way the output is saved as the next projections' input when they train, unless autocast casts it for them
    (``cast_for_projections``: the casts are counted instead). Traced with ``autotune trace`` (RMSNorm: Llama and
    Phi-3; LayerNorm without autocast: GPT-NeoX / Pythia). llm-foundry's ``LPLayerNorm``
    (``llmfoundry/models/layers/norm.py``: input, weight and bias cast to the autocast dtype, then
    ``F.layer_norm`` with autocast disabled) saves its input and output in the compute dtype under autocast, and is
    a plain LayerNorm without it (a reading of the source; llm-foundry cannot be traced here).
    """
    s_b = dtypes.residual_bytes
    output = 0.0 if frozen or cast_for_projections else s_b
    if model.norm_type == "low_precision_layernorm":
        element = dtypes.compute_bytes if dtypes.autocast else s_b
        return element + (0.0 if frozen else element)
    if model.norm_type == "layernorm":
        return (FP32_BYTES if dtypes.autocast else s_b) + output
    return FP32_BYTES + (0.0 if frozen else s_b) + output


def autocast_input_casts(model: ModelSpec, dtypes: DtypeBytes) -> int:
    """16-bit copies of a decoder layer's norm outputs that autocast makes for the projections reading them.

    One per linear call that reads a norm output (q, k, v and gate, up; one for a fused qkv or gate_up projection, one
    for a non-gated MLP's up projection), each saved by its linear. None without autocast, and none when the residual
    stream is already in the compute dtype (FSDP mixed precision, pure 16-bit): autocast leaves a tensor of the target
    dtype as it is (``aten/src/ATen/autocast_mode.h``, ``cached_cast``: only eligible tensors of another dtype are
    cast). Activations are not cached, so q, k and v each get their own copy (traced with ``autotune trace``: Llama and
    Phi-3, bf16-mixed).
    """
    # a LayerNorm under autocast runs in fp32 and returns fp32 whatever the residual dtype (norm_saved_bytes); a
    # low-precision one returns the compute dtype, which autocast leaves as it is
    if model.norm_type == "low_precision_layernorm":
        return 0
    if not dtypes.autocast or (dtypes.residual_bytes == dtypes.compute_bytes and model.norm_type != "layernorm"):
        return 0
    attention_inputs = 1 if model.fused_qkv else 3
    mlp_inputs = 2 if model.mlp_gated and not model.fused_gate_up else 1
    return attention_inputs + mlp_inputs


def attention_mask_materialised(model: ModelSpec, seq_len: float, masked_attention: bool = False) -> bool:
    """True when transformers builds an explicit mask for SDPA: a reached sliding window, or ``masked_attention``.

    ``masked_attention``: packed rows of several examples or padded rows (``context.masked_attention_share``).

    See ``masking_utils._ignore_causal_mask_sdpa``: ``kv_length >= local_attention_size`` keeps the mask.
    """
    return masked_attention or (model.sliding_window is not None and seq_len >= model.sliding_window)


def mask_bytes(
    model: ModelSpec,
    micro_batch_size: int,
    seq_len: float,
    flash_attention: bool,
    residual_bytes: float = 2.0,
    masked_attention: bool = False,
) -> float:
    """The (b, 1, s, s) attention masks when built (eager always; SDPA with a mask: ``attention_mask_materialised``).

    They are kept for backward by the attention ops or as inputs of the checkpointed layers: SDPA gets a boolean mask
    (``masking_utils.sdpa_mask``), eager a float one in the hidden states' dtype (``eager_mask``: 0 / the dtype's
    minimum); one per layer type (``ALTERNATING_MASK_MODEL_TYPES``).
    """
    if flash_attention and not attention_mask_materialised(model, seq_len, masked_attention):
        return 0.0
    kinds = 2 if model.model_type in ALTERNATING_MASK_MODEL_TYPES and model.num_hidden_layers > 1 else 1
    element = MASK_BYTES if flash_attention else residual_bytes
    return kinds * element * micro_batch_size * seq_len * seq_len


def legacy_clamp_bytes_per_score(setting: TrainingSetting, dtypes: DtypeBytes) -> float:
    """Bytes per score that ``eager-legacy`` attention saves beyond ``eager``: 0 for every other implementation.

    transformers <= 4.29 ``LlamaAttention.forward`` (4.28.1 ``models/llama/modeling_llama.py`` lines 214–232)::

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask            # (b, 1, s, s) mask, the embeddings' dtype
        attn_weights = torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min))
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)

    Division by a Python scalar and the mask addition save nothing; ``torch.max(a, b)`` is ``aten.maximum``,
    whose backward (``derivatives.yaml``: ``where(self == other, grad / 2, grad).masked_fill_(self < other, 0)``)
    saves ``self``: one copy of the masked scores in the dtype of ``scores + mask`` (the compute dtype promoted
    with the mask's, which ``_prepare_decoder_attention_mask`` builds in ``inputs_embeds.dtype``, the residual
    dtype here). The softmax output (fp32) and its cast (compute dtype) are saved as in today's eager path, so
    per score legacy keeps 2 + 4 + 2 = 8 bytes in bf16 against eager's 6, and its backward peak (the softmax
    stage: saved set less the probabilities, fp32 gradient in and out) is 8 + 2·4 − 2 = 14 against 12.
    Checked on the copied 4.28 code with torch's saved-tensor hooks and the live-bytes tracker
    (``tests/unit/costmodel/test_activations_legacy_attention.py``). Under autocast with an fp32 mask the clamp's own
    backward stage (saved input, gradient, ``self == other`` mask, ``grad / 2`` and the ``where`` output: 4·4 + 1 = 17
    bytes) exceeds the softmax stage (16) by one byte per score; neglected.
    """
    if setting.attention_impl != "eager-legacy":
        return 0.0
    return max(dtypes.compute_bytes, dtypes.residual_bytes)


def _attention_bytes(
    model: ModelSpec,
    m_b: float,
    seq_len: float,
    flash_attention: bool,
    clamp_bytes: float = 0.0,
    masked_attention: bool = False,
) -> tuple[float, float]:
    """Saved bytes per token of the attention core: (q/k/v/output part, s×s score part).

    SDPA with a flash / memory-efficient kernel (transformers calls it mask-free with ``enable_gqa`` for a
    filled batch) saves q, k (after RoPE), v, the output and an fp32 log-sum-exp per head. Eager attention
    (``eager_attention_forward``) repeats k and v to every query head (``repeat_kv``, a copy when heads are
    grouped), saves q and the repeated k and v for its two matmuls, the fp32 softmax output and its 16-bit
    copy (s per head each), and with Gemma 2's attention soft-capping also the tanh output. SDPA with a
    materialised mask (sliding window reached, or ``masked_attention``) gets k and v repeated like eager, and saves
    for backward the additive mask torch converts the boolean one into on every call (``attention.cpp``
    ``convert_boolean_attn_mask``, in the query's dtype; ``_scaled_dot_product_efficient_attention`` keeps its
    ``attn_bias`` for the backward): m·s bytes per token per layer. With fused qkv
    (Phi-3) v is a slice of the fused projection output, so saving v keeps the whole output alive.
    ``clamp_bytes``: per score, the masked scores that ``eager-legacy`` saves for its ``torch.max`` clamp
    (:func:`legacy_clamp_bytes_per_score`).
    """
    q_dim, kv_dim, heads = model.q_dim, model.kv_dim, model.num_attention_heads
    fused_extra = m_b * (q_dim + kv_dim) if model.fused_qkv else 0.0
    grouped = model.num_key_value_heads < heads
    if flash_attention:
        # with a materialised mask transformers cannot use enable_gqa: k and v are repeated per query head, and the
        # mask's additive copy is kept for backward
        materialised = attention_mask_materialised(model, seq_len, masked_attention)
        kv_saved = q_dim if grouped and materialised else kv_dim
        bias = m_b * seq_len if materialised else 0.0
        return m_b * (2 * q_dim + 2 * kv_saved) + FP32_BYTES * heads + fused_extra + bias, 0.0
    attention = m_b * (q_dim + 2 * (q_dim if grouped else kv_dim)) + (0.0 if grouped else fused_extra)
    score_copies = FP32_BYTES + m_b + (m_b if model.attn_logit_softcapping is not None else 0.0) + clamp_bytes
    return attention, score_copies * heads * seq_len


def backward_workspace_bytes_per_token(
    model: ModelSpec,
    dtypes: DtypeBytes,
    seq_len: float,
    flash_attention: bool,
    layer: LayerActivationBytes,
    fused: FusedKernels = NO_FUSED_KERNELS,
) -> float:
    """Transient gradient buffers while one layer runs backward, beyond its saved set, per token.

    A layer's backward runs in two stages (traced: ``benchmarks/trace_agreement.py``):
      * MLP first, with the whole saved set alive: d(gate) and d(up) of width I plus d(input) of width h, in
        the compute dtype (derived from the MLP backward);
      * then the attention core, when only ``layer.attention_side`` is still saved. With the math (eager)
        kernel the softmax backward holds the saved score tensors less the compute-dtype probabilities (freed
        by the probabilities·v matmul's backward), the fp32 upcast of their gradient and the fp32 softmax
        gradient: (2·4 − d) bytes per score on top of the saved scores (``eager_attention_forward``:
        ``softmax(..., dtype=float32).to(query.dtype)``).
    With Liger's SwiGLU (``fused.swiglu``) the kernel writes d(gate) and d(up) over the saved gate and up outputs
    (``_swiglu_backward_kernel``): the MLP stage holds the product's gradient (width I) and d(input) instead.
    Returns the larger stage minus ``layer.total`` (the caller adds the saved set).
    """
    mlp_widths = 1 if fused.swiglu else 2
    mlp_stage = dtypes.compute_bytes * (mlp_widths * model.intermediate_size + model.hidden_size)
    if flash_attention:
        return mlp_stage
    score_workspace = (2 * FP32_BYTES - dtypes.compute_bytes) * model.num_attention_heads * seq_len
    return max(mlp_stage, layer.attention_side + score_workspace - layer.total)


def stored_activation_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    layer: LayerActivationBytes,
    dtypes: DtypeBytes,
    fused: FusedKernels = NO_FUSED_KERNELS,
) -> float:
    """Activations kept alive between forward and backward for all layers, per token.

    With activation checkpointing only each layer's input (one residual-stream vector) is kept;
    without it every layer's saved tensors are. Adds the embedding output and the final norm (an RMSNorm's fp32
    upcast, normalized value and output; a LayerNorm's input and output: ``norm_saved_bytes``). With Liger the
    final norm saves its input and rstd, and the fused linear cross-entropy saves none of its input.
    """
    per_layer = dtypes.residual_bytes * model.hidden_size if setting.grad_ckpt else layer.total
    if fused.rms_norm:
        per_h, per_token = liger_norm_saved_bytes(dtypes)
        output = 0.0 if fused.linear_cross_entropy else dtypes.residual_bytes
        outside = (per_h + output) * model.hidden_size + per_token
    else:
        outside = norm_saved_bytes(model, dtypes, frozen=False, cast_for_projections=False) * model.hidden_size
    return model.num_hidden_layers * per_layer + outside


def recompute_transient_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    layer: LayerActivationBytes,
    lora: LoraLayout,
) -> float:
    """Tensors alive per token, beyond the layer's saved set, when a layer's recompute reaches its last saved tensor.

    That is activation checkpointing's recomputation: non-reentrant checkpoints stop recomputing there.

    Adapter methods: the MLP product (down_proj's input, compute dtype) and — when down_proj carries an adapter
    — its fp32 copy for the adapter, plus residual-stream-wide tensors: with LoRA the attention residual sum,
    the post-attention norm output, o_proj's base output and adapter result (fp32 and its cast back), and
    down_proj's base output (seven compute-dtype widths incl. one fp32); QLoRA's base output is cast in place of
    one of them (six). Adapters in the compute dtype leave o_proj's adapter result in it (two widths fewer); when
    ``lora_A`` saves x itself (:func:`shared_adapter_input_bytes_per_token`) the MLP product and the post-attention
    norm output are part of the saved set already. Traced with ``autotune trace`` (``benchmarks/trace_agreement.py``);
    full fine-tuning peaks later in backward (gradients), so it gets none. Earlier, the MLP input projection's adapter
    output can hold more (``mlp_input_stage_bytes_per_token``, relative to ``layer.total``): the larger counts.
    """
    if not (setting.grad_ckpt and setting.uses_adapters):
        return 0.0
    m_b = dtypes.compute_bytes
    targets = {module.name for module in lora.module_targets}
    down_adapted = "down_proj" in targets
    cast_copy = not dtypes.autocast and dtypes.adapter_bytes != m_b
    adapter_copy = dtypes.adapter_bytes if down_adapted and cast_copy else 0.0
    widths_h = 6 if setting.method == "qlora" else 7
    if dtypes.adapter_bytes == m_b and not dtypes.autocast:
        widths_h -= 2  # o_proj's adapter result is one compute-dtype width, not fp32 (two) and its cast back
    # lora_A saving x itself: the MLP product and the post-attention norm output are in the saved set already
    shared = shared_adapter_input_bytes_per_token(model, setting, dtypes, flash_attention=True, lora=lora)
    product = 0.0 if "mlp product" in shared else m_b
    widths_h -= 1 if "mlp input" in shared else 0
    end = (product + adapter_copy) * model.intermediate_size + widths_h * m_b * model.hidden_size
    return max(end, mlp_input_stage_bytes_per_token(model, setting, dtypes, layer, lora) - layer.total)


def mlp_input_stage_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    layer: LayerActivationBytes,
    lora: LoraLayout,
) -> float:
    """Live bytes per token (the layer's part) when recomputation forms the adapter output of the MLP input projection.

    That projection is ``gate_proj``, or Phi-3's fused ``gate_up_proj`` of width 2I; 0 without an adapter there.

    peft's ``lora.Linear.forward`` adds ``lora_B(lora_A(dropout(x))) · scaling`` to the base output: with fp32
    adapters and no autocast, x cast to fp32, the base output (compute dtype, width ``out``), lora_B's output
    and its scaled copy (fp32, width ``out``) are alive at once, beside the saved set so far (all but the MLP's
    and the later MLP adapters' inputs), the attention residual sum, the post-attention norm output, the
    gradient arriving from the layer above (compute dtype, width h) and the fp32 RMSNorm input of the
    recomputation (traced: ``benchmarks/trace_agreement.py``, Phi-3 QLoRA).
    """
    modules = {module.name: module for module in lora.module_targets}
    first = modules.get("gate_up_proj") or modules.get("gate_proj")
    if first is None:
        return 0.0
    m_b = dtypes.compute_bytes
    adapter_bytes = m_b if dtypes.autocast else dtypes.adapter_bytes
    in_bytes = adapter_input_bytes(model, setting, dtypes)
    per_layer = model.num_hidden_layers
    later = sum(
        in_bytes * module.in_features * module.count / per_layer
        for name, module in modules.items()
        if name in ("up_proj", "down_proj") and module is not first
    )
    out = first.out_features
    # lora_A saving x itself: the post-attention norm output is counted below, the MLP product does not exist yet
    shared = shared_adapter_input_bytes_per_token(model, setting, dtypes, flash_attention=True, lora=lora)
    later += shared.get("mlp input", 0.0) + shared.get("mlp product", 0.0)
    saved_before = layer.total - layer.mlp - later
    live_h = 3 * m_b * model.hidden_size + (FP32_BYTES + adapter_bytes) * model.hidden_size
    return saved_before + live_h + (m_b + 2 * adapter_bytes) * out


def working_activation_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    layer: LayerActivationBytes,
    dtypes: DtypeBytes,
    seq_len: float,
    flash_attention: bool,
    fused: FusedKernels = NO_FUSED_KERNELS,
    *,
    lora: LoraLayout,
) -> float:
    """Activations alive only while one layer runs backward, per token.

    Checkpointing recomputes one layer (its full saved set) before its backward; at the end of that
    recomputation its transients (``recompute_transient_bytes_per_token``) are alive, afterwards the backward
    workspace is: the larger of the two counts. Without checkpointing only the workspace is added.
    """
    workspace = backward_workspace_bytes_per_token(model, dtypes, seq_len, flash_attention, layer, fused)
    if not setting.grad_ckpt:
        return workspace
    return layer.total + max(workspace, recompute_transient_bytes_per_token(model, setting, dtypes, layer, lora))


def logits_dtype_bytes(setting: TrainingSetting, dtypes: DtypeBytes) -> float:
    """Bytes per logit as the lm_head produces them: the compute dtype, or fp32 for a QLoRA lm_head without autocast.

    QLoRA keeps lm_head in fp32 (peft's ``prepare_model_for_kbit_training`` upcasts non-quantized modules).
    """
    if setting.method == "qlora" and setting.unquantized_dtype == "fp32" and not dtypes.autocast:
        return FP32_BYTES
    return dtypes.compute_bytes


def logits_peak_bytes(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    tokens: float,
    fused: FusedKernels = NO_FUSED_KERNELS,
) -> float:
    """Peak bytes of the logits and the cross-entropy around the start of backward, for ``tokens`` tokens.

    With E = tokens × V logits and d = logits dtype bytes:
      * ``fp32-upcast`` (transformers' ``ForCausalLMLoss``: ``logits.float()`` then cross-entropy):
        forward holds d·E (logits) + 4E (fp32 copy) + 4E (log-softmax saved for backward); backward holds
        4E (saved) + 4E (grad of log-softmax) + 4E (grad of logits); peak = max of the two.
      * ``native`` (cross-entropy in the logits dtype on a shifted contiguous copy, seed 001's trainer):
        forward holds the logits, the shifted copy and the log-softmax output (saved); backward the saved
        output, the gradient of the log-softmax and of its input: 3·d·E at either peak (traced:
        ``benchmarks/trace_agreement.py``).
      * ``chunked``: the same fp32 arithmetic on ``CHUNKED_LOSS_TOKENS`` rows at a time; with a trained
        head and more than one chunk, two head-weight gradients (running sum + the chunk's) + 8 bytes per
        chunk logit.
    Gemma 2's final soft-capping (``tanh(logits / cap) · cap``) saves the tanh output: +d·E (+4 bytes per
    logit of a chunk for ``chunked``, which soft-caps the fp32 chunk); its other temporaries are freed
    before the peak (traced).
    Liger's fused linear cross-entropy (``fused.linear_cross_entropy``) replaces all of this with one chunk of
    logits and the gradients it keeps (``fused_kernels.liger_loss_peak_bytes``; its soft-capping is in-kernel).
    """
    if fused.linear_cross_entropy:
        return liger_loss_peak_bytes(model, setting, dtypes, tokens, logits_dtype_bytes(setting, dtypes))
    rows = min(tokens, CHUNKED_LOSS_TOKENS) if setting.loss_impl == "chunked" else tokens
    peak = loss_bytes_per_logit(model, setting, dtypes) * rows * model.vocab_size
    if setting.loss_impl == "chunked" and not setting.uses_adapters and tokens > CHUNKED_LOSS_TOKENS:
        # A trained head accumulates its weight gradient over the chunks: while a later chunk's gradient is
        # formed, the running sum and the new one (V·h each) live beside the chunk's fp32 logit gradient and
        # saved log-softmax (traced).
        head_grad = model.vocab_size * model.hidden_size * dtypes.grad_bytes
        peak = max(peak, 2 * head_grad + 2 * FP32_BYTES * rows * model.vocab_size)
    return peak


def loss_bytes_per_logit(model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes) -> float:
    """Bytes per logit that the loss holds at its peak (see ``logits_peak_bytes``).

    ``chunked`` does the same fp32 arithmetic as ``fp32-upcast``, on fewer rows at a time.
    """
    logits_bytes = logits_dtype_bytes(setting, dtypes)
    if setting.loss_impl == "native":
        per_logit = 3 * logits_bytes
    else:
        upcast_copy = FP32_BYTES if logits_bytes < FP32_BYTES else 0.0
        per_logit = max(logits_bytes + upcast_copy + FP32_BYTES, 3 * FP32_BYTES)
    if model.final_logit_softcapping is not None:
        # tanh saves its output: on the logits (their dtype) before the loss, on fp32 chunks in the chunked loss
        per_logit += FP32_BYTES if setting.loss_impl == "chunked" else logits_bytes
    return per_logit
