"""The eval set in the planned workload: ``--eval-fraction`` held out as the core splits, an eval file's tokens."""

from __future__ import annotations

import pytest

from autotune.errors import InvalidRequestError
from autotune.planner.evaluation import with_eval
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.trainer_options import held_out_rows
from autotune.schemas.workload import EvalSet, Workload


@pytest.mark.parametrize(("rows", "fraction"), [(1000, 0.1), (40, 0.2), (13, 0.3), (7, 0.25)])
def test_a_fraction_holds_out_the_cores_rows_and_trains_on_the_rest(rows: int, fraction: float) -> None:
    workload = with_eval(Workload(num_samples=rows, global_batch_size=4), eval_steps=3, eval_fraction=fraction)
    held = round(rows * fraction)  # trainer.train._eval_split: train_test_split(test_size=round(len × F))
    assert held_out_rows(rows, fraction) == held
    assert (workload.num_samples, workload.eval) == (rows - held, EvalSet(samples=held, steps=3))
    setting = TrainingSetting(micro_batch_size=2, grad_accum=2)
    assert workload.optimizer_steps(setting, 1) == Workload(num_samples=rows - held).optimizer_steps(setting, 1)


def test_a_dataset_s_sequences_shrink_by_the_held_out_rows_share() -> None:
    """60 rows packed into 20 blocks, 6 rows held out: 2 blocks' worth evaluated, 18 trained."""
    workload = with_eval(Workload(num_samples=20), eval_steps=None, eval_fraction=0.1, rows=60)
    assert (workload.num_samples, workload.eval) == (18, EvalSet(samples=2))


def test_a_dataset_of_one_block_keeps_a_block_on_each_side() -> None:
    """10 short rows packed into 1 block, 2 held out: the core splits the rows first and packs each side, so the
    plan prices one block trained and one evaluated (not a refusal)."""
    workload = with_eval(Workload(num_samples=1), eval_steps=None, eval_fraction=0.2, rows=10)
    assert (workload.num_samples, workload.eval) == (1, EvalSet(samples=1))


def test_dataset_tokens_lose_the_fraction() -> None:
    workload = with_eval(Workload(seq_len=1000, dataset_tokens=100_000), eval_steps=None, eval_fraction=0.2)
    assert (workload.dataset_tokens, workload.eval) == (80_000, EvalSet(samples=20))


def test_an_eval_dataset_adds_its_tokens_as_sequences_and_trains_on_everything() -> None:
    workload = with_eval(Workload(seq_len=512, num_samples=100), eval_steps=10, eval_tokens=512 * 7 + 1)
    assert (workload.num_samples, workload.eval) == (100, EvalSet(samples=8, steps=10))


def test_without_a_size_nothing_is_priced() -> None:
    workload = with_eval(Workload(), eval_steps=4, eval_fraction=0.1)
    assert workload.eval == EvalSet(steps=4) and workload.num_evals(10) == 0
    assert with_eval(Workload(), eval_steps=None, eval_fraction=0.1).eval is None


@pytest.mark.parametrize(("rows", "fraction"), [(10, 0.01), (1, 0.4)])
def test_a_fraction_that_leaves_a_side_empty_is_refused(rows: int, fraction: float) -> None:
    with pytest.raises(InvalidRequestError, match="--eval-fraction"):
        with_eval(Workload(num_samples=rows), eval_steps=None, eval_fraction=fraction)
