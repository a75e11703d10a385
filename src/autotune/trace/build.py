"""Build the training core's model on the meta device, wrap it as the trainer does, then make it fake.

The model is built exactly as ``autotune.trainer.model`` builds it for ``autotune launch`` — same
transformers class (``AutoModelForCausalLM.from_config`` of the same config), the same attention
implementation (``ATTENTION_IMPLEMENTATIONS``), load dtype (``choose_precision``), peft LoRA and k-bit
preparation (``apply_method``), gradient checkpointing (``gradient_checkpointing_enable`` with
non-reentrant checkpoints, as ``TrainingArguments(activation_checkpointing=True)`` makes the Trainer do)
— but on the meta device (no weights), with bitsandbytes layers replaced by the stand-in of
:mod:`autotune.trace.qlora`. peft wraps while the parameters are meta tensors; then every
parameter and buffer is re-materialised as a fake CPU tensor of the same shape, dtype and
``requires_grad`` (ties kept), inside one ``FakeTensorMode``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from autotune.errors import ConfigError
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.trainer.model import ATTENTION_IMPLEMENTATIONS, PrecisionChoice, apply_method, choose_precision

TRACE_ATTENTION: dict[str, str] = {"flash_attention_2": "sdpa"}
"""Attention implementations the CPU cannot build, traced as another with the same saved tensors:
FlashAttention-2 (``flash_attn_func``) saves q, k, v, the output and an fp32 log-sum-exp (b, n, s) plus an
RNG state (Dao 2023, ``flash_attn_interface.py`` ``_flash_attn_forward``), as the SDPA flash kernel does
(``_scaled_dot_product_flash_attention`` / ``..._for_cpu`` in ``aten/src/ATen/native/transformers``)."""

_SPEC_TO_CONFIG = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
    "hidden_act",
)


def config_from_spec(spec: ModelSpec, source: str | None = None) -> PretrainedConfig:
    """The transformers config of a model: its config.json, else one built from the catalog's shapes.

    Its config.json when ``source`` is a local file/directory holding one; the built one's field names follow
    config.json.

    Raises:
        ConfigError: transformers does not know the model_type, or cannot read the config.json.
    """
    if source is not None:
        path = Path(source)
        config_file = path if path.suffix == ".json" else path / "config.json"
        if config_file.is_file():
            try:
                return AutoConfig.from_pretrained(str(config_file), trust_remote_code=False)
            except (OSError, ValueError, KeyError) as error:
                raise ConfigError(f"transformers cannot build {config_file}: {error}") from error
    values: dict[str, Any] = {name: getattr(spec, name) for name in _SPEC_TO_CONFIG}
    values["attention_bias"] = spec.attention_bias
    values["sliding_window"] = spec.sliding_window
    values["mlp_bias"] = spec.mlp_bias
    for name in ("final_logit_softcapping", "attn_logit_softcapping"):
        if getattr(spec, name) is not None:
            values[name] = getattr(spec, name)
    if spec.model_type in ("gemma", "gemma2"):
        values["hidden_activation"] = spec.hidden_act
    if spec.num_experts > 1:
        values["num_local_experts"] = spec.num_experts
        values["num_experts_per_tok"] = spec.num_experts_per_token
    try:
        return AutoConfig.for_model(spec.model_type, **values)
    except ValueError as error:
        raise ConfigError(f"transformers has no model_type {spec.model_type!r} to trace: {error}") from error


def trace_precision(setting: TrainingSetting) -> PrecisionChoice:
    """The precision choice of a GPU run (``choose_precision(setting, cpu=False)``)."""
    return choose_precision(setting, cpu=False)


def build_meta_model(config: PretrainedConfig, setting: TrainingSetting) -> PreTrainedModel:
    """The trainer's model on the meta device.

    Transformers class from config, attention kernel, dtype, QLoRA stand-in layers, peft method and gradient
    checkpointing.

    Raises:
        ConfigError: transformers cannot build the architecture, or the LoRA targets do not fit it.
    """
    precision = trace_precision(setting)
    attention = ATTENTION_IMPLEMENTATIONS[setting.attention_impl]
    config.use_cache = False
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(
                config, dtype=precision.load_dtype, attn_implementation=TRACE_ATTENTION.get(attention, attention)
            )
    except (ValueError, ImportError, KeyError) as error:
        raise ConfigError(f"transformers cannot build {config.model_type}: {str(error).splitlines()[0]}") from error
    model.config.use_cache = False
    if setting.method == "qlora":
        from autotune.trace.qlora import quantize_linear_layers

        compute_dtype = torch.float16 if precision.fp16 else torch.bfloat16
        quantize_linear_layers(model, compute_dtype, setting.qlora_double_quant, precision.load_dtype)
        model.is_loaded_in_4bit = True  # what transformers sets on a bitsandbytes 4-bit model
    model = apply_method(model, setting)
    if setting.grad_ckpt:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def materialize_fake(model: torch.nn.Module, fake_mode: FakeTensorMode, setting: TrainingSetting) -> None:
    """Replace every meta parameter and buffer by a fake CPU tensor.

    Same shape, dtype, requires_grad; shared parameters stay shared. QLoRA stand-in layers get their packed weight and
    constants.
    """
    from autotune.trace.qlora import TracedLinear4bit

    precision = trace_precision(setting)
    done: dict[int, torch.Tensor] = {}
    with fake_mode:
        for module in model.modules():
            if isinstance(module, TracedLinear4bit):
                module.attach_fake_storage(setting.qlora_double_quant, precision.load_dtype, precision.load_dtype)
            for name, param in list(module._parameters.items()):
                if param is None or param.device.type != "meta":
                    continue
                if id(param) not in done:
                    data = torch.empty(param.shape, dtype=param.dtype, device="cpu")
                    done[id(param)] = torch.nn.Parameter(data, requires_grad=param.requires_grad)
                module._parameters[name] = done[id(param)]  # type: ignore[assignment]
            for name, buffer in list(module._buffers.items()):
                if buffer is not None and buffer.device.type == "meta":
                    module._buffers[name] = torch.zeros(buffer.shape, dtype=buffer.dtype, device="cpu")
