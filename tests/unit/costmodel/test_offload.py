"""autotune.costmodel.offload: PCIe weight / gradient streaming under CPU offload grows with the bytes streamed and
shrinks with the host link; a micro-step is never shorter than the bytes streamed in over the achievable link."""

from __future__ import annotations

import itertools

import pytest

from autotune.costmodel.context import setting_context
from autotune.costmodel.device import device_context
from autotune.costmodel.memory import base_weight_bytes
from autotune.costmodel.offload import streamed_exposed_s
from autotune.costmodel.optimizer_step import host_link_bytes_per_s
from autotune.costmodel.params import count_params
from autotune.costmodel.step_time import predict_time, predict_time_in
from autotune.profiles.catalog import list_gpus, resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

PRIORS = CostCoefficients()
WORKLOAD = Workload(seq_len=2048, global_batch_size=8)
WEIGHTS, GRADS = "pcie weight streaming", "pcie gradient streaming"


def _terms(model: str, gpu_key: str, setting: TrainingSetting, link_gb_per_s: float | None = None) -> dict[str, float]:
    gpu = resolve_gpu(gpu_key)[0]
    if link_gb_per_s is not None:
        gpu = gpu.model_copy(update={"host_link_gb_per_s": link_gb_per_s})
    timing = predict_time(resolve_model_profile(model), setting, ClusterSpec(gpu=gpu), WORKLOAD, PRIORS)
    return timing.breakdown_s


def test_the_overlap_rule_exposes_the_first_copy_and_each_copy_beyond_the_previous_compute() -> None:
    assert streamed_exposed_s(0.5, 0.2, 0.1, 3) == pytest.approx(0.5 + 3 * 0.1)
    assert streamed_exposed_s(0.5, 0.2, 0.3, 3) == pytest.approx(0.5)  # every later copy hidden


@pytest.mark.parametrize("sharding", ["fsdp-offload", "zero3-offload"])
def test_weight_streaming_grows_with_the_weights_and_shrinks_with_the_host_link(sharding: str) -> None:
    setting = TrainingSetting(method="lora", sharding=sharding, micro_batch_size=1, grad_accum=8)
    small = _terms("llama3.2-1b", "4090", setting)[WEIGHTS]
    large = _terms("llama3-8b", "4090", setting)[WEIGHTS]
    slow_link = _terms("llama3-8b", "4090", setting, link_gb_per_s=8.0)[WEIGHTS]
    assert 0 < small < large < slow_link
    assert _terms("llama3-8b", "4090", TrainingSetting(method="lora", sharding="none"))[WEIGHTS] == 0.0


def test_full_fine_tuning_streams_gradients_out_lora_almost_none() -> None:
    full = TrainingSetting(method="full", sharding="fsdp-offload", precision="bf16", micro_batch_size=1, grad_accum=8)
    lora = TrainingSetting(method="lora", sharding="fsdp-offload", micro_batch_size=1, grad_accum=8)
    full_grads = _terms("llama3.2-1b", "4090", full)[GRADS]
    assert full_grads > 100 * _terms("llama3.2-1b", "4090", lora)[GRADS]
    assert _terms("llama3.2-1b", "4090", full, link_gb_per_s=8.0)[GRADS] > full_grads


def test_fsdp_offload_on_one_gpu_waits_for_every_gradient_copy() -> None:
    """FSDP1's NO_SHARD (one GPU) offloads gradients with a blocking copy (``_runtime_utils._offload_grad``:
    ``non_blocking=handle.uses_sharded_strategy ...``): at a micro batch whose backward could hide every copy, the
    whole gradient copy is still exposed on one GPU, while FULL_SHARD on two GPUs (non-blocking) hides all but the
    last unit's."""
    model, gpu = resolve_model_profile("llama3.2-1b"), resolve_gpu("h200")[0]
    full = TrainingSetting(method="full", sharding="fsdp-offload", precision="bf16", micro_batch_size=16, grad_accum=1)
    grads_over_link_s = count_params(model).total_params * 2.0 / host_link_bytes_per_s(gpu, PRIORS)
    one = predict_time(model, full, ClusterSpec(gpu=gpu), Workload(seq_len=2048, global_batch_size=16), PRIORS)
    assert one.breakdown_s[GRADS] == pytest.approx(grads_over_link_s, rel=1e-6)
    two_gpus = ClusterSpec(gpu=gpu, num_gpus_per_node=2)
    two = predict_time(model, full, two_gpus, Workload(seq_len=2048, global_batch_size=32), PRIORS)
    assert two.breakdown_s[GRADS] < 0.5 * grads_over_link_s / 2  # its shard: the root unit's and last layer's


def test_the_first_unit_of_each_pass_is_exposed_even_where_compute_could_hide_the_whole_copy() -> None:
    """Llama-3-8B LoRA on a 3090 at micro batch 8: the layers' compute covers their copies, the embedding / output
    projection and the first layer's copy of each pass have nothing to hide behind (a micro-step's total would hide
    them all)."""
    model, gpu = resolve_model_profile("llama3-8b"), resolve_gpu("3090")[0]
    setting = TrainingSetting(method="lora", sharding="zero3-offload", micro_batch_size=8, grad_accum=1)
    context = setting_context(model, setting, ClusterSpec(gpu=gpu), WORKLOAD)
    counts = context.counts
    layer_params = counts.attention_params_per_layer + counts.mlp_params_per_layer
    first_unit_params = counts.total_params - context.layers * layer_params + layer_params
    first_s = first_unit_params * context.dtypes.weight_bytes / host_link_bytes_per_s(gpu, PRIORS)
    timing = predict_time_in(context, PRIORS, device_context(context.gpu, PRIORS))
    assert timing.breakdown_s[WEIGHTS] == pytest.approx(2 * first_s, rel=0.01)  # forward and backward


PCIE4 = sorted(gpu.key for gpu in list_gpus() if gpu.host_link.startswith("PCIe 4.0"))


@pytest.mark.parametrize("gpu_key", PCIE4)
def test_an_offloaded_micro_step_is_never_shorter_than_its_weights_over_the_achievable_link(gpu_key: str) -> None:
    gpu = resolve_gpu(gpu_key)[0]
    cluster = ClusterSpec(gpu=gpu)
    bandwidth = host_link_bytes_per_s(gpu, PRIORS)  # the stated achievable fraction of the link
    cases = itertools.product(
        ("llama3.2-1b", "llama3-8b"),
        ("full", "lora", "qlora"),
        ("fsdp-offload", "zero3-offload"),
        (1, 8),
        (False, True),
        (128, 4096),
    )
    checked = 0
    for model_key, method, sharding, micro, ckpt, seq_len in cases:
        model = resolve_model_profile(model_key)
        precision = "bf16" if method == "full" else "bf16-mixed"
        setting = TrainingSetting(
            method=method, sharding=sharding, micro_batch_size=micro, grad_ckpt=ckpt, precision=precision
        )
        context = setting_context(model, setting, cluster, Workload(seq_len=seq_len, global_batch_size=micro))
        streamed_bytes = 2 * base_weight_bytes(model, context.counts, setting, context.dtypes)  # forward + backward
        micro_step_s = predict_time_in(context, PRIORS, device_context(context.gpu, PRIORS)).micro_step_time_s
        assert micro_step_s >= streamed_bytes / bandwidth, (model_key, method, sharding, micro, ckpt, seq_len)
        checked += 1
    assert checked == 96
