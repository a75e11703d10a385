"""One test per transcribed seed row: the shipped calibration predicts it within the stated tolerance.

Tolerances (relative error of the prediction):
  * memory, rows whose memory kind is known (allocated / reserved): ±25 %;
  * time (micro-step, step or whole-run wall time): ±50 %, times the row's stack factor (the calibration's
    ``stack_time_factor`` of its source table: the coefficients describe the fastest stack in the fit and each
    table's trainer runs a constant factor slower, ``calibration/time_fit.py``; one factor per table, never per
    row — the stack-free error held out is ``benchmarks/time_accuracy.py``'s);
  * out of memory: a row that ran out of memory must be predicted not to fit, and a row that ran must be
    predicted to fit.
Rows we know we miss are listed in KNOWN_MISSES with the measured error and the reason; they are strict
xfails, so a model change that fixes one makes the suite say so. Memory rows of unknown kind (seed 003, the
7900 XTX sweep) carry no memory tolerance: their figures cannot be compared with a defined quantity.
"""

from __future__ import annotations

import functools

import pytest

from autotune.calibration.cases import comparable_time, memory_of_known_kind, prepare_cases
from autotune.calibration.results import CaseResult, evaluate
from autotune.costmodel.calibration import default_coefficients
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import source_table

MEMORY_TOLERANCE = 0.25
TIME_TOLERANCE = 0.50

_PER_NODE_HOST = (
    "LLaMA-30B ZeRO-3 + offload on 8 GPUs at micro batch 1 {error}: with one CPU-Adam rate per node (fitted "
    "1.1e9 parameters / s; the 30B ×4 and 65B ×8 rows agree on ~7e8) the 8 ranks' 32.5 B parameters take 30 s a "
    "step, where the whole step measured 24.5 s: this table's 30B-on-8 rows scatter 3× around the rate the others "
    "share, and the host (cores, RAM) is not stated"
)
_FSDP1_NO_SYNC = (
    "seed 001's FSDP1 CPU-offload Llama-2-13B full run: predicted 42.1 vs 31 GiB, +36 % (before the no_sync "
    "unsharded gradients were counted: 17.3, -44 %); its Gemma-7B / Gemma-2-9B twins now agree within 11-16 %, "
    "so whether this trainer keeps 16-bit unsharded gradients for Llama-2-13B is not settled"
)
_LORA_OFFLOAD_ALLOCATOR = (
    "seed 001's Llama-3.1-70B LoRA with FSDP1 CPU offload on 2 GPUs {error}: 18 GiB above our sharded units + "
    "activations; the refitted allocator fraction (0.142, no longer lifted by the full-FSDP-offload rows) "
    "moved it past 25 % (it was -23 to -24 %); the source does not say where the memory goes"
)
KNOWN_MISSES: dict[tuple[str, str], str] = {
    **{(f"001-{gpu}-llama2-13b-full", "memory"): _FSDP1_NO_SYNC for gpu in ("a100-80gb", "h100-80gb", "rtx-pro-6000")},
    **{
        (f"001-{gpu}-llama3.1-70b-lora", "memory"): _LORA_OFFLOAD_ALLOCATOR.format(error=error)
        for gpu, error in (("a100-80gb", "-26.5 %"), ("h100-80gb", "-27.6 %"), ("rtx-pro-6000", "-26.5 %"))
    },
    ("003-llama-30b-zero3-offload-mbs1-x8", "time"): _PER_NODE_HOST.format(error="+92 %"),
    ("003-llama-13b-fsdp-offload-mbs1-x4", "time"): (
        "LLaMA-13B FSDP CPU offload on 4 GPUs +52 % (within 50 % until the core's H200 offload run set the host "
        "link's efficiency to 0.34, which adds 7.5 s a step): 64 of the predicted 85 s a step is torch's AdamW on "
        "the host "
        "(TORCH_CPU_ADAM_TIME_RATIO × the per-node CPU-Adam rate), and this table's FSDP-offload rows scatter "
        "around that term both ways (LLaMA-7B ×2 -10 %, LLaMA-30B ×8 -38 % before the stack factor); the host is "
        "not stated"
    ),
    ("001-rtx-pro-6000-gemma2-9b-qlora", "verdict"): (
        "measured 89 GiB reserved and ran on the 96 GiB card; the derived allocated peak is 80.3 GiB (reserved "
        "95.5, +7 %), and with the held-out QLoRA headroom band (0.226 since the activation/logits factors were "
        "removed) the need is 97.2 GiB > 96: predicted not fitting"
    ),
    ("003-llama-13b-zero3-offload-mbs16-x4", "verdict"): (
        "ran out of memory; we predict 51.9 GiB + 0.5 context + 13.3 headroom = 65.7 GiB ≤ 80 (with eager-legacy's "
        "clamp copy of the scores; 59.4 as eager): this 2023 ZeRO-3 stack measured 1.7-2.3× our reserved prediction "
        "at micro batch 8 and 1 (kind unknown, so not fitted)"
    ),
    ("003-llama-13b-fsdp-mbs1-x4", "time"): (
        "-66 %: the same per-rank work as the ×8 run (mbs 1, 2,048 tokens) takes 2.9× longer per micro-step at a "
        "measured 81 GB — allocator pressure at the card's limit; we predict 76.2 GiB allocated (with FSDP's "
        "no_sync unsharded gradients), 79.5 reserved: the card's limit, but the time terms carry no retry cost"
    ),
}
"""(row id, quantity) → why the model misses it, with the measured error (from `autotune validate`)."""


