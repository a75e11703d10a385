"""Measurements (seed tables, user run reports) and the calibration coefficients fitted to them."""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic.json_schema import JsonDict

from autotune.schemas._base import StrictModel
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.time_correction import LocalTimeCorrection
from autotune.schemas.workload import Workload

MemoryKind = Literal["allocated", "reserved", "nvidia-smi", "unknown"]


MATMUL_EFFICIENCY_PRIOR: dict[str, float] = {
    "ampere": 0.85,
    "hopper": 0.80,
    "ada": 0.80,
    "blackwell": 0.75,
    "default": 0.75,
}
"""Large-GEMM efficiency priors per architecture generation: the "maximum achievable matmul FLOPS" measured
with large bf16 GEMMs (stas00/ml-engineering, compute/accelerator/README.md: A100 SXM ~86 %, H100 SXM ~80 %
of the dense peak); Ada and Blackwell by analogy (no public figure), 'default' for any other GPU."""

ATTENTION_EFFICIENCY_PRIOR: dict[str, float] = {"ampere": 0.6, "hopper": 0.4, "default": 0.45}
"""Attention kernel efficiency priors: FlashAttention-2 forward+backward reaches 50–70 % of the A100 peak
(Dao 2023, fig. 4–6); on H100 it reaches 35–50 % (FlashAttention-3 paper, Shah et al. 2024, fig. 1)."""


def source_table(source: str) -> str:
    """The table a measurement comes from: its ``source`` up to the first ',' or ':'.

    That is the seed file name, or the development data file; one table = one training stack.
    """
    return re.split(r"[,:]", source, maxsplit=1)[0].strip()


USER_STACK = "your runs"
"""The stack name a recalibration (``autotune calibrate``) gives the user's rows: they are one stack, and the
calibration's reference (``stack_time_factor`` 1)."""


TIME_SCALE_MIN = 0.1
TIME_SCALE_MAX = 10.0
"""Bounds of ``time_scale``: stacks measured so far differ from the core by 0.5–2.5× (seed 001's trainer 2.2×,
``time_fit``); a factor outside 10× either way says the rows measure something else (a time per step given as per
micro-step, another GPU), not a slower stack."""


BANDWIDTH_EFFICIENCY_MIN = 0.5
BANDWIDTH_EFFICIENCY_MAX = 0.95
"""Bounds of ``bandwidth_efficiency``: vectorised element-wise kernels stream at 70–90 % of DRAM bandwidth (NVIDIA
BabelStream / STREAM results on A100 and H100; Deakin et al. 2018), reductions (softmax, norms) somewhat less, and
no streaming kernel reaches the datasheet figure; below half, the number would stand for costs that are not
memory traffic (it did: 0.24 before the fit had per-stack factors, ``time_fit``)."""


MAX_MEASURED_MEMORY_GIB = 1024.0
"""Upper bound of a measured memory figure per GPU, GiB: well above the largest GPU memory shipping today
(288 GB: NVIDIA B300, AMD MI355X datasheets), so a larger value is a unit slip (MiB, bytes) or a typo. The
calibration also checks each row against its own GPU's memory (``autotune.calibration.cases.check_measured_ranges``)."""

MIN_MEASURED_STEP_S = 1e-4
MAX_MEASURED_STEP_S = 86_400.0
"""Bounds of a measured micro-step or optimizer step, seconds. Below 100 µs: one forward + backward launches
dozens of kernels at ~10 µs of launch cost each (the ``kernel_launch_s`` prior), so no training step is that
short. Above one day: no micro batch takes that long on a GPU (the longest seed row: 300 s per optimizer step);
1e30 is a typo, and fitting it would move every coefficient."""

MAX_MEASURED_RUN_S = 365 * 86_400.0
"""Upper bound of a measured whole-run wall time, seconds: one year (the longest seed row ran 40 hours)."""

