"""Cross-validation: folds never see their held-out rows, held-out rows use their fold's fit, bands per family."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from autotune.calibration.cases import Case, prepare_cases
from autotune.calibration.crossval import (
    comparison,
    cross_validate,
    fit_from_priors,
    held_out_bands,
    model_family,
    parse_groupings,
    source_table,
    verdict_counts,
)
from autotune.calibration.fit import error_bands
from autotune.calibration.results import evaluate
from autotune.costmodel.estimate import memory_family
from autotune.errors import InvalidRequestError
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import CostCoefficients

SUBSET_MODELS = ("llama3-8b", "phi3-mini")
SUBSET_GPUS = ("a100-80gb", "h100-80gb")


@pytest.fixture(scope="module")
def small_cases() -> list[Case]:
    """Seed 001 rows of two GPUs × two models × three methods (12 rows, all with memory and time)."""
    rows = [
        m for m in all_measurements() if m.id.startswith("001-") and m.gpu in SUBSET_GPUS and m.model in SUBSET_MODELS
    ]
    assert len(rows) == 12
    return prepare_cases(rows)


class RecordingFit:
    """A cheap stand-in for the fit: records what it was given; its coefficients depend on the training rows
    (activation factor from their count, one matmul efficiency per GPU among them)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, cases: Sequence[Case], name: str) -> CostCoefficients:
        self.calls.append((name, tuple(c.measurement.id for c in cases)))
        gpus = {c.cluster.gpu.key for c in cases}
        return CostCoefficients(
            allocator_overhead_fraction=len(cases) / 100,
            matmul_efficiency={"default": 0.2, **{gpu: 0.4 for gpu in gpus}},
        )


@pytest.mark.parametrize(
    ("key", "family"),
    [
        ("llama-7b", "llama1"),
        ("llama-65b", "llama1"),
        ("llama2-13b", "llama2"),
        ("llama3-8b", "llama3"),
        ("llama3.1-70b", "llama3"),
        ("llama3.2-1b", "llama3"),
        ("gemma-7b", "gemma"),
        ("gemma2-9b", "gemma2"),
        ("phi3-mini", "phi3"),
        ("qwen2.5-7b", "qwen2"),
        ("mistral-7b-v0.3", "mistral"),
    ],
)
def test_model_family_from_key(key: str, family: str) -> None:
    assert model_family(key) == family


def test_source_table_is_the_seed_file() -> None:
    assert source_table("003_51edbf0898b4ad92.txt, table 'Model | ...', row 1") == "003_51edbf0898b4ad92.txt"
    assert source_table("000_98146d43712cfae9.txt: sections '# RTX 4090'") == "000_98146d43712cfae9.txt"


def test_held_out_rows_are_never_in_their_own_fit(small_cases: list[Case]) -> None:
    fit = RecordingFit()
    report = cross_validate(small_cases, "gpu", fit=fit)
    assert [name for name, _ in fit.calls] == ["in-sample", "cv-gpu-a100-80gb", "cv-gpu-h100-80gb"]
    assert set(fit.calls[0][1]) == {c.measurement.id for c in small_cases}
    for fold, (_, training) in zip(report.folds, fit.calls[1:], strict=True):
        assert fold.training_ids == training
        assert not set(fold.held_out_ids) & set(training)
        assert set(fold.held_out_ids) | set(training) == {c.measurement.id for c in small_cases}
    held_gpus = {fold.group: {r.case.cluster.gpu.key for r in fold.results} for fold in report.folds}
    assert held_gpus == {"a100-80gb": {"a100-80gb"}, "h100-80gb": {"h100-80gb"}}


def test_held_out_rows_are_predicted_by_their_folds_fit(small_cases: list[Case]) -> None:
    report = cross_validate(small_cases, "gpu", fit=RecordingFit())
    assert [r.id for r in report.held_out] == [c.measurement.id for c in small_cases]
    for fold in report.folds:
        # The held-out GPU has no efficiency of its own in its fold: it falls back to 'default'.
        assert fold.group not in fold.coefficients.matmul_efficiency
        expected = evaluate([r.case for r in fold.results], fold.coefficients)
        assert [r.predicted_time_s for r in fold.results] == [e.predicted_time_s for e in expected]
    by_id = {r.id: r for r in report.held_out}
    in_sample = {r.id: r for r in report.in_sample}
    # The in-sample fit knows both GPUs (efficiency 0.4), the held-out one uses 'default' 0.2: slower.
    for row_id, result in by_id.items():
        assert result.predicted_time_s is not None and in_sample[row_id].predicted_time_s is not None
        assert result.predicted_time_s > in_sample[row_id].predicted_time_s


