"""A training setting: every choice the planner makes (or the user forces); the workload is ``schemas.workload``.

One ``Field(description=...)`` per choice; the CLI reuses these descriptions as option help.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from autotune.schemas._base import FrozenModel

Method = Literal["full", "lora", "qlora"]
Sharding = Literal["none", "ddp", "fsdp", "fsdp-offload", "zero2", "zero3", "zero3-offload"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw-8bit"]
Precision = Literal["bf16", "bf16-mixed", "fp16-mixed", "fp32"]
LossImpl = Literal["fp32-upcast", "native", "chunked"]
AttentionImpl = Literal["sdpa", "flash_attention_2", "eager", "eager-legacy", "flash-triton"]
GradSync = Literal["last-micro-step", "every-micro-step"]
AdapterDtype = Literal["compute", "fp32"]
PRE_FIELD_ADAPTER_DTYPE: AdapterDtype = "fp32"
"""What adapters ran in when a plan or run report recorded no ``adapter_dtype`` (plan schema 1, run report
schemas 1 and 2): peft's default ``get_peft_model(autocast_adapter_dtype=True)``, which keeps them in fp32."""


def with_adapter_dtype_recorded(setting: Any) -> Any:
    """A recorded setting with :data:`PRE_FIELD_ADAPTER_DTYPE` filled in when it predates the ``adapter_dtype`` field.

    A recorded setting is the dict of a plan or run report file; anything else is returned unchanged for validation to
    judge.

    The one rule for reading old files: without it the field's default (``compute``) would describe fp32-adapter
    runs as the fast path, and ``autotune calibrate`` on them would fit the wrong work.
    """
    if isinstance(setting, dict) and "adapter_dtype" not in setting:
        return dict(setting, adapter_dtype=PRE_FIELD_ADAPTER_DTYPE)
    return setting


Kernels = Literal["none", "liger"]
GRAD_SYNCS: tuple[GradSync, ...] = ("last-micro-step", "every-micro-step")
ATTENTION_ALIASES: dict[str, str] = {"flash": "sdpa", "math": "eager"}
"""Earlier names of the attention implementations (plan and measurement files written before them)."""
SCORE_ATTENTION_IMPLS: tuple[AttentionImpl, ...] = ("eager", "eager-legacy")
"""Attention implementations that materialise the s×s scores (no flash / memory-efficient kernel)."""
MEASUREMENT_ONLY_ATTENTION_IMPLS: dict[AttentionImpl, str] = {
    "eager-legacy": "describes measurements taken with transformers <= 4.29",
    "flash-triton": "describes llm-foundry's 2023 triton flash-attention kernel (the MPT development data)",
}
"""Attention implementations that describe how a published measurement ran, which the training core (today's
transformers) cannot run, with the reason: ``eager-legacy`` is the LlamaAttention of transformers <= 4.29;
``flash-triton`` is FlashAttention written in Triton (the HazyResearch ``flash_attn_triton`` kernel, and
llm-foundry's triton-pre-mlir copy of it) that llm-foundry's ``attn_impl: triton`` ran in 2023
(``docs/sources/llm-foundry-mpt/README.md``, "Attention"). The planner never offers them; ``autotune launch`` and
``autotune trace`` refuse them (:func:`attention_run_error`)."""

METHODS: tuple[Method, ...] = ("full", "lora", "qlora")
SHARDINGS: tuple[Sharding, ...] = ("none", "ddp", "fsdp", "fsdp-offload", "zero2", "zero3", "zero3-offload")
OPTIMIZERS: tuple[Optimizer, ...] = ("adamw", "adamw-8bit", "paged-adamw-8bit")

FSDP_SHARDINGS: tuple[Sharding, ...] = ("fsdp", "fsdp-offload")
"""Run by PyTorch FSDP (FULL_SHARD) through accelerate."""
ZERO_SHARDINGS: tuple[Sharding, ...] = ("zero2", "zero3", "zero3-offload")
"""Run by DeepSpeed ZeRO (stage 2 or 3)."""
PARAMETER_SHARDINGS: tuple[Sharding, ...] = ("fsdp", "fsdp-offload", "zero3", "zero3-offload")
"""Split the weights over the ranks (FULL_SHARD, ZeRO stage 3): each rank gathers a layer to use it."""
OFFLOAD_SHARDINGS: tuple[Sharding, ...] = ("fsdp-offload", "zero3-offload")
"""Keep optimizer states (and parameters) in host RAM (CPU offload)."""


