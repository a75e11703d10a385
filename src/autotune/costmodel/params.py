"""Parameter counts derived from a :class:`~autotune.schemas.ModelSpec` (no torch).

Legend (as in ``ModelSpec``): h = hidden_size, I = intermediate_size, L = num_hidden_layers,
n_q = num_attention_heads, n_kv = num_key_value_heads, d = head_dim, V = vocab_size,
E = num_experts, k = num_experts_per_token, r = LoRA rank.

Counting rule: per decoder layer the q/k/v/o projections, the gated MLP and the norms, plus the embeddings, the
final norm and an untied output head, from each profile's config.json shapes (``COUNTED_PARAMS`` of
tests/unit/profiles/test_catalog.py holds the totals for the catalog, e.g. llama3-8b 8,030,261,248), extended with the
module layouts of the Hugging Face modeling files ``modeling_llama.py`` (q/k/v/o and gate/up/down
``nn.Linear``, ``attention_bias`` on all four attention projections, ``mlp_bias``), ``modeling_qwen2.py`` (bias
on q/k/v only), ``modeling_gemma2.py`` (four RMSNorms per block), ``modeling_phi3.py`` (fused ``qkv_proj`` of width
n_q·d + 2·n_kv·d and fused ``gate_up_proj`` of width 2·I) and ``modeling_mixtral.py`` (E experts
plus an h×E router without bias)::

    attention_weights  = h·(n_q·d) + 2·h·(n_kv·d) + (n_q·d)·h
    attention_biases   = (n_q·d + 2·n_kv·d) [attention_bias] + h [o_proj_bias]
    mlp_weights        = E·(3·h·I if gated else 2·h·I) + (h·E if E > 1)
    mlp_biases         = E·(2·I + h if gated else I + h) [mlp_bias]
    norms              = norms_per_layer·h·(2 if norm_has_bias else 1)
    total              = V·h + L·(attention + mlp + norms) + final_norm + (V·h if untied)

Assumptions: the final norm is of the same kind as the block norms (h weights, plus h biases for
LayerNorm); the output head has no bias; there are no learned position embeddings. Architectures
with other extras (e.g. Phi-2's lm_head bias) record them in ``ModelSpec.approximations``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from autotune.errors import InvalidRequestError
from autotune.schemas.lora_targets import (
    FUSED_ALIASES,
    fused_target_error,
    module_name,
    parameter_targets,
    plan_module_name,
)
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import ALL_LINEAR, TrainingSetting


@dataclass(frozen=True)
class LinearModule:
    """One kind of ``nn.Linear``-shaped weight inside the decoder blocks.

    ``count`` is the number of instances in the whole model: L for attention projections and dense
    MLPs, L·E for expert projections of an MoE, L for the router. Weight shape is
    (out_features, in_features); ``bias`` says whether each instance also has out_features biases.
    """

    name: str
    in_features: int
    out_features: int
    count: int
    bias: bool
    group: Literal["attention", "mlp"]

    def __hash__(self) -> int:
        """The fields' hash, computed once: module tuples key the time terms' caches (``adapter_time``)."""
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.name, self.in_features, self.out_features, self.count, self.bias, self.group))

    @property
    def routed(self) -> bool:
        """An MLP projection other than the router: in an MoE, an expert's, seeing its share of the tokens.

        The share is ``num_experts_per_token / num_experts`` (1 for a dense MLP).
        """
        return self.group == "mlp" and self.name != "router"

    @property
    def weight_params(self) -> int:
        """Weights of all instances: count · in_features · out_features."""
        return self.count * self.in_features * self.out_features

    @property
    def bias_params(self) -> int:
        """Biases of all instances: count · out_features (0 without bias)."""
        return self.count * self.out_features if self.bias else 0


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of one model, as sums of named parts (see the module docstring for formulas).

    Identities: ``total_params = embedding_params + lm_head_params + L·(attention_params_per_layer +
    mlp_params_per_layer + norm_params_per_layer) + final_norm_params`` and ``total_params =
    decoder_linear_params + non_linear_params``.
    """

    embedding_params: int
    """Token embedding rows, V·h."""
    lm_head_params: int
    """Separate output head V·h; 0 when tie_word_embeddings (the embedding matrix is reused)."""
    attention_params_per_layer: int
    """q, k, v, o weights plus their biases, in one block."""
    mlp_params_per_layer: int
    """MLP weights and biases in one block; all E experts plus the h·E router for MoE."""
    norm_params_per_layer: int
    """RMSNorm/LayerNorm weights (and LayerNorm biases) in one block."""
    final_norm_params: int
    """The norm after the last block."""
    total_params: int
    """Every parameter, tied embeddings counted once (what ``sum(p.numel())`` gives in transformers)."""
    decoder_linear_params: int
    """Weights of every ``nn.Linear`` inside the blocks, biases excluded (what QLoRA quantizes to NF4); an MoE's
    parameter-stored experts and router (transformers 5 Mixtral) are not ``nn.Linear`` and are not counted."""
    non_linear_params: int
    """What stays in the compute dtype under QLoRA: embeddings, lm_head, norms, biases (and an MoE's parameter-stored
    experts and router)."""
    matmul_params_per_token: int
    """Weights one token's forward multiplies by: block linears with k of E experts, plus the V·h
    output projection even when tied; the embedding lookup is excluded. Forward FLOPs ≈ 2× this."""

    @property
    def layer_params(self) -> int:
        """One decoder layer's parameters (attention + MLP + norms): one FSDP / ZeRO-3 unit, the split's one home.

        FSDP's auto-wrap wraps the decoder layer class (transformers' ``model.layers[i]``, norms included) and ZeRO-3
        gathers a module's parameters (test_params counts ``model.layers[0]`` on the meta device). The step time's
        gathers and reduce-scatters, the offload's copies and the gathered weights' memory use this split.
        """
        return self.attention_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer

    @property
    def root_params(self) -> int:
        """The root unit's parameters, outside the decoder layers: embeddings, output head, final norm."""
        return self.embedding_params + self.lm_head_params + self.final_norm_params

    @property
    def layer_share(self) -> float:
        """:attr:`layer_params` over every parameter, 0..1: the share of the weights one layer's unit moves."""
        return self.layer_params / max(1, self.total_params)

    @property
    def root_share(self) -> float:
        """:attr:`root_params` over every parameter (``1 − L × layer_share``: the class docstring's identity)."""
        return self.root_params / max(1, self.total_params)


