"""autotune.calibration.plan_quality (rendered by benchmarks/plan_quality.py): sweeps, the planner's choice and its
judgement."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from autotune.calibration import plan_quality as quality
from autotune.schemas.calibration import CostCoefficients, Measurement
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pq() -> ModuleType:
    return quality


def row(
    row_id: str,
    micro: int,
    accum: int,
    run_time_s: float | None = None,
    oom: bool = False,
    grad_ckpt: bool = True,
    seq_len: int = 1024,
    num_samples: int | None = 1000,
    gpu: str = "rtx-4090",
) -> Measurement:
    """A synthetic table row: llama3-8b LoRA on one GPU."""
    return Measurement(
        id=row_id,
        source="999_synthetic.txt, table 1",
        model="llama3-8b",
        gpu=gpu,
        setting=TrainingSetting(method="lora", micro_batch_size=micro, grad_accum=accum, grad_ckpt=grad_ckpt),
        workload=Workload(seq_len=seq_len, global_batch_size=micro * accum, num_samples=num_samples),
        oom=oom,
        run_time_s=None if oom else run_time_s,
    )


def fake_predictor(pq: ModuleType, table: dict[str, tuple[bool, float]]) -> Any:
    """Predictions given by row id: (fits, predicted run seconds); rank = predicted run time."""

    def predict(sweep: Any, candidate: Any, samples: int | None) -> Any:
        fits, run = table[candidate.id]
        return pq.Prediction(fits=fits, key=(run,), run_time_s=run)

    return predict


def one_sweep(pq: ModuleType, rows: list[Measurement]) -> Any:
    sweeps, skipped = pq.find_sweeps(rows)
    assert len(sweeps) == 1 and not skipped
    return sweeps[0]


def test_sweeps_group_by_constraints_merge_duplicates_and_skip_single_settings(pq: ModuleType) -> None:
    rows = [
        row("a", 1, 8, 100.0),
        row("a-again", 1, 8, 110.0),  # duplicate setting: merged, shortest time kept
        row("b", 2, 4, 90.0),
        row("long", 1, 8, 300.0, seq_len=4096),  # another seq_len: its own group, one setting → skipped
        row("oom-only", 4, 2, oom=True, seq_len=8192),  # one setting that ran out of memory → a sweep
    ]
    sweeps, skipped = pq.find_sweeps(rows)
    assert skipped == ["999: llama3-8b on 1× rtx-4090, seq 4096, lora"]
    by_label = {s.label: s for s in sweeps}
    main = by_label["999: llama3-8b on 1× rtx-4090, seq 1024, lora"]
    assert [c.id for c in main.candidates] == ["a", "b"]
    assert main.candidates[0].measured_time_s(main.basis) == 100.0
    assert main.basis == "run" and main.dataset_known
    assert by_label["999: llama3-8b on 1× rtx-4090, seq 8192, lora"].basis == "nothing ran"


def test_time_basis_flags_unstated_datasets(pq: ModuleType) -> None:
    unstated = [row("a", 1, 8, 100.0, num_samples=None), row("b", 2, 4, 90.0, num_samples=None)]
    assert pq.time_basis(unstated)[0] == "run, dataset not stated"
    mixed = [row("a", 1, 8, 100.0, num_samples=None), row("b", 2, 4, 90.0)]
    assert pq.time_basis(mixed)[0] == "not comparable"


@pytest.mark.parametrize(
    ("predictions", "status", "chosen", "ratio"),
    [
        # predicted fastest among those predicted to fit is the measured fastest
        ({"a": (True, 50.0), "b": (True, 40.0), "c": (False, 10.0)}, "best", "b", 1.0),
        # the planner prefers a: 120 s measured against the fastest 96 s
        ({"a": (True, 30.0), "b": (True, 40.0), "c": (False, 10.0)}, "slower", "a", 120.0 / 96.0),
        # the planner picks the setting that ran out of memory in reality
        ({"a": (True, 30.0), "b": (True, 40.0), "c": (True, 10.0)}, "chose OOM", "c", None),
        # nothing predicted to fit although two settings ran
        ({"a": (False, 30.0), "b": (False, 40.0), "c": (False, 10.0)}, "refused", None, None),
    ],
)
def test_judge_against_a_table_with_a_known_answer(
    pq: ModuleType, predictions: dict[str, tuple[bool, float]], status: str, chosen: str | None, ratio: float | None
) -> None:
    sweep = one_sweep(pq, [row("a", 1, 8, 120.0), row("b", 2, 4, 96.0), row("c", 8, 1, oom=True)])
    outcome = pq.judge(sweep, fake_predictor(pq, predictions))
    assert outcome.status == status
    assert (outcome.chosen.id if outcome.chosen else None) == chosen
    assert outcome.fastest.id == "b"
    assert outcome.ratio == (pytest.approx(ratio) if ratio is not None else None)
    assert outcome.failed == (status in ("chose OOM", "refused"))
    wrong = {cid for cid, (fits, _) in predictions.items() if fits != (cid != "c")}
    assert set(outcome.verdict_errors) == wrong


def test_judge_counts_a_correct_refusal(pq: ModuleType) -> None:
    sweep = one_sweep(pq, [row("x", 8, 1, oom=True), row("y", 4, 2, oom=True)])
    outcome = pq.judge(sweep, fake_predictor(pq, {"x": (False, 1.0), "y": (False, 2.0)}))
    assert outcome.status == "correct refusal" and not outcome.failed and outcome.ratio is None


def test_tally_counts_outcomes(pq: ModuleType) -> None:
    sweep = one_sweep(pq, [row("a", 1, 8, 120.0), row("b", 2, 4, 96.0), row("c", 8, 1, oom=True)])
    slower = pq.judge(sweep, fake_predictor(pq, {"a": (True, 1.0), "b": (True, 2.0), "c": (False, 0.5)}))
    best = pq.judge(sweep, fake_predictor(pq, {"a": (True, 3.0), "b": (True, 2.0), "c": (False, 0.5)}))
    counts = pq.tally([slower, best], skipped=4)
    assert (counts.sweeps, counts.best, len(counts.ratios), counts.skipped) == (2, 1, 2, 4)
    assert counts.median_ratio == pytest.approx(1.125) and counts.worst_ratio == pytest.approx(1.25)
    assert (counts.chose_oom, counts.refused, counts.correct_refusals) == (0, 0, 0)


def test_summary_line_states_the_tally(pq: ModuleType) -> None:
    spec = importlib.util.spec_from_file_location("plan_quality_script", ROOT / "benchmarks" / "plan_quality.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    sweep = one_sweep(pq, [row("a", 1, 8, 120.0), row("b", 2, 4, 96.0), row("c", 8, 1, oom=True)])
    slower = pq.judge(sweep, fake_predictor(pq, {"a": (True, 1.0), "b": (True, 2.0), "c": (False, 0.5)}))
    best = pq.judge(sweep, fake_predictor(pq, {"a": (True, 3.0), "b": (True, 2.0), "c": (False, 0.5)}))
    line = script.summary_line([slower, best], skipped=4)
    assert "fastest measured setting in 1/2 comparable sweeps" in line
    assert "median ratio 1.12, worst 1.25" in line
    assert "4 single-setting groups skipped" in line


def test_real_planner_never_picks_a_setting_it_predicts_not_to_fit(pq: ModuleType) -> None:
    # On a 24 GiB RTX 4090, LoRA on Llama 3 8B at micro batch 8 without checkpointing is predicted far over
    # memory (and faster per sample); micro batch 1 with checkpointing is predicted to fit.
    rows = [row("small", 1, 8, 2000.0), row("big", 8, 1, 1500.0, grad_ckpt=False)]
    sweep = one_sweep(pq, rows)
    predict = pq.planner_predictor(lambda s: CostCoefficients())
    outcome = pq.judge(sweep, predict)
    assert outcome.predictions["big"].fits is False
    assert outcome.predictions["small"].fits is True
    assert outcome.chosen.id == "small"
    assert outcome.status == "slower" and outcome.ratio == pytest.approx(2000.0 / 1500.0)
    assert outcome.verdict_errors == ("big",)  # it ran in this (synthetic) table

    rows_oom = [row("small", 1, 8, 2000.0), row("big", 8, 1, oom=True, grad_ckpt=False)]
    outcome = pq.judge(one_sweep(pq, rows_oom), predict)
    assert outcome.status == "best" and outcome.ratio == 1.0 and outcome.verdict_errors == ()


def test_unstated_dataset_reports_whether_the_choice_holds_for_larger_datasets(pq: ModuleType) -> None:
    rows = [row("a", 1, 8, 100.0, num_samples=None), row("b", 2, 4, 90.0, num_samples=None)]
    sweep = one_sweep(pq, rows)
    seen: list[int | None] = []

    def predict(sweep: object, candidate: Any, samples: int | None) -> Any:
        # a: cheaper one-off cost, b: cheaper per sample → a wins at the nominal size, b for huge datasets
        seen.append(samples)
        per_sample, once = {"a": (2.0, 0.0), "b": (1.0, 10 * pq.NOMINAL_SAMPLES)}[candidate.id]
        run = per_sample if samples is None else per_sample * samples + once
        return pq.Prediction(fits=True, key=(run,), run_time_s=run)

    outcome = pq.judge(sweep, predict)
    assert outcome.chosen.id == "a" and outcome.stable_for_larger_datasets is False
    assert set(seen) == {pq.NOMINAL_SAMPLES, None}
    assert outcome.ratio == pytest.approx(100.0 / 90.0)

    stated = one_sweep(pq, [row("a", 1, 8, 100.0), row("b", 2, 4, 90.0)])
    seen.clear()
    outcome = pq.judge(stated, predict)
    assert seen == [None, None] and outcome.stable_for_larger_datasets is None
