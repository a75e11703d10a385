"""What the user asks the planner for: model, hardware, workload, objective and forced choices."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from autotune.schemas._base import FrozenModel
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.objective import Objective
from autotune.schemas.setting import (
    ATTENTION_ALIASES,
    AdapterDtype,
    AttentionImpl,
    GradSync,
    Kernels,
    LossImpl,
    Method,
    Optimizer,
    Precision,
    Sharding,
    activation_offloading_error,
    combination_error,
    optimizer_in_backward_error,
    stochastic_rounding_error,
)
from autotune.schemas.workload import Workload

ADAPTER_ONLY_FIELDS = ("lora_rank", "lora_alpha", "lora_dropout", "adapter_dtype", "lora_targets")
"""Override fields that configure LoRA / QLoRA adapters only: refused with ``method: full`` (a full fine-tune has no
adapter; accepting one would plan and record a setting without it, silently); without a method they leave the
planner the adapter methods only."""


class Overrides(FrozenModel):
    """Choices the user fixed on the command line; None = let the planner choose."""

    method: Method | None = None
    micro_batch_size: int | None = Field(default=None, ge=1, le=4096)
    grad_accum: int | None = Field(default=None, ge=1, le=65536)
    grad_ckpt: bool | None = None
    compile: bool | None = None
    sharding: Sharding | None = None
    optimizer: Optimizer | None = None
    precision: Precision | None = None
    lora_rank: int | None = Field(default=None, ge=1, le=4096)
    lora_alpha: float | None = Field(default=None, gt=0)
    lora_dropout: float | None = Field(default=None, ge=0, lt=1)
    adapter_dtype: AdapterDtype | None = None
    kernels: Kernels | None = None
    lora_targets: tuple[str, ...] | None = None
    loss_impl: LossImpl | None = None
    grad_sync: GradSync | None = None
    optimizer_in_backward: bool | None = None
    fp8: bool | None = None
    bf16_stochastic_rounding: bool | None = None
    activation_offloading: bool | None = None
    attention_impl: AttentionImpl | None = None

    @field_validator("attention_impl", mode="before")
    @classmethod
    def _attention_alias(cls, value: object) -> object:
        return ATTENTION_ALIASES.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_combination(self) -> Overrides:
        error = combination_error(self.method, self.precision)
        if error:
            raise ValueError(error.replace("method=qlora", "--method qlora").replace("precision", "--precision"))
        error = optimizer_in_backward_error(self.optimizer_in_backward, self.grad_accum, self.sharding)
        if error:
            raise ValueError(error.replace("optimizer_in_backward", "--optimizer-in-backward"))
        error = stochastic_rounding_error(
            self.bf16_stochastic_rounding, self.precision, self.optimizer, self.sharding
        ) or activation_offloading_error(
            self.activation_offloading,
            self.grad_ckpt,
            self.compile,
            self.sharding,
            full_mixed=self.method == "full" and (self.precision or "").endswith("-mixed"),
        )
        if error:
            raise ValueError(_as_flags(error))
        adapter_options = self.adapter_options()
        if self.method == "full" and adapter_options:
            flags = ", ".join("--" + name.replace("_", "-") for name in adapter_options)
            raise ValueError(
                f"{flags} configure{'s' if len(adapter_options) == 1 else ''} LoRA adapters, which --method full "
                "does not train: drop it, or use --method lora or qlora"
            )
        return self

    def adapter_options(self) -> list[str]:
        """The fields of :data:`ADAPTER_ONLY_FIELDS` the user set: with none of them, the planner may choose full."""
        return [name for name in ADAPTER_ONLY_FIELDS if getattr(self, name) is not None]

    def forced(self) -> dict[str, object]:
        """The fields the user set, by name."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


def _as_flags(error: str) -> str:
    """A setting rule's message with the two levers' field names spelled as their command-line flags."""
    for name in ("bf16_stochastic_rounding", "activation_offloading"):
        error = error.replace(name, "--" + name.replace("_", "-"))
    return error


def grad_accum_error(global_batch_size: int, world: int, accum: int) -> str:
    """Why ``--grad-accum accum`` cannot split ``global_batch_size`` on ``world`` ranks, with the nearest valid values.

    Each rank takes ``global_batch_size / world`` sequences per optimizer step, in ``accum`` micro batches of whole
    sequences, so ``accum`` must divide them: the nearest divisors below and above ``accum``, and the nearest global
    batch sizes that ``accum × world`` divides, are named (the global batch's own rule gives its nearest values too).
    """
    per_rank = global_batch_size // world
    divisors = [value for value in range(1, per_rank + 1) if per_rank % value == 0]
    below = [value for value in divisors if value < accum][-1:]
    above = [value for value in divisors if value > accum][:1]
    step = accum * world
    batches = [value for value in (global_batch_size // step * step, (global_batch_size // step + 1) * step) if value]
    return (
        f"--grad-accum {accum} does not divide the {per_rank} sequences each of the {world} GPU(s) takes per step "
        f"(--global-batch-size {global_batch_size}): use --grad-accum {' or '.join(map(str, below + above))}, or "
        f"--global-batch-size {' or '.join(map(str, batches))}"
    )


class PlanRequest(FrozenModel):
    """Everything the planner needs; validated alone (stage 1) before feasibility (stage 2)."""

    model: ModelSpec
    model_source: str
    cluster: ClusterSpec
    workload: Workload
    objective: Objective = "quality"
    overrides: Overrides = Overrides()
    coefficients: CostCoefficients | None = None
    calibration_name: str = "seeds"
    global_batch_stated: bool = True
    """False when the user left the global batch at its default (``plan`` without ``--global-batch-size``): where
    nothing fits at it, the planner may choose a smaller one (:mod:`autotune.planner.batch_choice`). A stated global
    batch is never changed."""

    @model_validator(mode="after")
    def _check(self) -> PlanRequest:
        world = self.cluster.world_size
        micro = self.overrides.micro_batch_size
        accum = self.overrides.grad_accum
        if micro is not None and accum is not None and micro * accum * world != self.workload.global_batch_size:
            raise ValueError(
                f"--micro-batch-size {micro} × --grad-accum {accum} × {world} GPU(s) = {micro * accum * world} "
                f"≠ --global-batch-size {self.workload.global_batch_size}; drop one of them or make them agree"
            )
        per_rank, rest = divmod(self.workload.global_batch_size, world)
        if micro is not None and not rest and per_rank % micro:
            fixed = -(-per_rank // micro) * micro * world
            raise ValueError(
                f"--global-batch-size {self.workload.global_batch_size} is not divisible by --micro-batch-size "
                f"{micro} × {world} GPU(s): use --global-batch-size {fixed}, or a micro batch size that divides "
                f"{per_rank}"
            )
        if accum is not None and micro is None and not rest and per_rank % accum:
            raise ValueError(grad_accum_error(self.workload.global_batch_size, world, accum))
        if rest:
            nearest = [value for value in (per_rank * world, (per_rank + 1) * world) if value > 0]
            raise ValueError(
                f"--global-batch-size {self.workload.global_batch_size} is not a multiple of the "
                f"{world} GPU(s); each rank must get whole sequences: use --global-batch-size "
                f"{' or '.join(str(value) for value in nearest)}"
            )
        return self
