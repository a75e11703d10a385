"""The workload (autotune.schemas.workload): its batches as a discriminated union, its eval set, the run's length, and
the flat fields of older files read into them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from autotune.costmodel.context import setting_context
from autotune.costmodel.estimate import estimate_setting
from autotune.profiles.catalog import resolve_gpu
from autotune.schemas.plan import PLAN_SCHEMA_VERSION
from autotune.schemas.plan_io import load_plan, plan_from_yaml, plan_to_yaml
from autotune.schemas.run_report import RUN_REPORT_SCHEMA_VERSION, RunReport
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import (
    EvalSet,
    FilledBatches,
    PackedBatches,
    PaddedBatches,
    PaddedLengths,
    Workload,
    expected_longest,
)

OLD_PLANS = Path(__file__).parents[2] / "fixtures" / "plans"
"""Plan files of plan schema 2, written by ``autotune plan -o`` before ``batches`` and ``eval`` (README there)."""

PADDED = PaddedBatches(tokens_per_sample=30.5, lengths=PaddedLengths(quantiles=(10, 20, 40), longest_tokens=50))
PACKED = PackedBatches(attention_span_tokens=20.0, multi_example_block_share=0.25)


@pytest.mark.parametrize("batches", [FilledBatches(), PADDED, PackedBatches(attention_span_tokens=9.5,
                                     multi_example_block_share=0.0), PaddedBatches(tokens_per_sample=7.0)])  # fmt: skip
def test_each_kind_of_batches_reads_back_as_its_own_type(batches: object) -> None:
    workload = Workload(seq_len=64, num_samples=10, batches=batches, eval=EvalSet(samples=3, steps=2))
    dumped = json.loads(workload.model_dump_json())
    assert (
        dumped["batches"]["kind"]
        == {FilledBatches: "filled", PaddedBatches: "padded", PackedBatches: "packed"}[type(batches)]
    )
    again = Workload.model_validate(dumped)
    assert again == workload and type(again.batches) is type(batches)


def test_a_workload_without_batches_is_filled_and_an_unknown_kind_is_refused() -> None:
    assert Workload().batches == FilledBatches() and Workload().eval is None
    with pytest.raises(ValidationError, match="'filled', 'padded', 'packed'"):
        Workload.model_validate({"batches": {"kind": "ragged"}})
    with pytest.raises(ValidationError, match="extra"):
        Workload.model_validate({"batches": {"kind": "filled", "tokens_per_sample": 10.0}})


@pytest.mark.parametrize(
    ("flat", "nested"),
    [
        ({}, {}),
        ({"tokens_per_sample": None, "padded_length_quantiles": None, "eval_samples": None}, {}),
        ({"tokens_per_sample": 7.0}, {"batches": PaddedBatches(tokens_per_sample=7.0)}),
        (
            {"tokens_per_sample": 30.5, "padded_length_quantiles": [10, 20, 40], "padded_longest_tokens": 50},
            {"batches": PADDED},
        ),
        (
            {"packed_attention_span_tokens": 20.0, "packed_multi_example_block_share": 0.25},
            {"batches": PACKED},
        ),
        ({"eval_samples": 4, "eval_steps": 3}, {"eval": EvalSet(samples=4, steps=3)}),
        ({"eval_steps": 3}, {"eval": EvalSet(steps=3)}),
    ],
)
def test_the_flat_fields_of_older_files_read_as_the_nested_ones(
    flat: dict[str, object], nested: dict[str, object]
) -> None:
    """Plan schema 2, run report schema 3, the measurement files and the CSV's ``tokens_per_sample`` column."""
    size = {"seq_len": 64, "num_samples": 10}
    assert Workload.model_validate({**size, **flat}) == Workload.model_validate({**size, **nested})


def test_flat_and_nested_fields_together_are_refused() -> None:
    with pytest.raises(ValidationError, match="give batches and eval, or the fields of plans before schema 3"):
        Workload.model_validate({"tokens_per_sample": 7.0, "batches": {"kind": "filled"}})
    with pytest.raises(ValidationError, match="go together"):
        Workload.model_validate({"packed_multi_example_block_share": 0.5})