@functools.lru_cache(maxsize=1)
def _results() -> dict[str, CaseResult]:
    results = evaluate(prepare_cases(all_measurements()), default_coefficients())
    return {r.id: r for r in results}


ROW_IDS = [m.id for m in all_measurements() if not m.source.startswith("llm-foundry-mpt.jsonl")]
"""The seed rows, for the fit verdicts. The MPT development rows state no memory, and the memory model (fitted on
HF-stack seeds) predicts most of llm-foundry's fused MPT runs not to fit — a memory-model gap reported in
docs/cost-model.md §7.1, not a row property; their times are tested through ``TIME_ROW_IDS``."""


MEMORY_ROW_IDS = [m.id for m in all_measurements() if memory_of_known_kind(m)]
"""Rows with a memory figure of known kind (``cases.memory_of_known_kind``): a test per row that can assert (rows
without one get no test)."""
TIME_ROW_IDS = [m.id for m in all_measurements() if comparable_time(m) is not None]
"""Rows with a comparable time (``cases.comparable_time``: the rule validation and the time fit use)."""


def _mark(row_id: str, quantity: str):  # type: ignore[no-untyped-def]
    reason = KNOWN_MISSES.get((row_id, quantity))
    return pytest.param(row_id, marks=pytest.mark.xfail(reason=reason, strict=True)) if reason else row_id


@pytest.mark.parametrize("row_id", [_mark(i, "memory") for i in MEMORY_ROW_IDS])
def test_memory_within_tolerance(row_id: str) -> None:
    result = _results()[row_id]
    assert result.memory_error is not None, "the row states a memory figure: it must be compared"
    assert abs(result.memory_error) <= MEMORY_TOLERANCE, (
        f"predicted {result.predicted_memory_gib:.1f} GiB vs measured {result.measured_memory_gib:.1f} GiB"
    )


@pytest.mark.parametrize("row_id", [_mark(i, "time") for i in TIME_ROW_IDS])
def test_time_within_tolerance(row_id: str) -> None:
    result = _results()[row_id]
    assert result.time_error is not None, "the row states a comparable time: it must be compared"
    assert result.predicted_time_s is not None and result.measured_time_s is not None
    stack = default_coefficients().stack_time_factor.get(source_table(result.case.measurement.source), 1.0)
    error = result.predicted_time_s * stack / result.measured_time_s - 1
    assert abs(error) <= TIME_TOLERANCE, (
        f"predicted {result.predicted_time_s:.4g} s × stack {stack:.2f} vs measured {result.measured_time_s:.4g} s "
        f"({result.time_kind})"
    )


@pytest.mark.parametrize("row_id", [_mark(i, "verdict") for i in ROW_IDS])
def test_fit_verdict_matches(row_id: str) -> None:
    result = _results()[row_id]
    e = result.estimate
    expected = "out of memory" if result.oom_measured else "fits"
    assert result.oom_correct, (
        f"measured: {expected}; predicted peak {e.peak_memory_gib:.1f} + context {e.cuda_context_gib:.1f} "
        f"+ headroom {e.memory_headroom_gib:.1f} GiB vs {e.gpu_memory_gib:.0f} GiB"
    )


def test_rows_without_a_figure_are_the_ones_the_model_does_not_compare() -> None:
    """The collection-time selection above agrees with what evaluate() compares, row by row."""
    results = _results()
    assert {i for i, r in results.items() if r.memory_error is not None} >= set(MEMORY_ROW_IDS)
    assert {i for i in MEMORY_ROW_IDS} == {
        i for i, r in results.items() if r.memory_error is not None and r.case.measurement.memory_kind != "unknown"
    }
    assert set(TIME_ROW_IDS) == {i for i, r in results.items() if r.time_error is not None}
