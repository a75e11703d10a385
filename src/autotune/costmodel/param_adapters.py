"""Memory of LoRA adapters that peft folds into a parameter (``lora.ParamWrapper``): an MoE's experts and router.

peft 0.21 adapts a parameter-stored weight W (Mixtral in transformers 5: ``experts.gate_up_proj`` [E, 2I, h],
``experts.down_proj`` [E, h, I], ``gate.weight`` [E, h]; :mod:`autotune.schemas.lora_targets`) not by adding
B·A·x to the output but by replacing W, for the duration of the module's forward, with the merged weight
W + scaling·B·A (``ParamWrapper._activate_lora`` with ``torch.nn.utils.parametrize`` and ``_LoraFactorsProxy``:
one ``torch.baddbmm`` per expert stack, in W's dtype; ``peft/tuners/lora/layer.py``). The merged weight requires
grad, so the base matmuls that use it keep it, and their inputs, for backward, as a trained weight's would:

  * per layer and wrapped parameter: the merged weight, E·out·in elements in the weight dtype; for an expert
    stack also the copies of the factors cast to the weight dtype that ``baddbmm`` saves (``get_delta_factors``:
    ``lhs.to(param.dtype)``, ``rhs.to(param.dtype)``; rank·E·(in + out) elements). The 2-D router takes the
    ``_LoraParameterProxy`` path (B·A in fp32, cast and added), which saves only the fp32 factors themselves;
  * per token (k = experts per token): the k routed copies of the token's hidden state (k·h, the input of the
    grouped ``gate_up_proj`` matmul, ``integrations/moe.py`` ``grouped_mm_experts_forward``) when ``gate_up_proj``
    is wrapped; down_proj's input (k·I) when ``down_proj`` is; the router's input (h, the post-attention norm
    output) when the router is.

In backward, the gradient of a merged weight (E·out·in, weight dtype) exists before ``baddbmm``'s backward
reduces it to the factors' gradients: the first one met (``down_proj``, else ``gate_up_proj``) lives beside
the layer's whole saved set (:func:`merged_gradient_bytes`; later ones find the earlier merged weights freed).

Time (:func:`wrapped_gemm_s`): per layer and forward pass, one ``baddbmm`` per wrapped stack (E GEMMs of
out × in × rank, writing the merged weight); in backward the merged weight's gradient is a weight-gradient
GEMM of the experts over their routed tokens (as in full fine-tuning), reduced to the factors' gradients by
two more E × (out × in × rank) GEMMs. The router's merged [E, h] weight is negligible.

Traced (``autotune trace`` on tiny Mixtrals, h ∈ {256, 512}, I ∈ {512, 1024}, E = 4, k = 2): with fp32 adapters these
terms are exactly the saved-activation difference between LoRA on all-linear (or each parameter target) and on the
attention projections only; with compute-dtype adapters (no factor copies: a same-dtype ``.to`` copies nothing)
0.4 % under it (h 256, I 512: 4,065,280 vs 4,082,176 bytes per layer); ``tests/unit/costmodel/test_param_adapters.py``
checks both.
"""

from __future__ import annotations

from autotune.costmodel.gemm import GemmDevice, gemm_time_s, linear_pass_time_s
from autotune.costmodel.params import LoraLayout
from autotune.costmodel.precision import DtypeBytes
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting


def wrapped_parameters(model: ModelSpec, setting: TrainingSetting, lora: LoraLayout) -> set[str]:
    """Names of the parameter adapters (``gate_up_proj``, ``down_proj``, ``router``) of an adapter setting.

    ``lora``: the setting's adapters when already counted (``SettingContext.lora``); every function here takes it.
    """
    if not setting.uses_adapters:
        return set()
    return {a.name for a in lora.adapters if a.on_parameter}


def wrapped_input_bytes_per_token(
    model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes, lora: LoraLayout
) -> float:
    """Bytes per token per layer saved because a wrapped weight requires grad, in the compute dtype.

    See the module docstring's per-token list.
    """
    wrapped = wrapped_parameters(model, setting, lora)
    if not wrapped:
        return 0.0
    h, inter, k = model.hidden_size, model.intermediate_size, model.num_experts_per_token
    widths = 0.0
    if "gate_up_proj" in wrapped:
        widths += k * h
    if "down_proj" in wrapped:
        widths += k * inter
    if "router" in wrapped:
        widths += h
    return dtypes.compute_bytes * widths


def merged_weight_bytes_per_layer(
    model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes, lora: LoraLayout
) -> float:
    """Bytes of one layer's merged weights W + scaling·B·A, in the weight dtype, kept for backward.

    E·out·in each and, for expert stacks, the factor copies ``baddbmm`` saves (rank·E·(in + out)).
    """
    if not setting.uses_adapters:
        return 0.0
    elements = 0
    for a in lora.adapters:
        if a.on_parameter:
            elements += a.experts * a.in_features * a.out_features
            if a.experts > 1 and setting.adapter_dtype == "fp32" and dtypes.weight_bytes < 4.0:
                # get_delta_factors' ``.to(param.dtype)`` copies only factors of another dtype (fp32 adapters on a
                # 16-bit weight); compute-dtype factors are passed as they are (a no-op ``.to``).
                elements += a.rank * a.experts * (a.in_features + a.out_features)
    return elements * dtypes.weight_bytes


def merged_gradient_bytes(model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes, lora: LoraLayout) -> float:
    """Bytes of the merged-weight gradient alive beside one layer's saved set in its backward; 0 without.

    It is the first wrapped expert stack backward meets (``down_proj``, else ``gate_up_proj``), E·out·in in the weight
    dtype.
    """
    if not setting.uses_adapters:
        return 0.0
    stacks = {a.name: a for a in lora.adapters if a.experts > 1}
    first = stacks.get("down_proj") or stacks.get("gate_up_proj")
    if first is None or not first.on_parameter:
        return 0.0
    return first.experts * first.in_features * first.out_features * dtypes.weight_bytes


def wrapped_gemm_s(
    model: ModelSpec,
    setting: TrainingSetting,
    tokens: float,
    element_bytes: float,
    device: GemmDevice,
    lora: LoraLayout,
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's parameter-adapter GEMMs for ``tokens`` tokens (module docstring).

    The merge ``baddbmm`` forward; the experts' weight-gradient GEMMs (each expert sees tokens·k/E rows) and the two
    factor-gradient GEMMs backward. (0, 0) without parameter adapters.
    """
    if not setting.uses_adapters:
        return 0.0, 0.0
    forward = backward = 0.0
    share = model.num_experts_per_token / model.num_experts
    for a in lora.adapters:
        if not a.on_parameter or a.experts == 1:
            continue
        merge = a.experts * gemm_time_s(a.out_features, a.in_features, a.rank, element_bytes, device)
        forward += merge
        rows = tokens * share
        weight_grad = linear_pass_time_s(rows, a.in_features, a.out_features, element_bytes, device, "weight-grad")
        backward += a.experts * weight_grad + 2 * merge
    return forward, backward
