"""The masked-attention note: said where sdpa gets a mask on the user's data and flash_attention_2 is faster."""

from __future__ import annotations

import pytest

from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import estimate_setting
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import PackedBatches, Workload
from autotune.session.attention_note import NOTED_SPEEDUP, masked_attention_notes

MODEL = resolve_model_profile("llama3-8b")
COEFFICIENTS = default_coefficients()
SYNTHETIC = Workload(seq_len=4096, global_batch_size=8)
PACKED = SYNTHETIC.model_copy(
    update={"batches": PackedBatches(attention_span_tokens=600.0, multi_example_block_share=0.9)}
)


def _notes(setting: TrainingSetting, workload: Workload, gpu: str = "h100") -> list[str]:
    cluster = ClusterSpec(gpu=resolve_gpu(gpu)[0])
    own = estimate_setting(MODEL, cluster, workload, setting, COEFFICIENTS)
    return masked_attention_notes(MODEL, cluster, workload, setting, COEFFICIENTS, own.step_time_s)


def test_packed_sdpa_blocks_are_noted_with_both_step_times() -> None:
    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=4, attention_impl="sdpa")
    (note,) = _notes(setting, PACKED)
    cluster = ClusterSpec(gpu=resolve_gpu("h100")[0])
    sdpa = estimate_setting(MODEL, cluster, PACKED, setting, COEFFICIENTS)
    flash = estimate_setting(
        MODEL, cluster, PACKED, setting.model_copy(update={"attention_impl": "flash_attention_2"}), COEFFICIENTS
    )
    assert flash.step_time_s < sdpa.step_time_s * (1 - NOTED_SPEEDUP)
    assert "--attention-impl flash_attention_2" in note and "99% of the micro batches" in note
    assert f"step {sdpa.step_time_s:.3g} s → {flash.step_time_s:.3g} s" in note


@pytest.mark.parametrize(
    ("attention_impl", "workload", "gpu"),
    [
        ("sdpa", SYNTHETIC, "h100"),  # every sequence full, one per row: no mask
        ("flash_attention_2", PACKED, "h100"),  # already the flash kernel
        ("eager", PACKED, "h100"),  # scores materialised either way
        ("sdpa", PACKED, "rx-7900-xtx"),  # no flash kernel to lose
        ("sdpa", PACKED, "t4"),  # memory-efficient kernel either way; flash-attn 2 needs Ampere or newer
        ("sdpa", PACKED, "v100-32gb"),
    ],
)
def test_no_note_where_no_mask_costs_a_flash_kernel(attention_impl: str, workload: Workload, gpu: str) -> None:
    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=4, attention_impl=attention_impl)
    assert _notes(setting, workload, gpu) == []