def default_precision(supports_bf16: bool) -> Precision:
    """The precision used unless one is asked for: pure bf16 where the GPU has it, else fp16 mixed precision."""
    return "bf16" if supports_bf16 else "fp16-mixed"


def default_sharding(world_size: int) -> Sharding:
    """The data parallelism used for a fixed setting unless one is asked for: none on one GPU, else DDP."""
    return "ddp" if world_size > 1 else "none"


ALL_LINEAR = "all-linear"

DEFAULT_LORA_RANK = 16
"""LoRA rank when none is given (the schema's default; the CLI options and the planner read it)."""

DEFAULT_LORA_ALPHA = 32.0
"""LoRA alpha when none is given (the schema's default; alpha / r = 2 at the default rank; the planner reads it)."""

DEFAULT_SEQ_LEN = 2048
"""Tokens per sequence when none is given (the schema's default; the CLI options read it)."""

LOSS_IMPL_CHOICES: dict[str, str] = {
    "fp32-upcast": "transformers' loss: full logits upcast to fp32",
    "native": "cross-entropy in the logits dtype on a shifted copy",
    "chunked": "logits computed and freed in chunks",
}
"""What each ``loss_impl`` computes (the field's description and the CLI help are made of these)."""


def loss_impl_description(choices: Iterable[str]) -> str:
    """'Cross-entropy: fp32-upcast (...), chunked (...).' for ``choices`` (keys of :data:`LOSS_IMPL_CHOICES`)."""
    return "Cross-entropy: " + ", ".join(f"{name} ({LOSS_IMPL_CHOICES[name]})" for name in choices) + "."


