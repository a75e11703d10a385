"""What backs each prediction: its label, its band and the MFU cap (``profiles/evidence.yaml``).

Each GPU × method × sharding class is one of:
  * ``core``: our training core ran it (autotune-core-h100 / -h200); the band is the family's, fitted on those rows;
  * ``public``: a public stack's timed rows measure it (llm-foundry, seed 001, seed 003); the plan predicts our core,
    and the note gives that stack's fitted time factor (``CostCoefficients.stack_time_factor``);
  * ``extrapolated``: no timed run: the datasheet peaks and the generation's fitted efficiencies; the band is widened
    by :data:`EXTRAPOLATION_BAND_WIDENING`.

MFU cap: unless our core ran the card, a prediction's MFU is held at the best public measurement of its architecture
generation × (1 + :data:`MFU_CAP_MARGIN`); a generation with no public figure takes the lowest cap of those with one
(nothing shows an unmeasured architecture doing better). No public LoRA / QLoRA MFU above the full fine-tuning figure
exists in the sources: their FLOPs run on the same GEMM shapes, so one cap per generation serves every method. A held
prediction's step is stretched by MFU / cap (the term :data:`MFU_CAP_TERM` in the breakdown).

CPU offload: the host-link efficiency (``host_link_efficiency`` 0.34) is one row's evidence (Llama-3-8B LoRA under
FSDP CPU offload on one H200, PCIe 5.0 host: measurements/autotune-core-h200); DeepSpeed's tracker reports
ZeRO-Offload copies that do not overlap compute (microsoft/DeepSpeed#3054, #2998, #6834), so ZeRO-3 offload and
hosts slower than PCIe 5.0 get :data:`OFFLOAD_BAND_WIDENING` more band.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from autotune.costmodel.fp8_time import FP8_BAND_WIDENING, FP8_PUBLIC_E2E_SPEEDUP, FP8_PUBLIC_GENERATIONS
from autotune.profiles.shipped_yaml import load_shipped
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.estimate import Estimate
from autotune.schemas.evidence import EvidenceTable, ShardingClass
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.setting import TrainingSetting

Label = Literal["core", "public", "extrapolated"]

EXTRAPOLATION_BAND_WIDENING = 0.5
"""Added to the family's time band when no timed run backs the GPU × method × sharding class: the largest held-out
time MAPE of one GPU in docs/cost-model.md §7.1 (leave-one-GPU-out, rtx-pro-6000 59.2 %, rounded down). A debt: a
card measured by our core or a public stack replaces it with that card's residuals."""

MFU_CAP_MARGIN = 0.05
"""Relative margin over the best public MFU of a generation before a prediction is held (5 %: the in-sample time
MAPE of the llm-foundry rows the caps come from is 7.6 %, docs/cost-model.md §7.0)."""

OFFLOAD_BAND_WIDENING = 0.5
"""Added to the time band of ZeRO-3 offload, and of any offload on a host link slower than PCIe 5.0: the host-link
efficiency was fitted on one FSDP-offload row on a PCIe 5.0 host (module docstring). A debt until such a run is
measured."""

PCIE5_HOST_LINK_GB_PER_S = 63.0
"""PCIe 5.0 x16 per direction (the host of the one offload row), GB/s."""

MFU_CAP_TERM = "held to the public mfu cap"
"""The breakdown term of the seconds a held prediction adds (the terms still add up to the step)."""

EVIDENCE_FILE = "evidence.yaml"

LABEL_WORDS: dict[str, str] = {
    "core": "measured with our core",
    "public": "measured by a public stack",
    "extrapolated": "extrapolated from the datasheet",
}
"""How each label reads in a plan."""


@functools.cache
def evidence_table() -> EvidenceTable:
    """The shipped evidence table (cached; ``ValueError`` if malformed: a packaging bug)."""
    return load_shipped(EVIDENCE_FILE, EvidenceTable, "evidence")