def layer_linear_tokens(
    modules: tuple[LinearModule, ...], layers: int, experts: tuple[int, int], tokens: float
) -> Iterator[tuple[LinearModule, int, float]]:
    """(module, instances in one decoder layer, tokens each instance multiplies) for every kind in ``modules``.

    ``experts``: (experts per token, experts); an MoE's expert projections (:attr:`LinearModule.routed`) see
    ``tokens × experts per token / experts``, every other linear all ``tokens``.
    """
    experts_per_token, num_experts = experts
    for m in modules:
        share = experts_per_token / num_experts if m.routed and num_experts > 1 else 1
        yield m, m.count // layers, tokens * share


@functools.lru_cache(maxsize=512)
def linear_modules(model: ModelSpec) -> tuple[LinearModule, ...]:
    """Every linear weight kind inside the decoder blocks of ``model`` (lm_head excluded).

    Names: q_proj, k_proj, v_proj, o_proj (or qkv_proj, o_proj when ``fused_qkv``, as Phi-3's
    ``modeling_phi3.py``); gated MLP gate_proj, up_proj, down_proj (or gate_up_proj, down_proj when
    ``fused_gate_up``); non-gated MLP up_proj (h→I, "fc1"), down_proj (I→h, "fc2"); MoE adds
    ``router`` (h→E, no bias, ``modeling_mixtral.py``) and multiplies the expert counts by E.
    Shapes: q is h→n_q·d, k and v are h→n_kv·d, o is n_q·d→h (``modeling_llama.py``).

    Raises:
        InvalidRequestError: ``fused_gate_up`` on a model whose MLP is not gated.
    """
    h = model.hidden_size
    inter = model.intermediate_size
    layers = model.num_hidden_layers
    experts = model.num_experts
    mods: list[LinearModule] = []
    if model.fused_qkv:
        qkv_out = model.q_dim + 2 * model.kv_dim
        mods.append(LinearModule("qkv_proj", h, qkv_out, layers, model.attention_bias, "attention"))
    else:
        mods.append(LinearModule("q_proj", h, model.q_dim, layers, model.attention_bias, "attention"))
        mods.append(LinearModule("k_proj", h, model.kv_dim, layers, model.attention_bias, "attention"))
        mods.append(LinearModule("v_proj", h, model.kv_dim, layers, model.attention_bias, "attention"))
    mods.append(LinearModule("o_proj", model.q_dim, h, layers, model.o_proj_bias, "attention"))

    expert_count = layers * experts
    if model.mlp_gated and model.fused_gate_up:
        mods.append(LinearModule("gate_up_proj", h, 2 * inter, expert_count, model.mlp_bias, "mlp"))
    elif model.mlp_gated:
        mods.append(LinearModule("gate_proj", h, inter, expert_count, model.mlp_bias, "mlp"))
        mods.append(LinearModule("up_proj", h, inter, expert_count, model.mlp_bias, "mlp"))
    elif model.fused_gate_up:
        raise InvalidRequestError(
            f"model {model.key!r}: fused_gate_up=true needs mlp_gated=true (a non-gated MLP has no gate)"
        )
    else:
        mods.append(LinearModule("up_proj", h, inter, expert_count, model.mlp_bias, "mlp"))
    mods.append(LinearModule("down_proj", inter, h, expert_count, model.mlp_bias, "mlp"))
    if experts > 1:
        mods.append(LinearModule("router", h, experts, layers, False, "mlp"))
    return tuple(mods)