DESCRIPTIONS: dict[str, str] = {
    "method": "Fine-tuning method: full (all weights), lora (bf16 base + adapters), qlora (NF4 base + adapters).",
    "micro_batch_size": "Sequences per GPU per forward/backward pass.",
    "grad_accum": "Gradient accumulation steps: micro-steps per optimizer step.",
    "grad_ckpt": "Activation checkpointing: keep only each decoder layer's input, recompute the rest.",
    "compile": "torch.compile the model (faster steps after a one-off compile time).",
    "sharding": "Data parallelism: none, ddp, fsdp (FULL_SHARD), fsdp-offload (+CPU offload), "
    "zero2, zero3, zero3-offload (DeepSpeed ZeRO stage 3 + optimizer/parameter CPU offload).",
    "optimizer": "adamw (torch), adamw-8bit or paged-adamw-8bit (bitsandbytes).",
    "precision": "bf16 (pure bf16 weights, grads, optimizer states), bf16-mixed / fp16-mixed "
    "(fp32 master weights, autocast), fp32.",
    "lora_rank": "LoRA rank r.",
    "lora_alpha": "LoRA alpha (scaling = alpha / r).",
    "lora_dropout": "LoRA dropout probability (default 0, as torchtune's and Unsloth's LoRA recipes: no mask and no "
    "copy of each adapted input).",
    "adapter_dtype": "LoRA adapter weights' dtype: compute (the compute dtype under pure bf16 / fp16, as torchtune "
    "and Unsloth keep them; peft get_peft_model(autocast_adapter_dtype=False)) or fp32 (peft's default: every "
    "adapted input is cast to fp32 and back).",
    "kernels": "Fused training kernels: none, or liger (Liger Kernel: RMSNorm, RoPE, SwiGLU and a fused linear "
    "cross-entropy that never materialises the logits; CUDA only, the optional 'liger' extra).",
    "lora_targets": "LoRA target modules: all-linear or a list such as q_proj,v_proj "
    "(the model's own names, e.g. query_key_value, or the Llama-style ones).",
    "loss_impl": loss_impl_description(LOSS_IMPL_CHOICES),
    "attention_impl": "Attention implementation (transformers attn_implementation): sdpa (PyTorch SDPA: flash / "
    "memory-efficient kernels on a GPU), flash_attention_2 (the flash-attn package) or eager (s^2 scores); "
    "eager-legacy (transformers <= 4.29 LlamaAttention: eager plus a torch.max clamp of the masked scores; "
    "describes 2023 measurements, cannot be launched); flash-triton (FlashAttention written in Triton, as "
    "llm-foundry ran it in 2023; describes the MPT development data, cannot be launched).",
    "optimizer_in_backward": "Step the optimizer inside the backward, one parameter at a time as its gradient is "
    "accumulated (torch Tensor.register_post_accumulate_grad_hook; torchtune's optimizer_in_bwd): no gradient "
    "buffer for the whole model; one micro-step per optimizer step, one GPU, no gradient clipping.",
    "fp8": "FP8 linear layers: torchao float8 training (dynamic tensorwise scaling) of the decoder's linears through "
    "accelerate's convert_model_to_fp8_ao (first and last linear kept in bf16); NVIDIA GPUs with FP8 tensor cores "
    "(Ada, Hopper, Blackwell) and the optional 'fp8' extra; priced from torchao's public float8 figures until the core "
    "measures it (costmodel.fp8_time).",
    "bf16_stochastic_rounding": "Pure bf16 weights updated with stochastic rounding (torchao.optim._AdamW "
    "bf16_stochastic_round=True: the fp32 update rounded up with the probability of its lost low bits, so updates "
    "below bf16's 2^-8 are kept on average); precision bf16, optimizer adamw, no sharding; the optional 'fp8' extra "
    "(torchao).",
    "activation_offloading": "Move the activations each decoder layer saves to host memory in the forward and back "
    "in its backward (torch.autograd.graph.saved_tensors_hooks, as torch's save_on_cpu with torchtune's "
    "OffloadActivations rule: parameters and tensors under 1 KiB stay); no activation checkpointing, no compile, "
    "no parameter sharding.",
    "grad_sync": "When FSDP reduces gradients under accumulation: last-micro-step (HF Trainer / accelerate default: "
    "no_sync on the other micro-steps, so every GPU holds the full unsharded gradients until then) or "
    "every-micro-step (reduce-scatter after each micro-step: accelerate sync_each_batch, Composer's FSDP default).",
    "seq_len": "Tokens per sequence (packed or truncated to this length).",
    "global_batch_size": "Sequences per optimizer step over all GPUs (micro × accumulation × ranks).",
    "num_samples": "Training samples in the dataset (for total run time).",
    "dataset_tokens": "Training tokens in the dataset (alternative to num_samples).",
    "epochs": "Passes over the dataset.",
}


def trainer_precision_switches(precision: str, deepspeed: bool, cpu: bool) -> tuple[bool, bool]:
    """The (``bf16``, ``fp16``) switches of transformers ``TrainingArguments`` for a plan precision.

    One rule for the training core and the DeepSpeed JSON, whose ``bf16.enabled`` / ``fp16.enabled`` transformers
    requires to equal them (``HfTrainerDeepSpeedConfig.trainer_config_process``: ``fill_match("bf16.enabled",
    args.bf16)``).

    Without DeepSpeed the switches turn torch autocast on: only the ``*-mixed`` precisions set one (pure bf16 loads
    bf16 weights and needs none). Under DeepSpeed they select the engine's 16-bit mode (16-bit weights, fp32
    master copy in the optimizer; the Trainer adds no autocast), which pure ``bf16`` needs as much as
    ``bf16-mixed``. On the CPU fp16 autocast is not supported by the Trainer: fp16 becomes bf16.
    """
    bf16 = precision == "bf16-mixed" or (deepspeed and precision == "bf16")
    fp16 = precision == "fp16-mixed"
    if fp16 and cpu:
        fp16, bf16 = False, True
    return bf16, fp16


def combination_error(method: str | None, precision: str | None) -> str | None:
    """The reason a method/precision pair cannot run, or None (one rule, used by settings and overrides)."""
    if method == "qlora" and precision == "fp32":
        return "method=qlora needs a 16-bit compute precision (bf16, bf16-mixed or fp16-mixed), not fp32"
    return None


