"""Which of a few timed rows is not one stack's speed (autotune.calibration.outliers)."""

from __future__ import annotations

import math

import pytest
from time_rows import START, row

from autotune.calibration.outliers import loo_tail_probability, outlier_rows, student_t_two_sided
from autotune.calibration.stack_fit import row_log_sigma


@pytest.mark.parametrize(
    ("t", "dof", "expected"),
    [  # two-sided tail probabilities from the t table (Abramowitz & Stegun table 26.10)
        (12.706, 1, 0.05),
        (4.303, 2, 0.05),
        (2.776, 4, 0.05),
        (4.604, 4, 0.01),
        (2.571, 5, 0.05),
        (3.707, 6, 0.01),
    ],
)
def test_student_t_tail_matches_the_table(t: float, dof: int, expected: float) -> None:
    assert student_t_two_sided(t, dof) == pytest.approx(expected, rel=2e-3)
    assert student_t_two_sided(-t, dof) == student_t_two_sided(t, dof)


def test_an_outlier_needs_a_majority_to_stand_against() -> None:
    rows = [row(1.3), row(1.31, seq_len=1024), row(1.29, seq_len=512), row(17.0, seq_len=256)]
    assert [r.measured_s for r in outlier_rows(rows, START)] == [rows[3].measured_s]
    assert outlier_rows(rows[2:], START) == []  # two rows that disagree: no telling which is off
    assert outlier_rows(rows[:3], START) == []


def test_a_row_6x_off_is_named_when_another_is_2x_off() -> None:
    """Three rows: 1×, 2× and 6× the start. The old 3×-median rule kept all three (the median was the 2× row)."""
    rows = [row(1.0), row(2.0, seq_len=1024), row(6.0, seq_len=512)]
    assert [r.measured_s for r in outlier_rows(rows, START)] == [rows[2].measured_s]
    ratios = [math.log(x) for x in (1.0, 2.0, 6.0)]
    # the 1× and 2× rows are within what the others' scatter allows; the 6× row is not
    assert loo_tail_probability(ratios, 0, 3) > 0.05
    assert loo_tail_probability(ratios, 2, 3) < 0.02


def test_a_row_off_by_a_setting_sized_error_is_kept() -> None:
    """Three rows that agree within 1 % and one 60 % slower: far outside their scatter, but a setting can do that."""
    rows = [row(1.0), row(1.01, seq_len=1024), row(0.99, seq_len=512), row(1.6, seq_len=256)]
    assert outlier_rows(rows, START) == []


def test_the_leave_one_out_scatter_from_totals_matches_the_others_and_large_dof_is_normal() -> None:
    ratios = [0.1, 0.12, -0.05, 0.3, 0.02]
    for index in range(len(ratios)):
        others = [x for i, x in enumerate(ratios) if i != index]
        centre = sum(others) / len(others)
        scale = row_log_sigma(others) * math.sqrt(1 + 1 / len(others))
        expected = student_t_two_sided((ratios[index] - centre) / scale, 3 + len(others) - 1)
        assert loo_tail_probability(ratios, index, 3) == pytest.approx(expected, rel=1e-9)
    assert student_t_two_sided(1.96, 100_000) == pytest.approx(0.05, abs=1e-3)
    assert student_t_two_sided(2.5, 999) == pytest.approx(student_t_two_sided(2.5, 1001), abs=2e-4)  # NORMAL_DOF