def sharding_class(setting: TrainingSetting) -> ShardingClass:
    """'offload' (CPU offload), 'sharded' (several ranks: ddp, zero2, zero3, fsdp) or 'single'."""
    if setting.offloads_to_cpu:
        return "offload"
    return "single" if setting.sharding == "none" else "sharded"


@dataclass(frozen=True)
class Evidence:
    """What backs one prediction.

    Attributes:
        label: 'core', 'public' or 'extrapolated'.
        note: one line naming the runs (or their absence) and, for a public stack, its time factor.
        band_widening: added to the family's time band (fraction).
        mfu_cap: the MFU a prediction is held at; None when our core ran the card.
        cap_source: the public run behind ``mfu_cap``.
    """

    label: Label
    note: str
    band_widening: float
    mfu_cap: float | None
    cap_source: str


def mfu_cap(gpu: GpuSpec) -> tuple[float, str] | None:
    """(cap, source) for ``gpu``; None when our core ran the card.

    The cap is its generation's best public MFU × (1 + margin), or the lowest such cap for a generation with none.
    """
    table = evidence_table()
    if any(runs.gpu == gpu.key for runs in table.core):
        return None
    caps = {cap.generation: cap for cap in table.mfu_caps}
    cap = caps.get(gpu.generation) or min(table.mfu_caps, key=lambda c: c.mfu)
    origin = "" if gpu.generation in caps else f"no public MFU for {gpu.generation}: the lowest generation's, "
    return cap.mfu * (1 + MFU_CAP_MARGIN), f"{origin}{cap.source} + {MFU_CAP_MARGIN:.0%}"


def evidence_for(gpu: GpuSpec, setting: TrainingSetting, coefficients: CostCoefficients) -> Evidence:
    """The :class:`Evidence` of ``setting`` on ``gpu`` (module docstring); an FP8 setting's is :func:`fp8_evidence`."""
    evidence = _evidence_bf16(gpu, setting, coefficients)
    return fp8_evidence(evidence, gpu) if setting.fp8 else evidence


def fp8_evidence(evidence: Evidence, gpu: GpuSpec) -> Evidence:
    """An FP8 setting's evidence: 'public', its band widened, its MFU cap raised by the public FP8 gain.

    'public': torchao's figures (``costmodel.fp8_time``), our core has not timed FP8 ('extrapolated' on a generation
    without them, ``FP8_PUBLIC_GENERATIONS``); the band + ``FP8_BAND_WIDENING``; the MFU cap ×
    ``FP8_PUBLIC_E2E_SPEEDUP``.
    """
    cap = evidence.mfu_cap * FP8_PUBLIC_E2E_SPEEDUP if evidence.mfu_cap is not None else None
    label: Label = "public" if gpu.generation in FP8_PUBLIC_GENERATIONS else "extrapolated"
    figures = "torchao's float8 figures" if label == "public" else "torchao's H100 float8 figures, extrapolated"
    note = (
        f"{LABEL_WORDS[label]}: FP8 linears priced from {figures} to {gpu.generation} (not measured by our core), band "
        f"+{FP8_BAND_WIDENING:.0%}; the rest: {evidence.note}"
    )
    return Evidence(label, note, evidence.band_widening + FP8_BAND_WIDENING, cap, evidence.cap_source)