def optimizer_in_backward_error(
    optimizer_in_backward: bool | None, grad_accum: int | None, sharding: str | None
) -> str | None:
    """The reason the optimizer step cannot run inside the backward, or None (one rule for plan, estimate, launch).

    Each parameter is stepped and its gradient freed by its post-accumulate-grad hook (PyTorch tutorial "How to save
    memory by fusing the optimizer step into the backward pass"; transformers' layer-wise optimizers refuse
    ``gradient_accumulation_steps != 1`` the same way, ``trainer_optimizer.py``): nothing is left to accumulate
    into, so one micro-step per optimizer step only; the hooks are the core's on one process, so no data parallel
    or sharded run (torchtune's ``optimizer_in_bwd`` is single-device too). Gradient clipping needs every gradient at
    once (torchtune refuses ``clip_grad_norm`` with it): the core turns it off under this lever and the plan says so.
    ``None`` arguments are not yet chosen.
    """
    if not optimizer_in_backward:
        return None
    if grad_accum is not None and grad_accum > 1:
        return (
            f"optimizer_in_backward steps each parameter as its gradient arrives and cannot accumulate {grad_accum} "
            "micro-steps: use one micro-step per step (--micro-batch-size = --global-batch-size) or drop it"
        )
    if sharding is not None and sharding != "none":
        return f"optimizer_in_backward runs on one GPU without sharding, not with sharding={sharding}: drop one"
    return None


def stochastic_rounding_error(
    rounding: bool | None, precision: str | None, optimizer: str | None, sharding: str | None
) -> str | None:
    """The reason bf16 stochastic rounding cannot run with these choices, or None (one rule for plan, estimate, launch).

    torchao's ``_AdamW(bf16_stochastic_round=True)`` rounds a parameter's fp32 update to bf16 stochastically only
    where the parameter itself is bf16 (``torchao/optim/adam.py``: ``bf16_stochastic_round and p.dtype is
    torch.bfloat16``; torchao ``optim/README.md`` "Stochastic rounding for BF16 weight"): pure ``bf16`` precision
    (mixed precision keeps fp32 weights, where it would do nothing). It replaces torch's AdamW, not bitsandbytes'
    8-bit optimizers; the core builds it on unsharded parameters (one GPU or DDP: DeepSpeed keeps an fp32 master
    copy of its own, FSDP's flat parameters are not torchao's DTensor path). ``None`` arguments are not yet chosen.
    """
    if not rounding:
        return None
    if precision is not None and precision != "bf16":
        return (
            f"bf16_stochastic_rounding rounds pure bf16 weights, and precision={precision} keeps fp32 weights: "
            "use --precision bf16 or drop it"
        )
    if optimizer is not None and optimizer != "adamw":
        return (
            f"bf16_stochastic_rounding is torchao's AdamW, not optimizer={optimizer}: use --optimizer adamw or drop it"
        )
    if sharding is not None and sharding not in ("none", "ddp"):
        return f"bf16_stochastic_rounding runs on unsharded parameters (none or ddp), not sharding={sharding}: drop one"
    return None


def stochastic_rounding_run_error(rounding: bool, *, installed: bool) -> str | None:
    """The reason the training core cannot round stochastically here, or None (``autotune launch`` and the core).

    ``installed``: torchao is importable (:func:`fp8_installed`). torchao's optimizer compiles its step with
    ``torch.compile`` (its README: "your platform must support torch.compile()"), which runs on the CPU and on CUDA.
    """
    if rounding and not installed:
        return (
            'bf16_stochastic_rounding needs torchao: pip install -e ".[fp8]" (or --set bf16_stochastic_rounding=false)'
        )
    return None


ACTIVATION_OFFLOAD_SHARDINGS: tuple[str, ...] = ("none", "ddp")
"""Shardings under which the core offloads activations: whole ``nn.Parameter`` weights, which it keeps on the GPU."""


