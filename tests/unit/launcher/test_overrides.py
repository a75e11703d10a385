"""``--set key=value``: parsing, errors, the global batch, and the re-estimate through injected functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from plans import estimate, make_plan

from autotune.errors import InvalidRequestError
from autotune.launcher import apply_overrides, changed_fields
from autotune.launcher.overrides import parse_overrides
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

GPU = GpuSpec(
    key="fake-gpu",
    name="Fake GPU",
    vendor="nvidia",
    architecture="test",
    memory_gib=24.0,
    memory_bandwidth_gb_per_s=1000.0,
    bf16_tflops=100.0,
    fp16_tflops=100.0,
    fp32_tflops=50.0,
    supports_bf16=True,
    supports_bitsandbytes=True,
    host_link="PCIe 4.0 x16",
    host_link_gb_per_s=32.0,
    source="test fixture",
)


@dataclass
class FakeEstimator:
    """Records its calls; 'fits' while peak (a linear toy of micro batch × seq_len) stays under 24 GiB."""

    calls: list[tuple[ModelSpec, ClusterSpec, Workload, TrainingSetting]] = field(default_factory=list)
    gpu_keys: list[str] = field(default_factory=list)

    def estimate(
        self, model: ModelSpec, cluster: ClusterSpec, workload: Workload, setting: TrainingSetting
    ) -> Estimate:
        self.calls.append((model, cluster, workload, setting))
        peak = 10.0 + 4.0 * setting.micro_batch_size * workload.seq_len / 2048
        return estimate(peak_gib=peak, fits=peak + 1.5 <= 24.0)

    def resolve_gpu(self, key: str) -> GpuSpec:
        self.gpu_keys.append(key)
        return GPU


def apply(plan: PlanFile, *sets: str, fake: FakeEstimator | None = None) -> PlanFile:
    fake = fake or FakeEstimator()
    return apply_overrides(plan, list(sets), estimate=fake.estimate, resolve_gpu=fake.resolve_gpu)


def test_no_overrides_returns_the_plan_without_estimating() -> None:
    plan = make_plan()
    fake = FakeEstimator()
    assert apply(plan, fake=fake) is plan
    assert fake.calls == []


def test_values_are_parsed_by_the_schema() -> None:
    plan = make_plan(grad_ckpt=True)
    new = apply(
        plan,
        "setting.grad_ckpt=false",
        "workload.seq_len=1024",
        "lora_targets=q_proj,v_proj",
        "lora_alpha=16",
    )
    assert new.setting.grad_ckpt is False
    assert new.workload.seq_len == 1024
    assert new.setting.lora_targets == ("q_proj", "v_proj")
    assert new.setting.lora_alpha == 16.0


def test_none_word_for_optional_field() -> None:
    plan = make_plan(workload={"num_samples": 100})
    assert apply(plan, "num_samples=none").workload.num_samples is None


def test_later_key_wins() -> None:
    assert parse_overrides(["seq_len=1", "workload.seq_len=2"])["workload"] == {"seq_len": "2"}


def test_prediction_is_recomputed_with_the_new_values() -> None:
    plan = make_plan(micro_batch_size=1, grad_accum=8, gpus=2)
    fake = FakeEstimator()
    new = apply(plan, "micro_batch_size=4", fake=fake)
    (model, cluster, workload, setting) = fake.calls[0]
    assert model == plan.model
    assert (cluster.gpu, cluster.num_gpus_per_node, cluster.num_nodes) == (GPU, 2, 1)
    assert setting == new.setting and workload == new.workload
    assert new.prediction.peak_memory_gib == 10.0 + 4.0 * 4
    assert new.prediction.fits is False
    assert fake.gpu_keys == [plan.cluster.gpu]


def test_cluster_override_resolves_the_new_gpu() -> None:
    fake = FakeEstimator()
    new = apply(make_plan(), "gpu=a100-80gb", fake=fake)
    assert new.cluster.gpu == "a100-80gb" and fake.gpu_keys == ["a100-80gb"]


def test_micro_batch_change_keeps_the_global_batch() -> None:
    plan = make_plan(micro_batch_size=1, grad_accum=16, gpus=2)  # global 32
    new = apply(plan, "micro_batch_size=4")
    assert (new.setting.micro_batch_size, new.setting.grad_accum, new.workload.global_batch_size) == (
        4,
        4,
        32,
    )
    assert changed_fields(plan, new) == [("setting.micro_batch_size", 1, 4), ("setting.grad_accum", 16, 4)]


def test_gpu_count_change_keeps_the_global_batch() -> None:
    new = apply(make_plan(sharding="ddp", micro_batch_size=2, grad_accum=8, gpus=2), "num_gpus_per_node=4")
    assert (new.setting.grad_accum, new.workload.global_batch_size) == (4, 32)


def test_grad_accum_change_moves_the_global_batch() -> None:
    new = apply(make_plan(micro_batch_size=2, grad_accum=4, gpus=2), "grad_accum=8")
    assert new.workload.global_batch_size == 2 * 8 * 2


def test_global_batch_change_moves_grad_accum() -> None:
    new = apply(make_plan(micro_batch_size=2, grad_accum=4, gpus=2), "global_batch_size=64")
    assert new.setting.grad_accum == 16


def test_indivisible_global_batch_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="global_batch_size 32") as error:
        apply(make_plan(micro_batch_size=1, grad_accum=16, gpus=2), "micro_batch_size=3")
    assert "\n" not in str(error.value)


def test_contradicting_batch_values_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="grad_accum"):
        apply(make_plan(micro_batch_size=1, grad_accum=16), "grad_accum=2", "global_batch_size=64")


def test_non_batch_override_leaves_batches_alone() -> None:
    plan = make_plan(micro_batch_size=2, grad_accum=4)
    new = apply(plan, "seq_len=512")
    assert (new.setting, new.workload.global_batch_size) == (plan.setting, plan.workload.global_batch_size)


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("micro_batchsize=2", "did you mean 'micro_batch_size'"),
        ("setting.seq_len=2", "unknown key 'setting.seq_len'"),
        ("foo.bar=1", "unknown key 'foo.bar'"),
        ("micro_batch_size", "expects key=value"),
        ("=3", "expects key=value"),
    ],
)
def test_bad_keys(item: str, expected: str) -> None:
    with pytest.raises(InvalidRequestError) as error:
        apply(make_plan(), item)
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_unknown_key_lists_valid_keys() -> None:
    with pytest.raises(InvalidRequestError) as error:
        apply(make_plan(), "zzz=1")
    assert "setting.micro_batch_size" in str(error.value) and "workload.seq_len" in str(error.value)


@pytest.mark.parametrize(
    ("item", "field_name"),
    [
        ("micro_batch_size=0", "micro_batch_size"),
        ("grad_ckpt=perhaps", "grad_ckpt"),
        ("sharding=tp", "sharding"),
        ("seq_len=long", "seq_len"),
        ("num_nodes=0", "num_nodes"),
    ],
)
def test_bad_values_name_the_key(item: str, field_name: str) -> None:
    with pytest.raises(InvalidRequestError) as error:
        apply(make_plan(), item)
    message = str(error.value)
    assert message.startswith("--set ") and field_name in message and "\n" not in message


def test_cross_field_error_of_the_schema() -> None:
    with pytest.raises(InvalidRequestError, match="qlora"):
        apply(make_plan(method="qlora"), "precision=fp32")


def test_changed_fields_lists_only_differences() -> None:
    plan = make_plan()
    other: Any = plan.model_copy(update={"workload": plan.workload.model_copy(update={"epochs": 3.0})})
    assert changed_fields(plan, other) == [("workload.epochs", 1.0, 3.0)]
