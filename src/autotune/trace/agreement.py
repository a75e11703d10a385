"""Compare the analytic memory model with the traced training step (``benchmarks/trace_agreement.py``).

Depth extrapolation: decoder layers of one model are identical (Gemma 2 alternates two kinds), so every
phase's live bytes at its peak are affine in the number of layers L once the peak sits at the same place
in the layer sequence. ``traced_peak_bytes`` traces the model at ``DEPTHS`` = (2, 4) layers with the real
widths, vocabulary and setting, and extrapolates each phase's peak linearly to the real L (``depth=None``
traces the full depth instead; ``check_extrapolation`` measures the extrapolation error against it).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from autotune.costmodel.memory import predict_memory
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.trace import TraceReport
from autotune.schemas.workload import Workload
from autotune.trace import TracedModel, build_key, build_traced_model, trace_training_step

DEPTHS = (2, 4)
"""Layer counts traced for the linear depth extrapolation (even: Gemma 2's two layer kinds alternate)."""


@dataclass(frozen=True)
class Agreement:
    """Analytic vs traced peak allocated bytes of one cell."""

    label: str
    predicted_bytes: float
    traced_bytes: float
    predicted_phase: str
    traced_phase: str

    @property
    def relative_error(self) -> float:
        """(analytic − trace) / trace."""
        return (self.predicted_bytes - self.traced_bytes) / self.traced_bytes


@dataclass
class BuildCache:
    """The last ``size`` built models (:class:`autotune.trace.TracedModel`), reused across cells.

    Reused across cells that differ only in micro batch, sequence length, loss or optimizer (what the step does, not
    what is built).
    """

    size: int = 2
    models: OrderedDict[tuple[str, tuple[object, ...]], TracedModel] = field(default_factory=OrderedDict)

    def get(self, spec: ModelSpec, setting: TrainingSetting) -> TracedModel:
        """The built model for ``spec`` and ``setting``'s build key, built on first use."""
        key = (spec.model_dump_json(), build_key(setting))
        model = self.models.pop(key, None) or build_traced_model(spec, setting)
        self.models[key] = model
        while len(self.models) > self.size:
            self.models.popitem(last=False)
        return model


def _phase_peaks(report: TraceReport) -> dict[str, int]:
    return {phase.name: phase.peak_cuda_bytes for phase in report.phases}


def traced_peak_bytes(
    spec: ModelSpec,
    setting: TrainingSetting,
    seq_len: int,
    cluster: ClusterSpec,
    extrapolate: bool = True,
    cache: BuildCache | None = None,
) -> tuple[float, str]:
    """Traced CUDA peak allocated bytes (and its phase) at the model's real depth.

    With ``extrapolate`` the model is traced at ``DEPTHS`` layers and each phase's peak extended linearly
    to ``spec.num_hidden_layers`` (module docstring); otherwise at full depth. ``cache`` reuses built models.
    """

    def trace(depth_spec: ModelSpec) -> TraceReport:
        built = cache.get(depth_spec, setting) if cache is not None else None
        return trace_training_step(depth_spec, setting, seq_len, cluster, built=built)

    if not extrapolate or spec.num_hidden_layers <= max(DEPTHS):
        report = trace(spec)
        return float(report.cuda_peak_allocated_bytes), report.peak_phase
    low, high = (trace(spec.model_copy(update={"num_hidden_layers": depth})) for depth in DEPTHS)
    low_peaks, high_peaks = _phase_peaks(low), _phase_peaks(high)
    per_layer = {name: (high_peaks[name] - low_peaks[name]) / (DEPTHS[1] - DEPTHS[0]) for name in high_peaks}
    extra = spec.num_hidden_layers - DEPTHS[1]
    peaks = {name: value + extra * per_layer[name] for name, value in high_peaks.items()}
    phase = max(peaks, key=lambda name: peaks[name])
    fixed = high.cuda_peak_allocated_bytes - max(high_peaks.values())  # workspaces + sharding change
    return peaks[phase] + fixed, phase


def compare(
    spec: ModelSpec,
    setting: TrainingSetting,
    seq_len: int,
    cluster: ClusterSpec,
    extrapolate: bool = True,
    cache: BuildCache | None = None,
) -> Agreement:
    """Analytic (``predict_memory`` with prior coefficients) vs traced peak allocated bytes for one cell."""
    workload = Workload(seq_len=seq_len, global_batch_size=setting.micro_batch_size * cluster.world_size)
    prediction = predict_memory(spec, setting, cluster, workload, CostCoefficients())
    traced, phase = traced_peak_bytes(spec, setting, seq_len, cluster, extrapolate, cache)
    label = f"{spec.key} {setting.short()} seq {seq_len}"
    return Agreement(label, prediction.peak_allocated_bytes, traced, prediction.peak_phase, phase)
