"""What peft's LoRA adapters save for backward, per token and layer (the adapters' part of the activations).

A LoRA target computes ``base(x) + B(A(dropout(x))) · alpha / r`` (peft ``lora.layer.Linear.forward``). For its
weight gradients ``lora_A`` saves its input and ``lora_B`` saves ``lora_A``'s r-wide output; the frozen base linear
saves nothing. Which copy of the input ``lora_A`` saves depends on the adapter dtype, autocast and dropout
(:func:`adapter_input_bytes`); when it is x itself, x is shared by every linear that reads it
(:func:`shared_adapter_input_bytes_per_token`). Checked against ``torch.autograd.graph.saved_tensors_hooks`` and
the traced step (``tests/unit/costmodel/test_activations_adapter_inputs.py``).
"""

from __future__ import annotations

from autotune.costmodel.param_adapters import wrapped_input_bytes_per_token
from autotune.costmodel.params import LoraLayout
from autotune.costmodel.precision import MASK_BYTES, DtypeBytes
from autotune.schemas.lora_targets import effective_lora_dropout as lora_effective_dropout
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting

QKV_MODULES = ("q_proj", "k_proj", "v_proj", "qkv_proj")
"""Projections that run before the attention core (their adapters' inputs are freed after it, in backward)."""


def effective_lora_dropout(model: ModelSpec, setting: TrainingSetting) -> float:
    """The LoRA dropout the trainer runs with for ``setting`` on ``model``.

    0 when peft adapts a parameter-stored target (an MoE's experts or router;
    :func:`autotune.schemas.lora_targets.effective_lora_dropout`), else the setting's.
    """
    return lora_effective_dropout(model.model_type, setting.lora_targets, setting.lora_dropout)


def adapter_input_bytes(model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes) -> float:
    """Bytes per input feature per token that one peft LoRA target saves for ``lora_A``'s weight gradient.

    Each adapter's own copy: under autocast the 16-bit copy autocast makes; with adapters in another dtype than x (fp32
    adapters) the cast copy (or the dropout output) in the adapter dtype; with adapters in x's dtype the dropout output
    when dropout runs. Plus dropout's 1-byte mask. 0 when ``lora_A`` reads x itself: x is then saved once for all the
    linears that read it (:func:`shared_adapter_input_bytes_per_token`; the frozen base layer does not save it).
    """
    dropout = effective_lora_dropout(model, setting) > 0
    mask = MASK_BYTES if dropout else 0.0
    if dtypes.autocast:
        return dtypes.compute_bytes + mask
    if dtypes.adapter_bytes != dtypes.compute_bytes or dropout:
        return dtypes.adapter_bytes + mask
    return 0.0


ADAPTER_INPUT_TENSORS: dict[str, str] = {
    "q_proj": "attention input",
    "k_proj": "attention input",
    "v_proj": "attention input",
    "qkv_proj": "attention input",
    "o_proj": "attention output",
    "gate_proj": "mlp input",
    "up_proj": "mlp input",
    "gate_up_proj": "mlp input",
    "router": "mlp input",
    "down_proj": "mlp product",
}
"""The tensor each adapted linear of a decoder layer reads (``modeling_llama.py`` and kin): the input norm's output
(q, k, v), the attention output (o), the post-attention norm's output (gate, up, the router), the MLP product (down).
Linears that read the same tensor share it when their adapters save it as it is."""


def shared_adapter_input_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    flash_attention: bool,
    lora: LoraLayout,
) -> dict[str, float]:
    """Bytes per token and layer of the adapted linears' inputs that ``lora_A`` saves as they are, by tensor.

    When ``lora_A`` reads x itself (adapters in x's dtype, no dropout, no autocast: :func:`adapter_input_bytes` is 0),
    it saves x for its weight gradient, and nothing else does: the frozen base linear saves no input (autograd saves
    ``mm``'s ``self`` only for the weight's gradient, ``tools/autograd/derivatives.yaml``), nor does the frozen norm
    weight's ``mul`` save the normalized value. So each distinct input tensor (:data:`ADAPTER_INPUT_TENSORS`) of an
    adapted linear is kept once, in the compute dtype: the two norm outputs (width h), the MLP product (width I; one per
    routed expert) and, after eager attention, o_proj's contiguous input (width n_q·d); after SDPA that input is a view
    of the attention output the kernel already saved. Counted with ``torch.autograd.graph.saved_tensors_hooks`` on a
    Llama layer and traced (``tests/unit/costmodel/test_activations_adapter_inputs.py``, ``benchmarks/trace_agreement.py
    --lora-pairs``). Empty when each adapter saves its own copy (counted per linear by :func:`adapter_input_bytes`).
    """
    if adapter_input_bytes(model, setting, dtypes) > 0:
        return {}
    shared: dict[str, float] = {}
    for module in lora.module_targets:
        tensor = ADAPTER_INPUT_TENSORS.get(module.name)
        if tensor is None or (tensor == "attention output" and flash_attention):
            continue
        routed = model.num_experts_per_token if module.count > model.num_hidden_layers else 1
        shared[tensor] = dtypes.compute_bytes * module.in_features * routed
    return shared


def adapter_rank_output_bytes(dtypes: DtypeBytes) -> float:
    """Bytes per rank element of ``lora_A``'s output, which ``lora_B`` saves for its weight gradient (per token).

    In the adapter dtype, or the compute dtype under autocast (``lora_A`` is a linear autocast runs in 16 bits);
    r elements per adapted linear and token (Hu et al. 2021, section 4.1: A ∈ R^{r×in}).
    """
    return dtypes.compute_bytes if dtypes.autocast else dtypes.adapter_bytes


def adapter_saved_bytes_per_token(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    flash_attention: bool,
    lora: LoraLayout,
) -> tuple[float, float]:
    """Bytes per token and layer the adapters save: ``(all of them, the part on the q/k/v side)``.

    Per adapted linear its input copy (:func:`adapter_input_bytes` × in features) and ``lora_A``'s output
    (:func:`adapter_rank_output_bytes` × r), times its count per layer; the shared inputs
    (:func:`shared_adapter_input_bytes_per_token`); and the inputs of adapted parameter-stored weights
    (:func:`autotune.costmodel.param_adapters.wrapped_input_bytes_per_token`).
    """
    adapter_in_bytes = adapter_input_bytes(model, setting, dtypes)
    rank_bytes = adapter_rank_output_bytes(dtypes) * setting.lora_rank
    adapters = qkv_adapters = 0.0
    for module in lora.module_targets:
        module_bytes = (adapter_in_bytes * module.in_features + rank_bytes) * module.count / model.num_hidden_layers
        adapters += module_bytes
        if module.name in QKV_MODULES:
            qkv_adapters += module_bytes
    shared = shared_adapter_input_bytes_per_token(model, setting, dtypes, flash_attention, lora)
    adapters += sum(shared.values()) + wrapped_input_bytes_per_token(model, setting, dtypes, lora)
    return adapters, qkv_adapters + shared.get("attention input", 0.0)