def activation_offloading_error(
    offloading: bool | None,
    grad_ckpt: bool | None,
    compile_: bool | None,
    sharding: str | None,
    full_mixed: bool = False,
) -> str | None:
    """The reason activations cannot be offloaded to host memory with these choices, or None (one rule).

    The core offloads what each decoder layer saves for its backward (:mod:`autotune.trainer.activation_offload`).
    A checkpointed layer saves nothing (it is recomputed in the backward; the checkpoint keeps its input on the GPU),
    so with activation checkpointing there is nothing to move: torchtune pairs the two because its
    ``OffloadActivations`` wraps the whole model, where the checkpoints are saved tensors. Under ``torch.compile`` the
    compiled graph saves its own tensors, not each layer's (AOTAutograd); under FSDP / ZeRO-3 the gathered weights
    are plain tensors, which the offload would copy to the host too, and so are full fine-tuning's autocast casts of
    the fp32 weights under mixed precision (``full_mixed``: every linear saves its weight's 16-bit copy, the whole
    model would cross the link each micro-step). ``None`` arguments are not yet chosen.
    """
    if not offloading:
        return None
    if grad_ckpt:
        return (
            "activation_offloading moves what each layer saves, and a checkpointed layer saves nothing: "
            "use --no-grad-ckpt or drop it"
        )
    if compile_:
        return (
            "activation_offloading hooks each layer's saved tensors, which torch.compile fuses away: "
            "use --no-compile or drop it"
        )
    if sharding is not None and sharding not in ACTIVATION_OFFLOAD_SHARDINGS:
        return f"activation_offloading keeps whole weights on the GPU (none or ddp), not sharding={sharding}: drop one"
    if full_mixed:
        return (
            "activation_offloading would copy every autocast weight cast of full fine-tuning under mixed precision: "
            "use --precision bf16 or drop it"
        )
    return None


FP8_GENERATIONS: tuple[str, ...] = ("ada", "hopper", "blackwell")
"""Architecture generations with FP8 tensor cores (``GpuSpec.generation``): Ada Lovelace (sm_89), Hopper (sm_90) and
Blackwell (NVIDIA Ada and Hopper architecture whitepapers: "FP8 Tensor Core"); ``torch._scaled_mm``, which torchao's
float8 training calls, needs compute capability 8.9 or higher."""
TORCHAO_PACKAGE = "torchao"
"""The import name of torchao (the optional extra ``pip install -e ".[fp8]"``; https://github.com/pytorch/ao)."""


def fp8_error(fp8: bool | None, method: str | None, gpu_name: str, vendor: str, generation: str) -> str | None:
    """The reason FP8 linears cannot run for this method on this GPU, or None (one rule for plan, estimate, launch).

    ``gpu_name`` / ``vendor`` / ``generation``: the GPU's (``GpuSpec``). QLoRA's base linears are NF4
    (bitsandbytes), which torchao's ``Float8Linear`` does not replace.
    """
    if not fp8:
        return None
    if vendor != "nvidia" or generation not in FP8_GENERATIONS:
        return (
            f"--fp8 needs FP8 tensor cores (NVIDIA Ada, Hopper or Blackwell), which {gpu_name} ({generation}) does not "
            "have: drop --fp8"
        )
    if method == "qlora":
        return "--fp8 replaces bf16 linears, and QLoRA's are NF4: use --method full or lora, or drop --fp8"
    return None


def fp8_installed() -> bool:
    """True when torchao can be imported here (asked with ``importlib.util.find_spec``: nothing is imported)."""
    return importlib.util.find_spec(TORCHAO_PACKAGE) is not None


def fp8_run_error(fp8: bool, *, cpu: bool, installed: bool) -> str | None:
    """The reason the training core cannot run FP8 linears here, or None (``autotune launch`` and the core).

    torchao's float8 matmul is ``torch._scaled_mm`` on CUDA (no CPU kernel); ``installed``: torchao is importable.
    """
    if not fp8:
        return None
    if cpu:
        return "fp8 runs torch._scaled_mm on an FP8 GPU and cannot run on the CPU: --set fp8=false"
    if not installed:
        return 'fp8 needs torchao: pip install -e ".[fp8]" (or --set fp8=false)'
    return None


def attention_run_error(attention_impl: str) -> str | None:
    """The reason the training core cannot run ``attention_impl``, or None.

    See :data:`MEASUREMENT_ONLY_ATTENTION_IMPLS`; one rule for ``autotune launch`` and ``autotune trace``.
    """
    for impl, reason in MEASUREMENT_ONLY_ATTENTION_IMPLS.items():
        if impl == attention_impl:
            return (
                f"attention_impl={attention_impl} {reason} and cannot be run by today's transformers: use "
                "attention_impl sdpa or eager"
            )
    return None


