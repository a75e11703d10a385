"""The global batch the planner chooses when none was stated and nothing fits at the default (planner.batch_choice)."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.errors import InfeasibleError
from autotune.planner import build_plan_file, search
from autotune.planner.batch_choice import keeps_headroom_reserved, smaller_global_batches
from autotune.planner.grid import plan_row
from autotune.planner.sweep import plan_cell
from autotune.session.planning import DEFAULT_GLOBAL_BATCH_SIZE, PlanOptions, plan_from_options
from autotune.session.setting_options import SettingOptions

TORCHTUNE_4090_FULL_GIB = 18.9
"""torchtune README, "Memory and training speed": Llama 3.1 8B full fine-tune on 1× 4090 at batch 2 (30b8519e)."""


def test_the_readme_full_command_fits_a_4090_at_a_batch_the_planner_chose() -> None:
    """``plan llama3-8b --gpu 4090 --method full --seq-len 2048``: fits, ≤ 22 GiB reserved, torchtune's memory ±10 %."""
    options = PlanOptions(model="llama3-8b", gpu="4090", seq_len=2048, setting=SettingOptions(method="full"))
    plan_file, result, notes = plan_from_options(options)
    setting, estimate = plan_file.setting, plan_file.prediction
    assert plan_file.workload.global_batch_size == setting.micro_batch_size < DEFAULT_GLOBAL_BATCH_SIZE
    assert setting.optimizer_in_backward and setting.grad_accum == 1 and estimate.fits
    assert estimate.peak_reserved_gib <= 22
    assert abs(estimate.peak_memory_gib / TORCHTUNE_4090_FULL_GIB - 1) <= 0.10
    batch_notes = [note for note in notes if note.startswith("global batch ")]
    assert len(batch_notes) == 1 and result.notes[0] == batch_notes[0]
    assert f"default {DEFAULT_GLOBAL_BATCH_SIZE}" in batch_notes[0]
    assert f"--global-batch-size {DEFAULT_GLOBAL_BATCH_SIZE} keeps the default" in batch_notes[0]


def test_the_chosen_batch_is_the_largest_that_keeps_the_headroom_on_the_reserved_peak() -> None:
    """Every larger power of two either does not fit or leaves the reserved peak without the headroom."""
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="full")
    result = search(request)
    chosen = result.planned_workload(request).global_batch_size
    assert keeps_headroom_reserved(result.best.estimate)
    for larger in [size for size in smaller_global_batches(request) if size > chosen]:
        stated, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="full", global_batch_size=larger)
        try:
            assert not keeps_headroom_reserved(search(stated).best.estimate)
        except InfeasibleError:
            continue


def test_a_stated_global_batch_is_never_changed() -> None:
    """The same request with ``--global-batch-size 32`` given: refused, not re-batched."""
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="full", global_batch_size=32)
    assert request.global_batch_stated
    with pytest.raises(InfeasibleError):
        search(request)


def test_the_default_is_kept_where_something_fits_at_it() -> None:
    """Unstated and fitting at 32 (LoRA on the 4090): the global batch stays 32 and no note is added."""
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048)
    assert not request.global_batch_stated
    result = search(request)
    assert result.workload is None and result.notes == ()
    assert build_plan_file(request, result).workload.global_batch_size == DEFAULT_GLOBAL_BATCH_SIZE


def test_nothing_fitting_at_any_smaller_batch_is_still_refused() -> None:
    """A 70B full fine-tune on one 24 GB card fits at no global batch: the refusal stays."""
    request, _ = plan_request(model="llama3-70b", gpu="4090", seq_len=2048, method="full")
    with pytest.raises(InfeasibleError, match="nothing fits"):
        search(request)


@pytest.mark.parametrize(("num_gpus", "expected"), [(1, [16, 8, 4, 2, 1]), (4, [16, 8, 4])])
def test_smaller_batches_halve_and_stay_whole_per_gpu(num_gpus: int, expected: list[int]) -> None:
    """Halvings of the global batch 32 that every GPU still divides."""
    request, _ = plan_request(model="llama3-8b", gpu="h100", num_gpus=num_gpus)
    assert smaller_global_batches(request) == expected


def test_sweep_cells_and_grid_rows_keep_the_global_batch() -> None:
    """A sweep's cells and a grid's rows are compared at one global batch: unstated, it is still not changed."""
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="full")
    assert plan_cell(request, "full").status == "infeasible"
    assert plan_row("rtx-4090", 1, 1, None, request).error is not None
