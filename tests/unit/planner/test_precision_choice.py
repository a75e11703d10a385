"""Pure bf16 against fp32 master weights for full fine-tuning: the quality order and its note (precision_choice)."""

from __future__ import annotations

from plan_requests import plan_request

from autotune.planner import search
from autotune.planner.precision_choice import precision_choices, precision_rank, without_master_copy


def _full(gpu: str, **options: object):
    request, _ = plan_request(model="llama3-8b", gpu=gpu, seq_len=2048, method="full", **options)
    return search(request)


def test_quality_ranks_fp32_master_weights_before_pure_bf16_where_both_fit() -> None:
    """On an H200 both fit: quality takes fp32 master weights, speed the faster pure bf16; quality's note says so."""
    quality, speed = _full("h200"), _full("h200", objective="speed")
    assert quality.best.setting.precision == "bf16-mixed"
    assert without_master_copy(speed.best.setting) and speed.best.run_time_s < quality.best.run_time_s
    (note,) = [note for note in quality.notes if note.startswith("precision: ")]
    assert "pure bf16 also fits" in note and "--precision bf16" in note
    ratio = float(note.split("would take ")[1].split("×")[0])
    assert ratio < 1  # pure bf16 is the faster one


def test_pure_bf16_where_only_it_fits_says_what_it_trades() -> None:
    """On the 4090 only pure bf16 fits (at the planner's global batch): the note names the rounding and the reason."""
    result = _full("4090")
    assert without_master_copy(result.best.setting)
    (note,) = [note for note in result.notes if note.startswith("precision: ")]
    assert "no fp32 master copy" in note and "Zamirai" in note and "no bf16-mixed full fine-tune" in note


def test_a_forced_precision_is_planned_without_the_note_or_the_order() -> None:
    """--precision bf16 on the H200: pure bf16 although fp32 master weights fit, no note, and the order among the
    forced precision's settings is the speed one (DeepSpeed's master copy is not preferred for it)."""
    result = _full("h200", precision="bf16")
    assert result.best.setting.precision == "bf16"
    assert not [note for note in result.notes if note.startswith("precision: ")]
    assert precision_rank(result.best.setting) == 1
    assert all(precision_rank(alt.setting) == 1 for alt in result.alternatives if alt.setting.method == "full")


def test_only_full_fine_tuning_outside_deepspeed_has_the_choice() -> None:
    """Adapters and DeepSpeed (which keeps its own fp32 master copy) are offered one precision; no bf16: fp16 mixed."""
    assert precision_choices("bf16", "full", "none") == ("bf16", "bf16-mixed")
    assert precision_choices("bf16", "full", "fsdp") == ("bf16", "bf16-mixed")
    assert precision_choices("bf16", "lora", "none") == ("bf16",)
    assert precision_choices("bf16", "full", "zero3-offload") == ("bf16",)
    assert precision_choices("fp16-mixed", "full", "none") == ("fp16-mixed",)
    lora = _full("h200").alternatives
    assert all(alt.setting.precision == "bf16" for alt in lora if alt.setting.method != "full")