MeasuredMemoryGiB = Annotated[float, Field(gt=0, le=MAX_MEASURED_MEMORY_GIB)]
"""A measured memory figure per GPU, GiB, in its range (every calibration input: YAML, CSV, run reports)."""
MeasuredStepS = Annotated[float, Field(ge=MIN_MEASURED_STEP_S, le=MAX_MEASURED_STEP_S)]
"""A measured micro-step or optimizer-step time, seconds, in its range."""

MAX_NODE_GB_PER_S = 10_000.0
"""Upper bound of a node's network bandwidth per direction, GB/s: more than ten times the fastest node fabric
today (8 × 800 Gb/s NICs = 800 GB/s)."""

LORA_TARGET_CPU_S_MIN = 1e-5
LORA_TARGET_CPU_S_MAX = 2e-3
"""Bounds of the per-call CPU costs (``lora_target_cpu_s``, ``qlora_linear_cpu_s``): at least one Python module
call (~10 µs), at most 2 ms (twenty times the prior: beyond it the number would stand for something other than
Python per call)."""

ZERO3_MODULE_FETCH_S_MIN = 1e-5
ZERO3_MODULE_FETCH_S_MAX = 1e-2
"""Bounds of ``zero3_module_fetch_s``: at least one Python hook call (~10 µs), at most 10 ms (thirty times the prior:
beyond it the number would stand for something other than the hooks' gather and wait)."""

FITTED: JsonDict = {"fitted": True}
"""``json_schema_extra`` of a coefficient that a fit moves (``autotune.calibration.time_fit`` / ``fit`` /
``recalibrate``); its default is its prior, its ``ge`` / ``le`` the bounds the fit keeps to."""

PRIOR: JsonDict = {"fitted": False}
"""``json_schema_extra`` of a stated prior that no fit moves, kept in the schema because calibration files hold it
(the rule: ``autotune.costmodel.priors``)."""

RETIRED_TIME_FACTORS = ("adapter_time_factor", "qlora_time_factor")
"""Calibration keys of the fitted LoRA / QLoRA multipliers that counted adapter and dequantization work replaced
(issue 18). A file that still holds them at 1 (what every fit wrote) loads; another value is refused."""


class Measurement(StrictModel):
    """One measured run (a seed table row or a user run report), with its conditions.

    ``micro_step_time_s`` is one forward+backward of one micro batch; ``run_time_s`` is the wall time
    of the whole run as stated by the source (then ``workload`` gives its size). A row that ran out of
    memory has ``oom: true`` and no memory or time.
    """

    id: str = Field(description="Unique id, e.g. '001-h100-llama3.1-8b-lora'.")
    source: str = Field(description="Seed file and table/row, or run directory.")
    model: str = Field(description="Model catalog key.")
    gpu: str = Field(description="GPU catalog key.")
    num_gpus_per_node: int = Field(default=1, ge=1, le=64, description="GPUs on each node (as ClusterChoice).")
    num_nodes: int = Field(default=1, ge=1, le=4096, description="Nodes (as ClusterChoice).")
    setting: TrainingSetting
    workload: Workload
    oom: bool = False
    peak_memory_gib: MeasuredMemoryGiB | None = Field(default=None, description="Measured peak, GiB per GPU.")
    memory_kind: MemoryKind = Field(default="unknown", description="What the memory figure measures.")
    micro_step_time_s: MeasuredStepS | None = Field(
        default=None, description="One forward + backward of one micro batch, seconds."
    )
    step_time_s: MeasuredStepS | None = Field(default=None, description="One optimizer step, seconds.")
    run_time_s: float | None = Field(
        default=None, gt=0, le=MAX_MEASURED_RUN_S, description="Wall time of the whole stated run, seconds."
    )
    weights_memory_gib: MeasuredMemoryGiB | None = Field(default=None, description="Memory after model load, GiB.")
    inter_node_gb_per_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_NODE_GB_PER_S,
        description="Network bandwidth per node per direction, GB/s (multi-node rows).",
    )
    unknown_tokens: bool = Field(
        default=False,
        description="Samples are unpacked and shorter than seq_len with no stated mean length: the tokens per "
        "step are unknown, so the row's times cannot calibrate per-token cost (memory may still be used).",
    )
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Measurement:
        if self.oom and (self.peak_memory_gib is not None or self.micro_step_time_s is not None):
            raise ValueError(f"{self.id}: an OOM row has no peak memory or time")
        return self

    @property
    def world_size(self) -> int:
        """Total GPUs (= data-parallel ranks; autotune does no tensor or pipeline parallelism)."""
        return self.num_gpus_per_node * self.num_nodes