LIGER_PACKAGE = "liger_kernel"
"""The import name of Liger Kernel (``pip install -e ".[liger]"``; https://github.com/linkedin/Liger-Kernel)."""


def kernels_installed(kernels: str) -> bool:
    """True when the package ``kernels`` needs can be imported here; ``none`` needs none.

    Asked with ``importlib.util.find_spec``: nothing is imported.
    """
    return kernels == "none" or importlib.util.find_spec(LIGER_PACKAGE) is not None


def kernels_run_error(kernels: str, loss_impl: str, *, cpu: bool, installed: bool) -> str | None:
    """The reason the training core cannot run ``kernels``, or None (one rule for ``autotune launch`` and the core).

    Liger Kernel's kernels are Triton GPU kernels (CUDA, or ROCm with a ROCm Triton): they cannot run on the CPU,
    nor without the package. Its fused linear cross-entropy replaces the model's loss, so it cannot be combined
    with the core's own chunked loss (``loss_impl chunked``).
    ``cpu``: the launch runs on the CPU (``--cpu``, or no GPU visible); ``installed``: the package is importable.
    """
    if kernels == "none":
        return None
    if cpu:
        return f"kernels={kernels} runs Triton GPU kernels and cannot run on the CPU: --set kernels=none"
    if not installed:
        return f'kernels={kernels} needs the Liger Kernel package: pip install -e ".[liger]" (or --set kernels=none)'
    if loss_impl == "chunked":
        return (
            f"kernels={kernels} fuses the cross-entropy itself, which loss_impl=chunked also replaces: "
            "--set loss_impl=fp32-upcast or --set kernels=none"
        )
    return None