def _evidence_bf16(gpu: GpuSpec, setting: TrainingSetting, coefficients: CostCoefficients) -> Evidence:
    table, kind = evidence_table(), sharding_class(setting)
    what = f"{setting.method} / {kind}"
    cap = mfu_cap(gpu)
    cap_value, cap_source = cap if cap is not None else (None, "")
    offload, offload_text = offload_widening(gpu, setting), offload_note(gpu, setting)
    core = next((runs for runs in table.core if runs.gpu == gpu.key), None)
    if core is not None and kind in core.runs.get(setting.method, ()):
        note = f"{LABEL_WORDS['core']}: {what} on {gpu.key} ({core.source}){offload_text}"
        return Evidence("core", note, offload, None, "")
    public = next((p for p in table.public if (p.gpu, p.method, p.sharding) == (gpu.key, setting.method, kind)), None)
    if public is not None:
        factor = coefficients.stack_time_factor.get(public.stack)
        ran = f", which ran {factor:.2f}× our core's time" if factor else ""
        stack = table.stacks.get(public.stack, public.stack)
        note = f"{LABEL_WORDS['public']}: {what} on {gpu.key} by {stack}{ran}{offload_text}"
        return Evidence("public", note, offload, cap_value, cap_source)
    widening = EXTRAPOLATION_BAND_WIDENING + offload
    note = f"{LABEL_WORDS['extrapolated']}: no timed run of {what} on {gpu.key}; band widened by ±{widening:.0%}"
    if core is not None:
        note += " (our core ran this card with other settings: no MFU cap)"
    note += offload_text
    return Evidence("extrapolated", note, widening, cap_value, cap_source)


def offload_note(gpu: GpuSpec, setting: TrainingSetting) -> str:
    """'; offload: …' naming the one row the host-link efficiency rests on (and the wider band), or ''."""
    if not setting.offloads_to_cpu:
        return ""
    note = "; offload: the host link's efficiency rests on one FSDP-offload row (PCIe 5.0 H200)"
    widening = offload_widening(gpu, setting)
    if widening:
        why = "ZeRO-3 offload" if setting.sharding == "zero3-offload" else f"a {gpu.host_link} host"
        note += f", band +{widening:.0%} for {why}"
    return note


def offload_widening(gpu: GpuSpec, setting: TrainingSetting) -> float:
    """:data:`OFFLOAD_BAND_WIDENING` for ZeRO-3 offload or offload over a host link slower than PCIe 5.0, else 0."""
    if not setting.offloads_to_cpu:
        return 0.0
    if setting.sharding == "zero3-offload" or gpu.host_link_gb_per_s < PCIE5_HOST_LINK_GB_PER_S:
        return OFFLOAD_BAND_WIDENING
    return 0.0


def with_evidence(
    estimate: Estimate, gpu: GpuSpec, setting: TrainingSetting, coefficients: CostCoefficients
) -> Estimate:
    """``estimate`` labelled, its time band widened by the evidence and, above the cap, held at the MFU cap.

    Held: every time is stretched by MFU / cap (tokens/s divided by it); the added seconds are the breakdown's
    :data:`MFU_CAP_TERM`, so the terms still add up to the step.
    """
    evidence = evidence_for(gpu, setting, coefficients)
    updates: dict[str, object] = {
        "evidence": evidence.label,
        "evidence_note": evidence.note,
        "time_uncertainty_fraction": round(estimate.time_uncertainty_fraction + evidence.band_widening, 4),
        "mfu_cap": evidence.mfu_cap,
        "mfu_cap_source": evidence.cap_source,
    }
    cap = evidence.mfu_cap
    if cap is not None and estimate.mfu > cap:
        stretch = estimate.mfu / cap
        added_s = estimate.step_time_s * (stretch - 1)
        steps = estimate.num_optimizer_steps
        updates |= {
            "micro_step_time_s": estimate.micro_step_time_s * stretch,
            "optimizer_time_s": estimate.optimizer_time_s * stretch,
            "step_time_s": estimate.step_time_s * stretch,
            "tokens_per_s": estimate.tokens_per_s / stretch,
            "mfu": cap,
            "mfu_uncapped": estimate.mfu,
            "time_breakdown_s": {**estimate.time_breakdown_s, MFU_CAP_TERM: round(added_s, 6)},
        }
        if estimate.total_time_s is not None and steps is not None:
            updates["total_time_s"] = estimate.total_time_s + steps * added_s
    return estimate.model_copy(update=updates)
