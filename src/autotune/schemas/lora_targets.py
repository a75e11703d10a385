r"""Which LoRA targets peft builds for an architecture, and how. No torch.

The one home shared by the cost model (what it counts) and the training core (what it asks peft for).

transformers 5 stores the experts of a Mixtral-style MoE as fused 3-D parameters (``modeling_mixtral.py``,
``MixtralExperts``: ``gate_up_proj`` [E, 2I, h] and ``down_proj`` [E, h, I]) and the router as a bare [E, h]
parameter (``MixtralTopKRouter.weight``), none of them ``nn.Linear``. peft 0.21 maps linear targets onto them
(``peft/utils/transformers_weight_conversion.py``, ``_convert_peft_config_moe``): the transformers-4 names in
``_MOE_TARGET_MODULE_MAPPING`` (Mixtral: ``w1``, ``w3`` → ``gate_up_proj``, ``w2`` → ``down_proj``, ``gate`` →
``gate.weight``) become ``target_parameters``; ``"all-linear"`` resolves to the attention ``nn.Linear`` names
plus every name of that mapping (``_resolve_string_target_modules``). Parameters fused from several old names
(``_MOE_FUSED_TARGETS``: ``gate_up_proj`` from ``w1`` + ``w3``) get rank and alpha multiplied by the number of
names (``rank_pattern`` / ``alpha_pattern``; alpha / r, the scaling, is unchanged), and naming only some of
them is refused (``ValueError``). The plan's module names (``gate_proj``, ``up_proj``, ``down_proj``,
``router``) match nothing in a transformers-5 Mixtral, so the trainer hands peft the names of
:data:`PARAMETER_TARGETS` instead.

Each adapted parameter is wrapped by ``lora.ParamWrapper`` (``peft/tuners/lora/layer.py``), which raises for
``lora_dropout != 0`` (dropout cannot be factored out of a weight delta); one ``LoraConfig`` has one dropout, so
a run with any parameter target runs every adapter without dropout (:func:`effective_lora_dropout`).

peft also warns "The following rank_pattern keys did not match any targeted module and were ignored:
['.*\\.gate_up_proj']" (``peft/tuners/tuners_utils.py``, ``BaseTuner.inject_adapter``: the check compares the
patterns with ``targeted_module_names`` only, not ``targeted_parameter_names``); the pattern is applied all
the same (``ParamWrapper.r`` is 2r on ``gate_up_proj``, checked by ``tests/unit/costmodel/test_param_adapters.py``
against the real peft model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotune.schemas.setting import ALL_LINEAR


@dataclass(frozen=True)
class ParameterTargets:
    """How peft adapts the parameter-stored linears of one architecture.

    Attributes:
        peft_names: plan module name → the names peft's MoE conversion recognises for it.
        fused: fused parameter name → the plan names fused into it (all or none must be targeted; its adapter
            has rank and alpha × their number).
    """

    peft_names: dict[str, tuple[str, ...]]
    fused: dict[str, tuple[str, ...]] = field(default_factory=dict)


PARAMETER_TARGETS: dict[str, ParameterTargets] = {
    "mixtral": ParameterTargets(
        peft_names={
            "gate_proj": ("w1",),
            "up_proj": ("w3",),
            "gate_up_proj": ("w1", "w3"),
            "down_proj": ("w2",),
            "router": ("gate",),
        },
        fused={"gate_up_proj": ("gate_proj", "up_proj")},
    ),
}
"""model_type → its parameter-stored targets (peft ``_MOE_TARGET_MODULE_MAPPING`` / ``_MOE_FUSED_TARGETS``; peft
also lists ``qwen2_moe`` there, but does not convert it: its routed experts get no adapter under 0.21)."""


FUSED_ALIASES: dict[str, str] = {
    "q_proj": "qkv_proj",
    "k_proj": "qkv_proj",
    "v_proj": "qkv_proj",
    "gate_proj": "gate_up_proj",
    "up_proj": "gate_up_proj",
}
"""Plan names of projections that some architectures fuse into one ``nn.Linear``, → the fused module's plan name:
peft can only wrap the fused module, which the cost model counts once (``autotune.costmodel.params``)."""

FUSED_MODULES: dict[str, frozenset[str]] = {
    "phi3": frozenset({"qkv_proj", "gate_up_proj"}),  # modeling_phi3.py: qkv_proj, gate_up_proj
    "falcon": frozenset({"qkv_proj"}),
    "RefinedWeb": frozenset({"qkv_proj"}),
    "RefinedWebModel": frozenset({"qkv_proj"}),
    "gpt_neox": frozenset({"qkv_proj"}),
    "bloom": frozenset({"qkv_proj"}),
    "mpt": frozenset({"qkv_proj"}),
}
"""model_type → its fused modules (plan names) among :data:`FUSED_ALIASES`' targets."""

_FALCON_NAMES = {
    "qkv_proj": "query_key_value",
    "o_proj": "dense",
    "up_proj": "dense_h_to_4h",
    "down_proj": "dense_4h_to_h",
}