def test_real_fit_on_a_small_subset_transfers_the_fitted_ratio_to_the_held_out_generation(
    small_cases: list[Case],
) -> None:
    subset = [c for c in small_cases if c.measurement.model == "phi3-mini"]  # 2 GPUs × 3 methods
    report = cross_validate(subset, "gpu", fit=fit_from_priors)
    prior = CostCoefficients().matmul_efficiency
    generation = {"a100-80gb": "ampere", "h100-80gb": "hopper"}
    for fold in report.folds:
        held, other = generation[fold.group], generation[next(g for g in SUBSET_GPUS if g != fold.group)]
        efficiencies = fold.coefficients.matmul_efficiency
        # The held-out generation has no rows in its fold: its prior scaled by what the other generation's fit
        # says about the stack (fitted / prior), not a value fitted to the rows it is judged on.
        assert efficiencies[held] / prior[held] == pytest.approx(efficiencies[other] / prior[other])
        assert efficiencies["default"] / prior["default"] == pytest.approx(efficiencies[other] / prior[other])
    summary = report.held_out_summary()
    assert summary.time_rows == len(subset)
    assert set(summary.by_group) == {
        "gpu a100-80gb",
        "gpu h100-80gb",
        "method full",
        "method lora",
        "method qlora",
        "source 001_351ee1f9e626a6ae.txt",
    }


def _quantile_90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def test_held_out_bands_are_per_family_from_held_out_residuals(small_cases: list[Case]) -> None:
    report = cross_validate(small_cases, "gpu", fit=RecordingFit())
    memory, headroom, time_band = held_out_bands(report)
    families = {memory_family(c.measurement.setting) for c in small_cases}
    assert families == {"full", "lora", "qlora"}
    for family in families:
        members = [r for r in report.held_out if memory_family(r.case.measurement.setting) == family]
        assert len(members) == 4
        informing = [r for r in members if r.informs_memory_band]
        modelled = [r.memory_error_of_modelled_part for r in informing]
        under = [r.memory_underprediction_of_modelled_part for r in informing]
        if len(informing) >= 3:  # error_bands' minimum rows per family
            assert memory[family] == pytest.approx(_quantile_90([v for v in modelled if v is not None]), abs=1e-4)
            assert headroom[family] == pytest.approx(_quantile_90([v for v in under if v is not None]), abs=1e-4)
        else:
            assert family not in memory
        times = [abs(r.time_error) for r in members if r.time_error is not None]
        assert time_band[family] == pytest.approx(_quantile_90(times), abs=1e-4)
    assert {"lora", "qlora"} <= set(memory)  # bands do come out per family
    assert "default" in memory and "default" in time_band
    # Held-out time residuals differ from in-sample ones (the held-out GPU uses 'default').
    assert time_band != error_bands(report.in_sample)[2]


def test_bands_pool_several_groupings(small_cases: list[Case]) -> None:
    by_gpu = cross_validate(small_cases, "gpu", fit=RecordingFit())
    by_family = cross_validate(small_cases, "family", fit=RecordingFit())
    assert [f.group for f in by_family.folds] == ["llama3", "phi3"]
    assert held_out_bands(by_gpu, by_family) == error_bands([*by_gpu.held_out, *by_family.held_out])


def test_report_structure_and_comparison(small_cases: list[Case]) -> None:
    fit = RecordingFit()
    full = fit(small_cases, "given")
    by_gpu = cross_validate(small_cases, "gpu", fit=fit, full_fit=full)
    assert by_gpu.in_sample_coefficients is full
    assert len(fit.calls) == 1 + 2  # the given full fit is reused, not refitted
    counts = verdict_counts(by_gpu.held_out)
    assert counts.total == len(small_cases) and counts.oom_total == 0
    rows = comparison([by_gpu])
    groups = [r.group for r in rows]
    assert groups[0] == "all" and "gpu a100-80gb" in groups and "method qlora" in groups
    overall = rows[0]
    assert overall.memory_rows == 12 and overall.time_rows == 12
    assert set(overall.time_held_out) == {"leave-one-GPU-out"}
    data = by_gpu.as_dict(worst=2)
    assert data["groups"] == "gpu" and len(data["folds"]) == 2  # type: ignore[arg-type]


def test_one_group_cannot_be_cross_validated(small_cases: list[Case]) -> None:
    one_gpu = [c for c in small_cases if c.cluster.gpu.key == "a100-80gb"]
    with pytest.raises(InvalidRequestError, match="at least two"):
        cross_validate(one_gpu, "gpu", fit=RecordingFit())


def test_parse_groupings() -> None:
    assert parse_groupings("family, gpu") == ["gpu", "family"]
    with pytest.raises(InvalidRequestError, match="gpu, family, source"):
        parse_groupings("gpu,model")
    with pytest.raises(InvalidRequestError):
        parse_groupings(" , ")
