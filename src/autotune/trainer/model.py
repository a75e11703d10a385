"""Load the model and tokenizer a plan names, and turn it into what the plan's method trains.

Sources: a local Hugging Face directory, a ``.gguf`` file (transformers unpacks its weights into a
dense model: ``from_pretrained(dir, gguf_file=name)``), or a hub id (needs network access).
Methods: ``full`` (every weight trains), ``lora`` (peft LoRA adapters on the frozen base; Hu et al.
2021), ``qlora`` (the frozen base in 4-bit NormalFloat with optional double quantization through
bitsandbytes, bf16 compute, then ``prepare_model_for_kbit_training`` and LoRA; Dettmers et al. 2023).
``trust_remote_code`` is always off: only architectures that ship with transformers load.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from autotune.errors import ConfigError, first_line
from autotune.hostcpu import cpu_precision_note
from autotune.schemas.lora_targets import (
    adapted_parameters,
    effective_lora_dropout,
    fused_target_error,
    peft_target_modules,
)
from autotune.schemas.setting import TrainingSetting, trainer_precision_switches

logger = logging.getLogger("autotune.trainer")

SourceKind = Literal["dir", "gguf", "hub"]

ATTENTION_IMPLEMENTATIONS: dict[str, str] = {"sdpa": "sdpa", "flash_attention_2": "flash_attention_2", "eager": "eager"}
"""Plan attention_impl → transformers ``attn_implementation`` (SDPA picks a flash / memory-efficient
kernel where the device has one; flash_attention_2 needs the flash-attn package; eager materialises the
s×s score matrix)."""


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: ``path`` is a directory or hub id; ``gguf_file`` the file name in it."""

    kind: SourceKind
    path: str
    gguf_file: str | None = None


@dataclass(frozen=True)
class PrecisionChoice:
    """How a plan precision maps onto the HF stack.

    ``load_dtype`` is the dtype of the weights as loaded; ``bf16`` / ``fp16`` are TrainingArguments'
    mixed-precision (autocast) switches. Pure bf16 loads bf16 weights and leaves autocast off.
    """

    load_dtype: torch.dtype
    bf16: bool
    fp16: bool


def resolve_source(model_source: str) -> ModelSource:
    """Classify ``model_source`` (the plan's field) as a local directory, a .gguf file or a hub id.

    Raises:
        ConfigError: a path-like source (absolute, relative with ``./``, or ``*.gguf``) that does not exist.
    """
    path = Path(model_source).expanduser()
    if path.is_dir():
        return ModelSource(kind="dir", path=str(path))
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(kind="gguf", path=str(path.parent), gguf_file=path.name)
    if path.is_file():
        raise ConfigError(f"model source {model_source} is a file but not a .gguf file; give a model directory")
    looks_like_path = model_source.startswith(("/", ".", "~")) or model_source.endswith(".gguf")
    if looks_like_path or model_source.count("/") != 1:
        raise ConfigError(
            f"model source {model_source} not found: give an existing model directory, a .gguf file "
            "or a hub id such as 'HuggingFaceTB/SmolLM2-135M-Instruct'"
        )
    return ModelSource(kind="hub", path=model_source)


def choose_precision(setting: TrainingSetting, cpu: bool) -> PrecisionChoice:
    """Map ``setting.precision`` (and ``unquantized_dtype`` for QLoRA) to load dtype and autocast flags.

    bf16 → bf16 weights, no autocast (pure bf16); bf16-mixed → fp32 weights + bf16 autocast;
    fp16-mixed → fp32 weights + fp16 autocast with loss scaling; fp32 → fp32, nothing else. For QLoRA
    the dtype of the unquantized parts (embeddings, norms, lm_head) is ``unquantized_dtype``.
    On the CPU, fp16 autocast is not supported by Trainer: it is replaced by bf16 autocast with a
    logged warning; on a CPU without bf16 instructions a bf16 plan runs in fp32 (weights and compute), with a
    logged warning (:func:`autotune.hostcpu.cpu_precision_note`).
    """
    precision = setting.precision
    if cpu and cpu_precision_note(precision) is not None:  # no bf16 instructions: fp32 (autotune.hostcpu)
        logger.warning("%s", cpu_precision_note(precision))
        return PrecisionChoice(load_dtype=torch.float32, bf16=False, fp16=False)
    bf16, fp16 = trainer_precision_switches(precision, deepspeed=False, cpu=cpu)
    if precision == "fp16-mixed" and cpu:
        logger.warning("precision fp16-mixed is not supported on the CPU: using bf16-mixed instead")
    if setting.method == "qlora":
        load_dtype = torch.bfloat16 if setting.unquantized_dtype == "bf16" else torch.float32
    else:
        load_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    return PrecisionChoice(load_dtype=load_dtype, bf16=bf16, fp16=fp16)


