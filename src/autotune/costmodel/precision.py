"""Bytes per element that each setting implies: weights, gradients, optimizer states, activations.

Sources: PyTorch AMP semantics (fp32 parameters, autocast runs matmuls in 16 bits); torchtune's pure bf16
recipe (seed 002: "all activations, gradients and optimizer states are in bfloat16"); peft's
``autocast_adapter_dtype=True`` (LoRA adapter weights upcast to fp32); DeepSpeed's bf16/fp16 engines
keep fp32 master weights inside the optimizer (Rajbhandari et al. 2020, ZeRO, section 3: 16 bytes per
parameter = 2 (fp16 params) + 2 (fp16 grads) + 12 (fp32 params, momentum, variance)); bitsandbytes
8-bit optimizers store each Adam moment in 1 byte plus one fp32 scale per 256-element block
(Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", section 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.schemas.hardware import GpuSpec
from autotune.schemas.setting import TrainingSetting
from autotune.units import BYTES_PER_DTYPE

EIGHT_BIT_BLOCK_SIZE = 256
"""Block size of bitsandbytes' block-wise 8-bit optimizer states (Dettmers et al. 2022, section 2)."""

MASK_BYTES = 1.0
"""Bytes per element of a dropout mask: CUDA's ``native_dropout`` saves a bool mask for backward."""


@dataclass(frozen=True)
class DtypeBytes:
    """Bytes per element implied by a setting.

    Attributes:
        weight_bytes: per trained or frozen base parameter as held on the GPU (before quantization).
        grad_bytes: per trainable parameter gradient.
        optimizer_bytes: per trainable parameter for all optimizer state (incl. a separate fp32 master copy).
        optimizer_temp_bytes: per trainable parameter for the optimizer step's temporary (torch foreach
            AdamW allocates one moment-sized buffer for ``sqrt(v)``; fused / 8-bit / DeepSpeed kernels none, nor
            torchao's stochastically rounded AdamW, one compiled kernel per parameter: ``torchao/optim/adam.py``).
        compute_bytes: matmul inputs/outputs (bf16/fp16 = 2, fp32 = 4).
        residual_bytes: the residual stream between layers (fp32 under AMP with fp32 weights, or when QLoRA
            keeps the unquantized embeddings/norms in fp32 without autocast).
        compute_dtype: 'bf16', 'fp16' or 'fp32' — which tensor-core rate matmuls run at.
        autocast: True when autocast inserts casts (AMP).
        adapter_bytes: per LoRA adapter element (``TrainingSetting.adapter_dtype``): 4 for fp32 adapters (peft's
            ``autocast_adapter_dtype=True``, or an fp32 run), else the base weights' 16-bit dtype (peft
            ``autocast_adapter_dtype=False`` leaves the adapters in the dtype of the layer they wrap).
    """

    weight_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    optimizer_temp_bytes: float
    compute_bytes: float
    residual_bytes: float
    compute_dtype: str
    autocast: bool
    adapter_bytes: float