class MeasurementSet(StrictModel):
    """A file of measurements from one source, with the conditions it states, copied verbatim."""

    schema_version: Literal[1] = 1
    name: str
    source: str = Field(description="Where the table comes from (seed file, URL).")
    conditions: str = Field(description="The source's stated conditions, verbatim, plus CONDITIONS.md facts.")
    measurements: list[Measurement]


class CostCoefficients(StrictModel):
    """The cost-model coefficients that physics does not give: the fitted ones and the priors calibration files hold.

    Every other quantity (bytes per parameter, FLOPs per token, bandwidths, peaks) is derived;
    see docs/cost-model.md. Defaults are the physics priors used before any fit. A field a fit moves says
    ``fitted: true`` in its JSON schema extra (:data:`FITTED_FIELDS`), one no fit moves ``fitted: false``
    (:data:`PRIOR_FIELDS`); stated priors outside the calibration files live in ``autotune.costmodel.priors``.
    """

    @model_validator(mode="before")
    @classmethod
    def _retired_factors(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        kept = dict(data)
        for key in RETIRED_TIME_FACTORS:
            if key in kept:
                value = kept.pop(key)
                if value != 1 and value != 1.0:
                    raise ValueError(
                        f"{key} {value} is no longer used (LoRA / QLoRA time is counted per call): recalibrate "
                        "with autotune calibrate, or remove the key to use the counted terms"
                    )
        return kept

    schema_version: Literal[1] = 1
    name: str = Field(default="prior", description="Calibration name (file name without .yaml).")
    source: str = Field(default="physics priors, not fitted", description="Provenance: data, date, command.")
    matmul_efficiency: dict[str, float] = Field(
        json_schema_extra=FITTED,
        default_factory=lambda: dict(MATMUL_EFFICIENCY_PRIOR),
        description="GPU key or architecture generation ('ampere', 'hopper', …) → fraction of the dense datasheet "
        "peak that a large, well-shaped GEMM reaches (shape effects are modelled separately); 'default' for others.",
    )
    attention_efficiency: dict[str, float] = Field(
        json_schema_extra=FITTED,
        default_factory=lambda: dict(ATTENTION_EFFICIENCY_PRIOR),
        description="GPU key or architecture generation → fraction of the dense peak the attention kernels reach.",
    )
    bandwidth_efficiency: float = Field(
        json_schema_extra=FITTED,
        default=0.8,
        ge=BANDWIDTH_EFFICIENCY_MIN,
        le=BANDWIDTH_EFFICIENCY_MAX,
        description="Fraction of DRAM bandwidth element-wise kernels reach (STREAM-like); bounded to what such "
        "kernels reach on a GPU (BANDWIDTH_EFFICIENCY_MIN/MAX).",
    )
    lora_target_cpu_s: float = Field(
        json_schema_extra=FITTED,
        default=3e-4,
        ge=LORA_TARGET_CPU_S_MIN,
        le=LORA_TARGET_CPU_S_MAX,
        description="CPU seconds peft's Python spends per LoRA target per forward pass (and recompute) beyond its "
        "kernels' dispatch: the lora.Linear module call, its adapter loop, the dropout / A / B module calls. It "
        "counts only where a pass is dispatch-bound (small micro batches). Prior 0.3 ms, wide (time_fit: 0.1-1 ms "
        "within one σ; no public figure), bounded LORA_TARGET_CPU_S_MIN..MAX; fitted on the runs with adapters.",
    )
    qlora_linear_cpu_s: float = Field(
        json_schema_extra=FITTED,
        default=3e-4,
        ge=LORA_TARGET_CPU_S_MIN,
        le=LORA_TARGET_CPU_S_MAX,
        description="CPU seconds bitsandbytes' Python spends per Linear4bit per pass (forward, recompute, backward: "
        "Linear4bit.forward, the MatMul4Bit autograd function, the quant state and the dequantization custom "
        "ops) beyond its kernels' dispatch. Prior 0.3 ms, wide, same bounds; fitted on the QLoRA runs.",
    )
    kernel_launch_s: float = Field(
        json_schema_extra=PRIOR,
        default=1.0e-5,
        gt=0,
        description="CPU seconds to dispatch one eager op (Python + dispatcher + launch); prior 10 µs (PyTorch "
        "eager overhead, Ansel et al. 2024, PyTorch 2 paper §2). Prior: no fit moves it.",
    )
    micro_step_overhead_s: float = Field(
        json_schema_extra=PRIOR,
        default=3e-3,
        ge=0,
        description="Per-micro-step trainer overhead (batch to device, hooks, autocast), s. Prior: no fit moves it.",
    )
    step_overhead_s: float = Field(
        json_schema_extra=PRIOR,
        default=1e-2,
        ge=0,
        description="Per-optimizer-step fixed cost (scheduler, zero_grad, logging, loader), s. Prior: no fit moves it.",
    )
    zero3_module_fetch_s: float = Field(
        json_schema_extra=FITTED,
        default=3e-4,
        ge=ZERO3_MODULE_FETCH_S_MIN,
        le=ZERO3_MODULE_FETCH_S_MAX,
        description="CPU seconds DeepSpeed ZeRO-3 spends per submodule with parameters per pass (forward, "
        "recomputed forward, backward) in its fetch / release hooks (deepspeed/runtime/zero/parameter_offload.py "
        "registers them on every submodule; partitioned_param_coordinator.fetch_sub_module gathers, waits for and "
        "releases the module's partitions, copying them in from host memory under offload_param). The hooks "
        "wait for the gather, so the GPU cannot hide them. Prior 0.3 ms, bounded 10 µs–10 ms; fitted on the "
        "ZeRO-3 rows when a fit has them.",
    )
    collective_latency_s: float = Field(
        json_schema_extra=PRIOR,
        default=2.5e-5,
        gt=0,
        description="Fixed latency of one NCCL collective (small-message ring latency), s. Prior: no fit moves it.",
    )
    collective_bandwidth_efficiency: float = Field(
        json_schema_extra=PRIOR,
        default=0.75,
        gt=0,
        le=1,
        description="NCCL bus bandwidth / link bandwidth (nccl-tests busbw). Prior: no fit moves it.",
    )
    allocator_overhead_fraction: float = Field(
        json_schema_extra=FITTED,
        default=0.05,
        ge=0,
        description="reserved = allocated × (1 + this): caching-allocator fragmentation, which a CPU trace cannot "
        "see. Prior 0.05 (PyTorch CUDA semantics notes: blocks are split and cached per size class); fitted to the "
        "rows that measured reserved memory.",
    )
    host_link_efficiency: float = Field(
        json_schema_extra=PRIOR,
        default=0.34,
        gt=0,
        le=1,
        description="Fraction of the host link's datasheet bandwidth that offload's weight streaming reaches. "
        "Measured on the core: Llama-3-8B LoRA under FSDP CPU offload on one H200 (PCIe 5.0 x16, 63 GB/s) streamed "
        "2 × 16 GB per micro-step in 1.54 s; 0.34 reproduces that micro-step under costmodel.offload's overlap rule "
        "(0.40 if no copy overlapped compute), where CUDA's bandwidthTest reaches ~0.8 with one large pinned copy "
        "(profiles/measurements/autotune-core-h200). A stated prior: no fit moves it; a calibration file may set a "
        "machine's own figure.",
    )
    cpu_adam_params_per_s: float = Field(
        json_schema_extra=FITTED,
        default=1e9,
        gt=0,
        description="Parameters per second the CPU Adam of one node updates under offload: the ranks of a node share "
        "its cores and DRAM bandwidth, so each rank's step takes (its parameters × ranks per node) / this rate.",
    )
    compile_speedup: float = Field(
        json_schema_extra=PRIOR,
        default=0.5,
        ge=0,
        lt=1,
        description="Fraction of element-wise traffic and kernel launches torch.compile removes by fusion. Prior: no "
        "fit moves it.",
    )
    time_scale: float = Field(
        json_schema_extra=FITTED,
        default=1.0,
        ge=TIME_SCALE_MIN,
        le=TIME_SCALE_MAX,
        description="The calibrated stack's speed: every predicted micro-step and optimizer-step time (each term) is "
        "multiplied by it. 1 in the shipped fit (it describes the project's own core); `autotune calibrate` fits it "
        "first from the user's rows (calibration/stack_fit.py): their stack over the core, one factor no setting "
        "explains. Bounded to [0.1, 10].",
    )
    stack_time_factor: dict[str, float] = Field(
        json_schema_extra=FITTED,
        default_factory=dict,
        description="Diagnostic, not used to predict: source table → how much slower than these coefficients "
        "that source's training stack ran (≥ 1; the fastest stack in the fit is 1), fitted jointly (time_fit).",
    )
    memory_error_band: dict[str, float] = Field(
        json_schema_extra=FITTED,
        default_factory=lambda: {"default": 0.15},
        description="Family → relative ± band on peak memory (from held-out residuals).",
    )
    memory_headroom_band: dict[str, float] = Field(
        json_schema_extra=FITTED,
        default_factory=lambda: {"default": 0.15},
        description="Family → one-sided band: 90th percentile of under-prediction, relative to the modelled "
        "part; the planner's memory headroom.",
    )
    time_error_band: dict[str, float] = Field(
        json_schema_extra=FITTED,
        default_factory=lambda: {"default": 0.35},
        description="Family → relative ± band on times (from held-out residuals).",
    )
    local_time_correction: LocalTimeCorrection | None = Field(
        json_schema_extra=FITTED,
        default=None,
        description="What `autotune calibrate` learned where your rows lie (schemas/time_correction.py): times near "
        "them are corrected in full, the correction fades away from them and the time band widens with the "
        "distance. None: no correction, the family bands above.",
    )


def _fields_marked(fitted: bool) -> tuple[str, ...]:
    return tuple(
        name
        for name, info in CostCoefficients.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("fitted") is fitted
    )


FITTED_FIELDS = _fields_marked(True)
"""The coefficients a fit moves (marked ``FITTED``)."""

PRIOR_FIELDS = _fields_marked(False)
"""The coefficients no fit moves (marked ``PRIOR``): stated priors that calibration files hold."""


def field_bounds(name: str) -> tuple[float, float]:
    """Return the (lower, upper) bounds of a numeric ``CostCoefficients`` field: the bounds a fit keeps to.

    Read from the field's ``ge`` / ``gt`` / ``le`` / ``lt``; ``-inf`` / ``inf`` where it has none.
    """
    lower, upper = -math.inf, math.inf
    for item in CostCoefficients.model_fields[name].metadata:
        for attribute in ("ge", "gt"):
            if getattr(item, attribute, None) is not None:
                lower = float(getattr(item, attribute))
        for attribute in ("le", "lt"):
            if getattr(item, attribute, None) is not None:
                upper = float(getattr(item, attribute))
    return lower, upper