def load_tokenizer(source: ModelSource) -> PreTrainedTokenizerBase:
    """Load the tokenizer (from the GGUF file's metadata for a .gguf) and make sure it can pad.

    A tokenizer without a pad token pads with its eos token (labels of padding are masked anyway).

    Raises:
        ConfigError: the source has no tokenizer, or neither a pad nor an eos token.
    """
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file, trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot load a tokenizer from {_describe(source)}: {first_line(error)}") from error
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"the tokenizer of {_describe(source)} has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(
    source: ModelSource,
    setting: TrainingSetting,
    precision: PrecisionChoice,
    device_map: dict[str, Any] | None,
) -> PreTrainedModel:
    """Load the causal LM with the plan's dtype, attention kernel and (QLoRA) 4-bit quantization.

    ``device_map`` is only used for QLoRA on a GPU (4-bit weights are quantized as they are placed).

    Raises:
        ConfigError: the weights cannot be loaded (missing files, unsupported architecture).
    """
    kwargs: dict[str, Any] = {
        "dtype": precision.load_dtype,
        "attn_implementation": ATTENTION_IMPLEMENTATIONS[setting.attention_impl],
        "trust_remote_code": False,
    }
    if setting.method == "qlora":
        from transformers import BitsAndBytesConfig

        compute_dtype = torch.float16 if precision.fp16 else torch.bfloat16
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=setting.qlora_double_quant,
            bnb_4bit_compute_dtype=compute_dtype,
            bnb_4bit_quant_storage=precision.load_dtype,
        )
        if device_map is not None:
            kwargs["device_map"] = device_map
    elif source.kind == "gguf":
        from transformers.utils.quantization_config import GgufConfig

        # Training needs dense weights: unpack the GGUF blocks at load time.
        kwargs["quantization_config"] = GgufConfig(gguf_file=source.gguf_file, dequantize=True)
    if source.gguf_file is not None:
        kwargs["gguf_file"] = source.gguf_file
    try:
        model = AutoModelForCausalLM.from_pretrained(source.path, **kwargs)
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot load the model from {_describe(source)}: {first_line(error)}") from error
    if source.kind == "gguf":
        _drop_dequantized_gguf_quantizer(model)
    model.config.use_cache = False  # the KV cache is for generation; training does not need it
    return model


def _drop_dequantized_gguf_quantizer(model: PreTrainedModel) -> None:
    """Forget the GGUF 'quantizer' of a model whose weights were unpacked into plain ``nn.Linear``.

    transformers keeps ``hf_quantizer`` on a model read from a .gguf file even when every weight was
    dequantized; Trainer then refuses to train it as "purely quantized". With dense weights the model
    is an ordinary one, so the marker is removed (transformers' own ``remove_quantization_config``).
    """
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return
    packed = [name for name, module in model.named_modules() if "gguf" in type(module).__name__.lower()]
    if packed:
        raise ConfigError(
            f"the GGUF weights stayed packed in {len(packed)} modules (e.g. {packed[0]}); they cannot be trained"
        )
    quantizer.remove_quantization_config(model)