@pytest.mark.parametrize("name", ["schema2-padded-eval-fraction.yaml", "schema2-packed-eval-steps.yaml"])
def test_a_plan_file_of_schema_2_reads_prices_and_writes_as_schema_3(name: str) -> None:
    """A real plan of the previous version: its flat workload becomes ``batches`` and ``eval``, the run it prices has
    the steps and evals the file recorded, and it is written back as the current version (which reads back equal)."""
    path = OLD_PLANS / name
    flat = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert flat["schema_version"] == 2 and "tokens_per_sample" in flat["workload"]
    plan = load_plan(path)
    workload, old = plan.workload, flat["workload"]
    assert plan.schema_version == PLAN_SCHEMA_VERSION == 3
    assert workload.eval == EvalSet(samples=old["eval_samples"], steps=old["eval_steps"])
    match workload.batches:
        case PaddedBatches(tokens_per_sample=mean, lengths=PaddedLengths(quantiles=quantiles, longest_tokens=longest)):
            assert (mean, list(quantiles), longest) == (
                old["tokens_per_sample"],
                old["padded_length_quantiles"],
                old["padded_longest_tokens"],
            )
            expected_tokens = max(mean, expected_longest(quantiles, plan.setting.micro_batch_size))
        case PackedBatches(attention_span_tokens=span, multi_example_block_share=share):
            assert (span, share) == (old["packed_attention_span_tokens"], old["packed_multi_example_block_share"])
            expected_tokens = float(workload.seq_len)
        case other:
            raise AssertionError(f"{name}: read as {other!r}")
    cluster = plan.cluster.spec(resolve_gpu(plan.cluster.gpu)[0])
    assert setting_context(plan.model, plan.setting, cluster, workload).seq_tokens == pytest.approx(expected_tokens)
    priced = estimate_setting(plan.model, cluster, workload, plan.setting)
    recorded = plan.prediction
    assert (priced.num_optimizer_steps, priced.num_evals) == (recorded.num_optimizer_steps, recorded.num_evals)
    text = plan_to_yaml(plan)
    written = yaml.safe_load(text)
    assert written["schema_version"] == 3 and "tokens_per_sample" not in written["workload"]
    assert plan_from_yaml(text, "written") == plan


def test_a_shipped_run_report_of_schema_3_reads_its_flat_workload() -> None:
    shipped = Path(__file__).parents[3] / "src/autotune/profiles/measurements/autotune-core-h100"
    path = next(iter(sorted(shipped.glob("*/run_report.json"))))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema_version"] < RUN_REPORT_SCHEMA_VERSION and "tokens_per_sample" in data["workload"]
    report = RunReport.model_validate(data)
    assert report.schema_version == RUN_REPORT_SCHEMA_VERSION and report.workload.batches == FilledBatches()
    assert report.workload.seq_len == data["workload"]["seq_len"]


@pytest.mark.parametrize(
    ("num_samples", "epochs", "world", "steps"),
    [(13, 1, 1, 3), (13, 2, 1, 6), (12, 1, 1, 2), (13, 1, 2, 2), (1, 3, 4, 3), (100, 0.5, 1, 9)],
)
def test_optimizer_steps_follow_the_trainer(num_samples: int, epochs: float, world: int, steps: int) -> None:
    """mbs 2 × ga 3: ⌈epochs × ⌈⌈⌈N / world⌉ / 2⌉ / 3⌉⌉ (transformers' set_initial_training_values), not N·E / 6."""
    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=3)
    workload = Workload(seq_len=32, global_batch_size=6 * world, num_samples=num_samples, epochs=epochs)
    assert workload.optimizer_steps(setting, world) == steps
    assert Workload(seq_len=32, global_batch_size=6).optimizer_steps(setting, 1) is None


def test_dataset_tokens_make_whole_global_batches_of_their_sequences() -> None:
    """Without a sample count the sequences are the tokens ÷ real tokens per sequence, the steps those ÷ the batch."""
    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=3)
    padded = Workload(seq_len=64, dataset_tokens=7000, epochs=2, batches=PaddedBatches(tokens_per_sample=35.0))
    assert padded.total_samples == pytest.approx(400.0)
    assert padded.optimizer_steps(setting, 2) == math.ceil(400 / 12)
    assert Workload(seq_len=64, dataset_tokens=6400).optimizer_steps(setting, 1) == math.ceil(100 / 6)