@functools.lru_cache(maxsize=512)
def count_params(model: ModelSpec) -> ParamCounts:
    """Count the parameters of ``model`` exactly for the Llama/Mistral/Qwen2/Gemma/Gemma2/Phi3 families.

    Formulas in the module docstring (models.md "Parameter-count rule"; ``modeling_llama.py``,
    ``modeling_qwen2.py``, ``modeling_gemma2.py``, ``modeling_phi3.py``, ``modeling_mixtral.py``).

    Raises:
        InvalidRequestError: inconsistent fusion flags (see :func:`linear_modules`).
    """
    h = model.hidden_size
    layers = model.num_hidden_layers
    vocab = model.vocab_size
    mods = linear_modules(model)

    attention = sum(m.weight_params + m.bias_params for m in mods if m.group == "attention")
    mlp = sum(m.weight_params + m.bias_params for m in mods if m.group == "mlp")
    per_norm = h * (2 if model.norm_has_bias else 1)
    norms_per_layer = model.norms_per_layer * per_norm
    embedding = vocab * h
    lm_head = 0 if model.tie_word_embeddings else vocab * h
    total = embedding + lm_head + attention + mlp + layers * norms_per_layer + per_norm

    # bitsandbytes quantizes nn.Linear modules only (transformers ``integrations/bitsandbytes.py``,
    # ``replace_with_bnb_linear``): parameter-stored linears (Mixtral's experts and router) stay in the load dtype
    stored = parameter_targets(model.model_type)
    decoder_linear = sum(m.weight_params for m in mods if stored is None or m.name not in stored.peft_names)
    active_linear = sum(
        m.weight_params * model.num_experts_per_token // model.num_experts if m.routed else m.weight_params
        for m in mods
    )
    return ParamCounts(
        embedding_params=embedding,
        lm_head_params=lm_head,
        attention_params_per_layer=attention // layers,
        mlp_params_per_layer=mlp // layers,
        norm_params_per_layer=norms_per_layer,
        final_norm_params=per_norm,
        total_params=total,
        decoder_linear_params=decoder_linear,
        non_linear_params=total - decoder_linear,
        matmul_params_per_token=active_linear + vocab * h,
    )


