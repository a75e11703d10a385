"""autotune.costmodel.evidence: labels, bands and the MFU cap over the whole catalog."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.costmodel import evidence
from autotune.costmodel.calibration import default_coefficients, error_band
from autotune.costmodel.estimate import estimate_setting, memory_family
from autotune.costmodel.evidence import (
    EXTRAPOLATION_BAND_WIDENING,
    MFU_CAP_TERM,
    OFFLOAD_BAND_WIDENING,
    evidence_table,
    sharding_class,
)
from autotune.errors import AutotuneError
from autotune.planner.search import search
from autotune.profiles.catalog import list_gpus, resolve_gpu, resolve_model_profile
from autotune.profiles.measurements import all_measurements
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

CORE_GPUS = {runs.gpu for runs in evidence_table().core}
COEFFICIENTS = default_coefficients()


def _timed_public_rows() -> set[tuple[str, str, str, str]]:
    """(gpu, method, sharding class, source table) of every shipped row with a time that is not our core's."""
    rows = set()
    for m in all_measurements():
        timed = any(t is not None for t in (m.step_time_s, m.micro_step_time_s, m.run_time_s))
        source = m.source.split(",")[0]
        if timed and source in COEFFICIENTS.stack_time_factor and not source.startswith("autotune-core"):
            rows.add((m.gpu, m.setting.method, sharding_class(m.setting), source))
    return rows


def test_the_public_evidence_is_exactly_the_timed_rows_of_fitted_stacks() -> None:
    listed = {(p.gpu, p.method, p.sharding, p.stack) for p in evidence_table().public}
    assert listed == _timed_public_rows()
    assert {p.stack for p in evidence_table().public} <= set(evidence_table().stacks)


@pytest.mark.parametrize("gpu", [gpu.key for gpu in list_gpus()])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_no_plan_above_its_generations_public_mfu_cap_unless_our_core_ran_the_card(gpu: str, method: str) -> None:
    try:
        request, _ = plan_request(model="llama3.2-1b", gpu=gpu, seq_len=1024, global_batch_size=8, method=method)
        result = search(request)
    except AutotuneError:  # nothing fits, or the method is not available on the card (bitsandbytes)
        pytest.skip(f"no {method} plan on {gpu}")
    for scored in [result.best, *result.alternatives]:
        estimate = scored.estimate
        assert estimate.evidence in ("core", "public", "extrapolated")
        if gpu in CORE_GPUS:
            assert estimate.mfu_cap is None
        else:
            assert estimate.mfu_cap is not None and estimate.mfu <= estimate.mfu_cap + 1e-12
            assert estimate.mfu_cap_source


def test_mi300x_is_extrapolated_with_the_wider_band() -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("mi300x")[0])
    setting = TrainingSetting(method="lora", micro_batch_size=4, grad_ckpt=False)
    workload = Workload(seq_len=2048, global_batch_size=4)
    estimate = estimate_setting(model, cluster, workload, setting, COEFFICIENTS)
    assert estimate.evidence == "extrapolated" and "extrapolated from the datasheet" in estimate.evidence_note
    family_band = error_band(COEFFICIENTS.time_error_band, memory_family(setting))
    assert estimate.time_uncertainty_fraction == pytest.approx(family_band + EXTRAPOLATION_BAND_WIDENING, abs=1e-4)
    assert estimate.mfu_cap is not None and "no public MFU for cdna" in estimate.mfu_cap_source


def test_a_prediction_above_the_cap_is_held_there_and_its_step_stretched(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("l40s")[0])
    setting = TrainingSetting(method="lora", micro_batch_size=2)
    workload = Workload(seq_len=2048, global_batch_size=2, num_samples=1000)
    raw = estimate_setting(model, cluster, workload, setting, COEFFICIENTS, evidence=False)
    monkeypatch.setattr(evidence, "mfu_cap", lambda gpu: (raw.mfu / 2, "a cap at half the model's MFU"))
    held = estimate_setting(model, cluster, workload, setting, COEFFICIENTS)
    assert held.mfu == pytest.approx(raw.mfu / 2) and held.mfu_uncapped == raw.mfu
    assert held.tokens_per_s == pytest.approx(raw.tokens_per_s / 2)
    assert held.step_time_s == pytest.approx(2 * raw.step_time_s)
    assert sum(held.time_breakdown_s.values()) == pytest.approx(held.step_time_s, rel=1e-5)
    assert held.time_breakdown_s[MFU_CAP_TERM] == pytest.approx(raw.step_time_s, rel=1e-5)
    assert held.total_time_s is not None and raw.total_time_s is not None
    assert held.total_time_s > raw.total_time_s


def test_core_and_public_labels_keep_the_fitted_band() -> None:
    model = resolve_model_profile("llama3-8b")
    workload = Workload(seq_len=2048, global_batch_size=2)
    setting = TrainingSetting(method="lora", micro_batch_size=2)
    for gpu, label in (("h100-80gb", "core"), ("a100-80gb", "public")):
        cluster = ClusterSpec(gpu=resolve_gpu(gpu)[0])
        estimate = estimate_setting(model, cluster, workload, setting, COEFFICIENTS)
        raw = estimate_setting(model, cluster, workload, setting, COEFFICIENTS, evidence=False)
        assert estimate.evidence == label
        assert estimate.time_uncertainty_fraction == raw.time_uncertainty_fraction
    public = estimate_setting(model, ClusterSpec(gpu=resolve_gpu("a100-80gb")[0]), workload, setting, COEFFICIENTS)
    assert "HF Trainer + peft (seed 001), which ran 2.19× our core's time" in public.evidence_note


def test_offload_beyond_its_one_row_gets_the_wider_band() -> None:
    model = resolve_model_profile("llama3.2-1b")
    workload = Workload(seq_len=1024, global_batch_size=2)
    h200 = ClusterSpec(gpu=resolve_gpu("h200")[0])

    def band(sharding: str, cluster: ClusterSpec) -> tuple[float, float]:
        setting = TrainingSetting(method="full", micro_batch_size=2, sharding=sharding)
        labelled = estimate_setting(model, cluster, workload, setting, COEFFICIENTS)
        raw = estimate_setting(model, cluster, workload, setting, COEFFICIENTS, evidence=False)
        assert "rests on one FSDP-offload row (PCIe 5.0 H200)" in labelled.evidence_note
        return labelled.time_uncertainty_fraction, raw.time_uncertainty_fraction

    measured, raw = band("fsdp-offload", h200)  # the one row's own setting class on its PCIe 5.0 host
    assert measured == raw
    zero3, raw = band("zero3-offload", h200)
    assert zero3 == pytest.approx(raw + OFFLOAD_BAND_WIDENING)
    pcie4, raw = band("fsdp-offload", ClusterSpec(gpu=resolve_gpu("a100-80gb")[0]))
    assert pcie4 == pytest.approx(raw + OFFLOAD_BAND_WIDENING)