MODULE_NAMES: dict[str, dict[str, str]] = {
    "falcon": _FALCON_NAMES,  # modeling_falcon.py: self_attention.{query_key_value,dense}, mlp.dense_{h_to_4h,4h_to_h}
    "RefinedWeb": _FALCON_NAMES,
    "RefinedWebModel": _FALCON_NAMES,
    "gpt_neox": _FALCON_NAMES,  # modeling_gpt_neox.py: attention.{query_key_value,dense}, mlp.dense_{h_to_4h,4h_to_h}
    "bloom": _FALCON_NAMES,  # modeling_bloom.py: self_attention.{query_key_value,dense}, mlp.dense_{h_to_4h,4h_to_h}
    "phi": {"o_proj": "dense", "up_proj": "fc1", "down_proj": "fc2"},  # modeling_phi.py: self_attn.dense, mlp.fc1/fc2
    "mpt": {"qkv_proj": "Wqkv", "o_proj": "out_proj"},  # modeling_mpt.py: attn.Wqkv, attn.out_proj, ffn.{up,down}_proj
}
"""model_type → plan name → the ``nn.Linear``'s own name in transformers, where the two differ (checked against
the models transformers builds from the test configs: ``tests/unit/schemas/test_lora_targets.py``). The plan names
are Llama's (``q_proj`` … ``down_proj``, ``qkv_proj`` for a fused projection); a user may give either."""


def module_name(model_type: str, plan_name: str) -> str:
    """The transformers module name of plan module ``plan_name`` in a ``model_type`` model (itself if the same)."""
    return MODULE_NAMES.get(model_type, {}).get(plan_name, plan_name)


def plan_module_name(model_type: str, name: str) -> str:
    """The plan name of ``name``, a module name as transformers gives it or a plan name (returned as is)."""
    for plan_name, own_name in MODULE_NAMES.get(model_type, {}).items():
        if name == own_name:
            return plan_name
    return name


def fused_alias(model_type: str, plan_name: str) -> str:
    """``plan_name``'s fused module when ``model_type`` fuses it (``q_proj`` → ``qkv_proj`` in Falcon), else itself."""
    fused = FUSED_ALIASES.get(plan_name)
    return fused if fused is not None and fused in FUSED_MODULES.get(model_type, frozenset()) else plan_name


def parameter_targets(model_type: str) -> ParameterTargets | None:
    """The parameter-stored targets of ``model_type`` (None: every target is an ``nn.Linear`` module)."""
    return PARAMETER_TARGETS.get(model_type)


def adapted_parameters(model_type: str, targets: tuple[str, ...]) -> tuple[str, ...]:
    """Plan module names among ``targets`` (every one for ``all-linear``) that peft adapts as parameters.

    A fused group is reported once under its fused name (e.g. ``gate_up_proj``, ``down_proj``, ``router``).
    """
    table = parameter_targets(model_type)
    if table is None:
        return ()
    chosen = set(table.peft_names) if ALL_LINEAR in targets else set(targets) & set(table.peft_names)
    for fused_name, parts in table.fused.items():
        if chosen & set(parts):
            chosen -= set(parts)
            chosen.add(fused_name)
    return tuple(sorted(chosen))


def fused_target_error(model_type: str, targets: tuple[str, ...]) -> str | None:
    """Why peft refuses ``targets`` on ``model_type`` (a fused parameter named only in part), else None."""
    table = parameter_targets(model_type)
    if table is None or ALL_LINEAR in targets:
        return None
    for fused_name, parts in table.fused.items():
        named = [part for part in parts if part in targets]
        if named and len(named) < len(parts):
            missing = [part for part in parts if part not in targets]
            return (
                f"LoRA targets {','.join(named)} without {','.join(missing)}: this {model_type} model fuses "
                f"them into one {fused_name} parameter, which peft adapts only whole (target both, or {fused_name})"
            )
    return None


def peft_target_modules(model_type: str, targets: tuple[str, ...]) -> str | list[str]:
    """The ``LoraConfig.target_modules`` for plan ``targets``.

    ``"all-linear"`` as is, else each name as the model calls it (:data:`MODULE_NAMES`; plan and transformers names both
    accepted), fused projections as their fused module and parameter-stored ones as the names peft's conversion
    recognises (order kept, no repeats).
    """
    if ALL_LINEAR in targets:
        return ALL_LINEAR
    table = parameter_targets(model_type)
    peft_names = table.peft_names if table else {}
    names: list[str] = []
    for target in targets:
        plan_name = fused_alias(model_type, plan_module_name(model_type, target))
        for name in peft_names.get(plan_name, (module_name(model_type, plan_name),)):
            if name not in names:
                names.append(name)
    return names


def effective_lora_dropout(model_type: str, targets: tuple[str, ...], dropout: float) -> float:
    """The LoRA dropout the trainer runs with: 0 when any target is parameter-stored, else ``dropout``.

    ``ParamWrapper`` has no dropout and one config has one dropout.
    """
    return 0.0 if adapted_parameters(model_type, targets) else dropout


def lora_dropout_note(model_type: str, targets: tuple[str, ...], dropout: float) -> str | None:
    """One line for the plan / estimate notes when the targets force the dropout to 0, else None.

    It says from what, when the setting states another value; a plan already records the 0.
    """
    wrapped = ", ".join(adapted_parameters(model_type, targets))
    if not wrapped:
        return None
    change = f"LoRA dropout {dropout:g} -> 0" if dropout > 0 else "LoRA dropout 0"
    return (
        f"{change} for every adapter: peft adapts this {model_type} model's {wrapped} "
        "parameters with ParamWrapper, which has no dropout (the trainer runs with 0; memory assumes 0)"
    )