@dataclass(frozen=True)
class LoraAdapter:
    """One kind of LoRA adapter peft builds (``count`` instances in the model), by what it wraps.

    ``on_parameter`` False: ``lora.Linear`` around an ``nn.Linear`` module (``count`` = L, or L·E for experts
    stored as modules); A is (rank, in_features), B is (out_features, rank). ``on_parameter`` True:
    ``lora.ParamWrapper`` around a parameter (``count`` = L wrappers); for a 3-D expert stack [E, out, in]
    ``experts`` = E and A is (rank·E, in_features), B is (out_features, rank·E) (``ParamWrapper.update_layer``,
    ``peft/tuners/lora/layer.py``). ``rank`` is the adapter's own rank: r, or r times the number of fused
    projections (Mixtral's ``gate_up_proj``: 2r, alpha 2α; :mod:`autotune.schemas.lora_targets`).
    """

    name: str
    in_features: int
    out_features: int
    count: int
    rank: int
    experts: int = 1
    on_parameter: bool = False

    @property
    def params(self) -> int:
        """Trainable elements of all instances: count · rank · experts · (in_features + out_features)."""
        return self.count * self.rank * self.experts * (self.in_features + self.out_features)

    @property
    def tensors(self) -> int:
        """Trainable tensors of all instances (an A and a B per instance)."""
        return 2 * self.count


@functools.lru_cache(maxsize=512)
def lora_adapters(model: ModelSpec, rank: int, targets: tuple[str, ...]) -> tuple[LoraAdapter, ...]:
    """The adapters peft builds for LoRA ``targets`` at ``rank`` on ``model`` (rules in :func:`lora_params`).

    Parameter-stored linears (:func:`autotune.schemas.lora_targets.parameter_targets`: Mixtral's experts and
    router in transformers 5) become ``ParamWrapper`` adapters, one per layer: the fused ``gate_up_proj``
    [E, 2I, h] with rank r·2, ``down_proj`` [E, h, I] with rank r, the router [E, h] with rank r.

    Raises:
        InvalidRequestError: rank < 1, empty targets, a name the model does not have, or a fused parameter
            named only in part (peft refuses it).
    """
    if rank < 1:
        raise InvalidRequestError(f"LoRA rank must be >= 1, got {rank}")
    error = fused_target_error(model.model_type, targets)
    if error:
        raise InvalidRequestError(error)
    table = parameter_targets(model.model_type)
    layers = model.num_hidden_layers
    chosen = lora_target_modules(model, targets)
    names = {m.name for m in chosen}
    adapters: list[LoraAdapter] = []
    for m in chosen:
        if table is None or m.name not in table.peft_names:
            adapters.append(LoraAdapter(m.name, m.in_features, m.out_features, m.count, rank))
            continue
        fused = next((f for f, parts in table.fused.items() if m.name in parts), None)
        if fused is not None and m.name != table.fused[fused][0]:
            continue  # counted with the first part of its fused parameter
        experts = m.count // layers
        parts = table.fused[fused] if fused is not None else (m.name,)
        out = sum(p.out_features for p in chosen if p.name in parts) if fused else m.out_features
        factor = len([p for p in parts if p in names])
        adapters.append(LoraAdapter(fused or m.name, m.in_features, out, layers, rank * factor, experts, True))
    return tuple(adapters)


@functools.lru_cache(maxsize=512)
def lora_target_modules(model: ModelSpec, targets: tuple[str, ...]) -> tuple[LinearModule, ...]:
    """The :func:`linear_modules` entries that LoRA ``targets`` select (rules in :func:`lora_params`).

    Whether peft wraps them as modules or as parameters (:func:`lora_adapters` tells which).

    Raises:
        InvalidRequestError: empty targets or a name the model does not have (lists the valid names).
    """
    mods = linear_modules(model)
    chosen = _resolve_targets(model, targets, [m.name for m in mods])
    return tuple(m for m in mods if m.name in chosen)


@functools.lru_cache(maxsize=512)
def lora_module_targets(model: ModelSpec, targets: tuple[str, ...]) -> tuple[LinearModule, ...]:
    """The targeted linears whose adapter peft applies to the input (``lora.Linear``: x·Aᵀ·Bᵀ per token).

    The parameter-stored ones (``ParamWrapper``) fold their adapter into the weight instead.
    """
    table = parameter_targets(model.model_type)
    chosen = lora_target_modules(model, targets)
    return chosen if table is None else tuple(m for m in chosen if m.name not in table.peft_names)