def apply_method(model: PreTrainedModel, setting: TrainingSetting) -> PreTrainedModel:
    """Freeze the base and add LoRA adapters for lora / qlora; return the model unchanged for full.

    LoRA rank, alpha, dropout, adapter dtype and target modules come from the plan; 'all-linear' is peft's
    ``"all-linear"`` (every linear layer of the blocks, not the output head). Which names peft gets and the
    dropout it runs with come from :mod:`autotune.schemas.lora_targets`, the home the cost model counts from
    (an MoE's parameter-stored experts: peft's names, fused rank, dropout 0). For QLoRA,
    ``prepare_model_for_kbit_training`` first upcasts norms, enables input gradients and (with
    ``grad_ckpt``, unless FSDP checkpoints: ``TrainingSetting.model_checkpointing``) gradient checkpointing.
    """
    if not setting.uses_adapters:
        return model
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if setting.method == "qlora":
        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=setting.model_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
        if setting.unquantized_dtype == "bf16":
            _restore_unquantized_dtype(model, torch.bfloat16)
    model_type = str(getattr(model.config, "model_type", ""))
    fused_error = fused_target_error(model_type, setting.lora_targets)
    if fused_error:
        raise ConfigError(fused_error)
    dropout = effective_lora_dropout(model_type, setting.lora_targets, setting.lora_dropout)
    config = LoraConfig(
        r=setting.lora_rank,
        lora_alpha=setting.lora_alpha,  # type: ignore[arg-type]  # peft annotates int; scaling = alpha / r is float
        lora_dropout=dropout,
        target_modules=peft_target_modules(model_type, setting.lora_targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    wrapped = peft_wrapped_parameters(model, config)
    if wrapped and config.lora_dropout > 0:  # an architecture autotune.schemas.lora_targets does not list yet
        config.lora_dropout = 0.0
    if config.lora_dropout != setting.lora_dropout:
        logger.warning(
            "LoRA on this model's parameter-stored weights (%s) runs through peft's ParamWrapper, which has no "
            "dropout: lora_dropout %.2f -> 0 for every adapter of this run (the plan notes say so)",
            ", ".join(sorted(wrapped)) or ", ".join(adapted_parameters(model_type, setting.lora_targets)),
            setting.lora_dropout,
        )
    try:
        peft_model = get_peft_model(model, config, autocast_adapter_dtype=autocast_adapter_dtype(setting))
    except ValueError as error:
        raise ConfigError(f"LoRA targets {setting.lora_targets} do not fit this model: {first_line(error)}") from error
    return peft_model  # type: ignore[return-value]


def autocast_adapter_dtype(setting: TrainingSetting) -> bool:
    """The ``autocast_adapter_dtype`` switch of peft for ``setting``: one rule, at creation and on reload.

    ``adapter_dtype: compute`` leaves the adapters in the base layer's dtype (bf16 under pure bf16): False;
    ``fp32`` is peft's default ``autocast_adapter_dtype=True``, which casts bf16 / fp16 adapter weights to fp32 (each
    adapted input is then cast to fp32 and back). peft applies the same switch in ``get_peft_model`` and in
    ``PeftModel.load_adapter`` (peft 0.21 ``peft_model.py``: ``_cast_adapter_dtype`` after loading), so a resumed run
    that reloaded with peft's default would train fp32 adapters where the uninterrupted run trained bf16 ones
    (issue 29: the resumed losses drifted from step 3 on).
    """
    return setting.adapter_dtype == "fp32"


def peft_wrapped_parameters(model: PreTrainedModel, config: Any) -> set[str]:
    """The parameters (not modules) that peft will adapt for ``config`` on ``model``: an MoE's fused 3-D expert weights.

    Transformers 5 stores Mixtral-style experts as ``experts.gate_up_proj`` / ``experts.down_proj`` parameters, and peft
    maps linear targets, ``"all-linear"`` included, onto them and the router weight.

    peft wraps each with ``lora.ParamWrapper``, which refuses ``lora_dropout != 0`` (``peft/tuners/lora/layer.py``);
    the mapping is peft's own ``convert_peft_config_for_transformers``
    (``peft/utils/transformers_weight_conversion.py``), run on a copy of the config. An empty set where peft
    has no such mapping.
    """
    try:
        from peft.utils.transformers_weight_conversion import (
            convert_peft_config_for_transformers,
            get_model_conversion_mapping,
        )
    except ImportError:  # peft without transformers-5 weight conversion: no parameter targets
        return set()
    probe = copy.deepcopy(config)
    convert_peft_config_for_transformers(probe, model=model, conversions=get_model_conversion_mapping(model))
    return {str(name) for name in (probe.target_parameters or ())}


def _restore_unquantized_dtype(model: PreTrainedModel, dtype: torch.dtype) -> None:
    """Undo ``prepare_model_for_kbit_training``'s upcast of the unquantized parts.

    peft upcasts every 16-bit parameter (embeddings, norms, lm_head) to fp32; the plan's
    ``unquantized_dtype: bf16`` keeps them in 16 bits — the cost model's QLoRA memory and time assume it
    (an fp32 residual stream and fp32 logits double those terms; seed 001's QLoRA rows show the cost).
    """
    for parameter in model.parameters():
        if parameter.dtype == torch.float32:
            parameter.data = parameter.data.to(dtype)


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts (elements; 4-bit packed weights count their storage elements)."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total


def _describe(source: ModelSource) -> str:
    return str(Path(source.path) / source.gguf_file) if source.gguf_file else source.path
