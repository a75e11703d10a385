"""autotune.costmodel.context: one attention rule (flash or math) for memory and time alike."""

from __future__ import annotations

import pytest

from autotune.costmodel.context import setting_context
from autotune.costmodel.memory import predict_memory
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

PRIORS = CostCoefficients()


LLAMA = resolve_model_profile("llama3-8b")


def test_a_gpu_without_flash_attention_runs_math_attention_in_memory_and_time_alike() -> None:
    """RX 7900 XTX (``supports_flash_attention: false``): SDPA falls back to the math path, so the scores are
    materialised (memory grows faster than linearly in seq_len) and every score is computed (attention time grows
    4× per doubling); the same GPU with a flash kernel gets neither, from the same one rule."""
    xtx = resolve_gpu("rx-7900-xtx")[0]
    as_if_flash = xtx.model_copy(update={"supports_flash_attention": True})
    setting = TrainingSetting(method="lora", grad_ckpt=True)

    def run(gpu: object, seq: int) -> tuple[bool, float, float]:
        cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=1)  # type: ignore[arg-type]
        workload = Workload(seq_len=seq, global_batch_size=1)
        flash = setting_context(LLAMA, setting, cluster, workload).flash_attention
        memory = predict_memory(LLAMA, setting, cluster, workload, PRIORS)
        activations = memory.breakdown_bytes.get("activations", 0.0) + memory.breakdown_bytes.get("logits + loss", 0)
        attention = predict_time(LLAMA, setting, cluster, workload, PRIORS).breakdown_s["attention"]
        return flash, activations, attention

    math_runs = [run(xtx, seq) for seq in (2048, 4096, 8192)]
    flash_runs = [run(as_if_flash, seq) for seq in (2048, 4096, 8192)]
    assert [flash for flash, _, _ in math_runs] == [False] * 3
    assert [flash for flash, _, _ in flash_runs] == [True] * 3
    # time: all s² scores computed (×4 per doubling once the kernel is saturated), twice the causal half flash computes
    assert math_runs[2][2] / math_runs[1][2] == pytest.approx(4, rel=0.02)
    assert math_runs[2][2] > 1.6 * flash_runs[2][2]  # 2× the FLOPs; backward 2× (math) vs 2.5× (flash)
    # memory: the scores make the activations grow faster than linearly, and only on the math path
    math_growth = (math_runs[2][1] - math_runs[1][1]) / (math_runs[1][1] - math_runs[0][1])
    flash_growth = (flash_runs[2][1] - flash_runs[1][1]) / (flash_runs[1][1] - flash_runs[0][1])
    assert math_growth > 2.5 > flash_growth
    assert all(m[1] > f[1] for m, f in zip(math_runs, flash_runs, strict=True))


def test_padded_batches_are_timed_at_the_expected_longest_and_sized_for_the_longest() -> None:
    """A padded dataset workload: time at E[longest of the micro batch] (as a filled workload of that many tokens),
    activation memory at the longest example (as a filled workload of that length): the worst micro batch. Eager
    attention masks both alike; under sdpa the padded rows would also take the masked path
    (tests/unit/costmodel/test_masked_attention.py)."""
    from autotune.schemas.workload import PaddedBatches, PaddedLengths, expected_longest

    gpu = resolve_gpu("rtx-4090")[0]
    cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=1)
    setting = TrainingSetting(method="lora", grad_ckpt=False, micro_batch_size=4, attention_impl="eager")
    quantiles = (100, 200, 400, 900)
    lengths = PaddedLengths(quantiles=quantiles, longest_tokens=1500)
    padded = Workload(seq_len=2048, batches=PaddedBatches(tokens_per_sample=250.0, lengths=lengths))
    expected = expected_longest(quantiles, 4)
    context = setting_context(LLAMA, setting, cluster, padded)
    assert context.seq_tokens == pytest.approx(expected) and context.peak_seq_tokens == 1500
    as_timed = Workload(seq_len=2048, batches=PaddedBatches(tokens_per_sample=expected))
    as_sized = Workload(seq_len=2048, batches=PaddedBatches(tokens_per_sample=1500.0))
    time_of = predict_time(LLAMA, setting, cluster, padded, PRIORS).micro_step_time_s
    assert time_of == pytest.approx(predict_time(LLAMA, setting, cluster, as_timed, PRIORS).micro_step_time_s)
    memory_of = predict_memory(LLAMA, setting, cluster, padded, PRIORS).peak_allocated_bytes
    assert memory_of == pytest.approx(predict_memory(LLAMA, setting, cluster, as_sized, PRIORS).peak_allocated_bytes)
    assert memory_of > predict_memory(LLAMA, setting, cluster, as_timed, PRIORS).peak_allocated_bytes