def _resolve_targets(model: ModelSpec, targets: tuple[str, ...], names: list[str]) -> set[str]:
    if not targets:
        raise InvalidRequestError(
            f"LoRA target modules are empty; use ('{ALL_LINEAR}',) or names from: {', '.join(names)}"
        )
    if ALL_LINEAR in targets:
        return set(names)
    table = parameter_targets(model.model_type)
    resolved: set[str] = set()
    for target in targets:
        if table is not None and target in table.fused and set(table.fused[target]) <= set(names):
            resolved |= set(table.fused[target])
            continue
        name = plan_module_name(model.model_type, target)
        if name not in names and FUSED_ALIASES.get(name) in names:
            name = FUSED_ALIASES[name]
        if name not in names:
            own = [module_name(model.model_type, n) for n in names]
            valid = [f"{o} ({n})" if o != n else n for o, n in zip(own, names, strict=True)]
            raise InvalidRequestError(
                f"unknown LoRA target module {target!r} for model {model.key!r}; valid: "
                f"{ALL_LINEAR}, {', '.join(valid)}"
            )
        resolved.add(name)
    return resolved


@functools.lru_cache(maxsize=512)
def lora_params(model: ModelSpec, rank: int, targets: tuple[str, ...]) -> int:
    """Trainable LoRA parameters: r·(in_features + out_features) per targeted linear instance.

    As peft builds them (:func:`lora_adapters`).

    Source: Hu et al. 2021, "LoRA", section 4.1 (ΔW = B·A with A ∈ R^{r×in}, B ∈ R^{out×r}); peft
    ``LoraLayer.update_layer`` creates exactly these two matrices without biases.

    ``targets`` are names from :func:`linear_modules` or ``("all-linear",)`` (every block linear,
    router included; peft's all-linear excludes the output layer, so lm_head is never counted).
    For a model with ``fused_qkv`` the names q_proj/k_proj/v_proj select the fused qkv_proj (once),
    and with ``fused_gate_up`` gate_proj/up_proj select gate_up_proj, as in Phi-3 where peft can
    only wrap the fused module. Expert linears count once per expert (L·E instances). A Mixtral-style MoE
    (transformers 5: experts fused into [E, 2I, h] and [E, h, I] parameters) gets one ``ParamWrapper`` per
    parameter: gate_proj + up_proj together are ``gate_up_proj`` with rank 2r, so its experts carry
    2r·(h + 2I) each, not 2·r·(h + I) (:mod:`autotune.schemas.lora_targets`).

    Raises:
        InvalidRequestError: rank < 1, empty targets, a name the model does not have (the message
            lists the valid names), or only one of a fused pair.
    """
    return sum(adapter.params for adapter in lora_adapters(model, rank, targets))


@dataclass(frozen=True)
class LoraLayout:
    """What peft builds for one setting's adapters; both tuples empty without adapters (:data:`NO_LORA`).

    Attributes:
        module_targets: the targeted linears peft wraps as modules (:func:`lora_module_targets`).
        adapters: every adapter, module- or parameter-wrapped (:func:`lora_adapters`).
    """

    module_targets: tuple[LinearModule, ...] = ()
    adapters: tuple[LoraAdapter, ...] = ()

    def __hash__(self) -> int:
        """The fields' hash, computed once: a layout keys the adapter terms' caches (``adapter_time``)."""
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.module_targets, self.adapters))


NO_LORA = LoraLayout()
"""The layout of a setting without adapters."""


def lora_layout(model: ModelSpec, setting: TrainingSetting) -> LoraLayout:
    """The :class:`LoraLayout` of ``setting`` on ``model`` (:data:`NO_LORA` for full fine-tuning).

    Raises:
        InvalidRequestError: as :func:`lora_adapters` (bad rank or targets).
    """
    if not setting.uses_adapters:
        return NO_LORA
    return adapter_layout(model, setting.lora_rank, setting.lora_targets)


@functools.lru_cache(maxsize=512)
def adapter_layout(model: ModelSpec, rank: int, targets: tuple[str, ...]) -> LoraLayout:
    """The :class:`LoraLayout` of LoRA ``targets`` at ``rank`` on ``model`` (cached).

    Raises:
        InvalidRequestError: as :func:`lora_adapters` (bad rank or targets).
    """
    return LoraLayout(module_targets=lora_module_targets(model, targets), adapters=lora_adapters(model, rank, targets))