def dtype_bytes(setting: TrainingSetting, gpu: GpuSpec) -> DtypeBytes:
    """Per-element bytes for a setting on a GPU.

    Full fine-tuning: ``bf16`` = pure bf16 (2/2/4 bytes for weights/grads/AdamW states);
    ``*-mixed`` = fp32 parameters with autocast (4/4/8); ``fp32`` = 4/4/8. DeepSpeed ZeRO with a
    16-bit precision holds 16-bit parameters and gradients and 12 bytes of fp32 optimizer state
    (master copy + two moments). Adapter methods train adapters on a 16-bit base: fp32 (4/4/8, peft's default
    ``autocast_adapter_dtype=True``) or, with ``adapter_dtype`` compute, in the compute dtype (2/2/4: torch AdamW
    keeps its moments in the parameter's dtype).
    """
    compute_dtype = "fp32"
    if setting.precision in ("bf16", "bf16-mixed"):
        compute_dtype = "bf16" if gpu.supports_bf16 else "fp16"
    elif setting.precision == "fp16-mixed":
        compute_dtype = "fp16"
    compute_bytes = BYTES_PER_DTYPE[compute_dtype]
    deepspeed = setting.uses_deepspeed
    # DeepSpeed's bf16/fp16 engine casts the model to 16 bits and keeps fp32 master weights in the
    # optimizer: no autocast. torch AMP ("*-mixed" without DeepSpeed) keeps fp32 weights and autocasts.
    autocast = setting.precision.endswith("-mixed") and not deepspeed

    adapter_bytes = 4.0 if setting.adapter_dtype == "fp32" or setting.precision == "fp32" else compute_bytes
    if setting.uses_adapters:
        # the base in 16 bits (fp32 runs: fp32); gradients and AdamW moments in the adapters' dtype
        weight_bytes = 4.0 if setting.precision == "fp32" else 2.0
        grad_bytes, moment_bytes = adapter_bytes, adapter_bytes
    elif deepspeed and setting.precision != "fp32":
        weight_bytes, grad_bytes, moment_bytes = 2.0, 2.0, 4.0
    elif setting.precision == "bf16":
        weight_bytes, grad_bytes, moment_bytes = 2.0, 2.0, 2.0
    else:
        weight_bytes, grad_bytes, moment_bytes = 4.0, 4.0, 4.0

    optimizer_bytes, temp_bytes = _optimizer_bytes(setting, moment_bytes, deepspeed)
    residual_bytes = _residual_bytes(setting, compute_bytes, autocast)
    return DtypeBytes(
        weight_bytes=weight_bytes,
        grad_bytes=grad_bytes,
        optimizer_bytes=optimizer_bytes,
        optimizer_temp_bytes=temp_bytes,
        compute_bytes=compute_bytes,
        residual_bytes=residual_bytes,
        compute_dtype=compute_dtype,
        autocast=autocast,
        adapter_bytes=adapter_bytes,
    )


def _optimizer_bytes(setting: TrainingSetting, moment_bytes: float, deepspeed: bool) -> tuple[float, float]:
    """(optimizer state, optimizer step temporary) bytes per trainable parameter (:func:`dtype_bytes`)."""
    if setting.optimizer == "adamw":
        optimizer_bytes = 2 * moment_bytes
        # torchao's stochastically rounded AdamW fuses each parameter's update into one compiled kernel: no temporary
        temp_bytes = 0.0 if deepspeed or setting.bf16_stochastic_rounding else moment_bytes
    else:
        optimizer_bytes = 2 * (1.0 + 4.0 / EIGHT_BIT_BLOCK_SIZE)
        temp_bytes = 0.0
    if deepspeed and not setting.uses_adapters and setting.precision != "fp32":
        optimizer_bytes += 4.0  # fp32 master copy kept by the DeepSpeed optimizer
    return optimizer_bytes, temp_bytes


def _residual_bytes(setting: TrainingSetting, compute_bytes: float, autocast: bool) -> float:
    """Bytes per element of the residual stream and stored activations (:func:`dtype_bytes`)."""
    residual_bytes = compute_bytes
    # FSDP casts the gathered weights to the 16-bit dtype (accelerate's FullyShardedDataParallelPlugin
    # .set_mixed_precision: MixedPrecision(param_dtype = reduce_dtype = buffer_dtype = bf16/fp16); the HF Trainer's
    # --fsdp --bf16 and Composer's amp_bf16 FSDP do the same): embeddings, residual stream and stored activations
    # are 16-bit although the sharded master weights are fp32.
    fsdp_16bit = setting.uses_fsdp and setting.precision.endswith("-mixed")
    if (autocast and not setting.uses_adapters and not fsdp_16bit) or setting.precision == "fp32":
        residual_bytes = 4.0
    if setting.method == "qlora" and setting.unquantized_dtype == "fp32" and not autocast:
        residual_bytes = 4.0
    return residual_bytes