class TrainingSetting(FrozenModel):
    """One candidate setting: what the planner searches over and the plan records."""

    method: Method = Field(default="lora", description=DESCRIPTIONS["method"])
    micro_batch_size: int = Field(default=1, ge=1, le=4096, description=DESCRIPTIONS["micro_batch_size"])
    grad_accum: int = Field(default=1, ge=1, le=65536, description=DESCRIPTIONS["grad_accum"])
    grad_ckpt: bool = Field(default=True, description=DESCRIPTIONS["grad_ckpt"])
    compile: bool = Field(default=False, description=DESCRIPTIONS["compile"])
    sharding: Sharding = Field(default="none", description=DESCRIPTIONS["sharding"])
    optimizer: Optimizer = Field(default="adamw", description=DESCRIPTIONS["optimizer"])
    precision: Precision = Field(default="bf16", description=DESCRIPTIONS["precision"])
    lora_rank: int = Field(default=DEFAULT_LORA_RANK, ge=1, le=4096, description=DESCRIPTIONS["lora_rank"])
    lora_alpha: float = Field(default=DEFAULT_LORA_ALPHA, gt=0, description=DESCRIPTIONS["lora_alpha"])
    lora_dropout: float = Field(default=0.0, ge=0, lt=1, description=DESCRIPTIONS["lora_dropout"])
    adapter_dtype: AdapterDtype = Field(default="compute", description=DESCRIPTIONS["adapter_dtype"])
    lora_targets: tuple[str, ...] = Field(default=(ALL_LINEAR,), description=DESCRIPTIONS["lora_targets"])
    loss_impl: LossImpl = Field(default="fp32-upcast", description=DESCRIPTIONS["loss_impl"])
    attention_impl: AttentionImpl = Field(default="sdpa", description=DESCRIPTIONS["attention_impl"])
    grad_sync: GradSync = Field(default="last-micro-step", description=DESCRIPTIONS["grad_sync"])
    optimizer_in_backward: bool = Field(default=False, description=DESCRIPTIONS["optimizer_in_backward"])
    fp8: bool = Field(default=False, description=DESCRIPTIONS["fp8"])
    bf16_stochastic_rounding: bool = Field(default=False, description=DESCRIPTIONS["bf16_stochastic_rounding"])
    activation_offloading: bool = Field(default=False, description=DESCRIPTIONS["activation_offloading"])
    kernels: Kernels = Field(default="none", description=DESCRIPTIONS["kernels"])
    qlora_double_quant: bool = Field(default=True, description="NF4 double quantization of the constants.")
    unquantized_dtype: Literal["bf16", "fp32"] = Field(
        default="bf16",
        description="QLoRA: dtype of the parts left unquantized (embeddings, norms, lm_head).",
    )

    @field_validator("attention_impl", mode="before")
    @classmethod
    def _attention_alias(cls, value: object) -> object:
        return ATTENTION_ALIASES.get(value, value) if isinstance(value, str) else value

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _split_targets(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("lora_targets")
    @classmethod
    def _check_targets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("lora_targets is empty: give all-linear or module names such as q_proj,v_proj")
        if ALL_LINEAR in value and len(value) > 1:
            raise ValueError("lora_targets: all-linear cannot be combined with module names")
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> TrainingSetting:
        error = (
            combination_error(self.method, self.precision)
            or optimizer_in_backward_error(self.optimizer_in_backward, self.grad_accum, self.sharding)
            or stochastic_rounding_error(self.bf16_stochastic_rounding, self.precision, self.optimizer, self.sharding)
            or activation_offloading_error(
                self.activation_offloading,
                self.grad_ckpt,
                self.compile,
                self.sharding,
                full_mixed=self.method == "full" and self.precision.endswith("-mixed"),
            )
        )
        if error:
            raise ValueError(error)
        return self

    @property
    def uses_adapters(self) -> bool:
        """True for LoRA and QLoRA (only adapter weights are trained)."""
        return self.method in ("lora", "qlora")

    @property
    def offloads_to_cpu(self) -> bool:
        """True when optimizer state (and parameters) live in host RAM (:data:`OFFLOAD_SHARDINGS`)."""
        return self.sharding in OFFLOAD_SHARDINGS

    @property
    def uses_fsdp(self) -> bool:
        """True when PyTorch FSDP runs the setting (:data:`FSDP_SHARDINGS`)."""
        return self.sharding in FSDP_SHARDINGS

    @property
    def model_checkpointing(self) -> bool:
        """True when the model's own gradient checkpointing runs (transformers / peft switch it on).

        ``grad_ckpt`` under FSDP is FSDP's own activation checkpointing instead (the accelerate config's
        ``fsdp_activation_checkpointing``): transformers 5.23 refuses both at once
        (``Trainer.create_accelerator_and_postprocess``), and both would recompute each layer twice.
        """
        return self.grad_ckpt and not self.uses_fsdp

    @property
    def uses_deepspeed(self) -> bool:
        """True when DeepSpeed ZeRO runs the setting (:data:`ZERO_SHARDINGS`)."""
        return self.sharding in ZERO_SHARDINGS

    @property
    def shards_parameters(self) -> bool:
        """True when the weights are split over the ranks (:data:`PARAMETER_SHARDINGS`)."""
        return self.sharding in PARAMETER_SHARDINGS

    @property
    def shards_states(self) -> bool:
        """True when gradients and optimizer states are split over the ranks (ZeRO-2 and every parameter sharding)."""
        return self.shards_parameters or self.sharding == "zero2"

    def sequences_per_step(self, world_size: int) -> int:
        """Sequences one optimizer step consumes over ``world_size`` data-parallel ranks.

        micro_batch_size × grad_accum × world_size: the global batch (HF Trainer's
        ``total_train_batch_size``; DeepSpeed's ``train_batch_size``).
        """
        return self.micro_batch_size * self.grad_accum * world_size

    def short(self) -> str:
        """One-line human summary, e.g. 'lora r16 mbs 2 × ga 16, ckpt, fsdp, adamw, bf16'."""
        parts = [self.method + (f" r{self.lora_rank}" if self.uses_adapters else "")]
        parts.append(f"mbs {self.micro_batch_size} × ga {self.grad_accum}")
        parts.append("ckpt" if self.grad_ckpt else "no ckpt")
        if self.compile:
            parts.append("compile")
        parts.append(self.sharding + (" (sync every micro-step)" if self.grad_sync == "every-micro-step" else ""))
        parts.append(self.optimizer + (" in backward" if self.optimizer_in_backward else ""))
        parts.append(self.precision + (" stochastic rounding" if self.bf16_stochastic_rounding else ""))
        if self.activation_offloading:
            parts.append("activations offloaded")
        if self.loss_impl == "chunked":
            parts.append("chunked CE")
        if self.fp8:
            parts.append("fp8 linears")
        return ", ".join(parts)
