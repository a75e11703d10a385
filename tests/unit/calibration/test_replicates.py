"""Rows of one setting are replicates (autotune.calibration.replicates): the same fit, correction and held-out errors
as their mean, computed over settings instead of rows."""

from __future__ import annotations

import math

import pytest
from time_rows import START, row

from autotune.calibration import held_out
from autotune.calibration.coverage import gls_mean, row_point
from autotune.calibration.held_out import loo_time_errors
from autotune.calibration.replicates import MAX_FIT_SETTINGS, fitted_settings, replicate_groups, row_log_ratios
from autotune.calibration.stack_fit import fit_stack, fitted_correction
from autotune.calibration.time_fit import TimeRow, predicted_time_s


def replicated(timed: TimeRow, *scales: float) -> list[TimeRow]:
    """``timed``'s setting measured again at each scale × its time (the same case objects, as the CSV reader shares)."""
    return [TimeRow(timed.case, timed.kind, timed.measured_s * scale) for scale in scales]


def test_rows_of_one_setting_are_one_group_with_their_geometric_mean() -> None:
    first, other = row(1.5), row(1.5, seq_len=512)
    rows = [*replicated(first, 1.0, 1.1, 0.9), other]
    groups = replicate_groups(rows)
    assert [g.count for g in groups] == [3, 1]
    assert groups[0].row.measured_s == pytest.approx(first.measured_s * (1.1 * 0.9) ** (1 / 3))
    assert groups[1].row is other  # a setting measured once is its own row, unchanged
    assert len(row_log_ratios(groups, START)) == 4
    # equal values from separate objects (two run directories of one plan) are one setting too
    assert [g.count for g in replicate_groups([row(1.5), row(1.6)])] == [2]


def test_a_setting_measured_c_times_is_its_mean_with_the_noise_over_c() -> None:
    """The GLS mean over the rows equals that over the settings' means (exact algebra)."""
    a, b = row(1.0), row(1.0, seq_len=8192, method="full")
    points_rows = [row_point(a)] * 3 + [row_point(b)]
    ratios = [0.10, 0.25, 0.16, -0.05]
    local, noise = 0.04, 0.01
    by_rows = gls_mean(ratios, points_rows, local, noise)
    means = [sum(ratios[:3]) / 3, ratios[3]]
    by_settings = gls_mean(means, [row_point(a), row_point(b)], local, noise, [3, 1])
    assert by_settings.mean == pytest.approx(by_rows.mean, rel=1e-9)
    assert by_settings.standard_error == pytest.approx(by_rows.standard_error, rel=1e-9)


def test_replicates_fit_as_their_mean_and_are_held_out_together() -> None:
    spread = [row(1.5, seq_len=256), row(1.5, seq_len=8192, method="full"), row(1.8, seq_len=2048, method="qlora")]
    once = fit_stack(spread, START).coefficients
    many = fit_stack([*replicated(spread[0], 0.98, 1.02), *spread[1:]], START).coefficients
    assert many.time_scale == pytest.approx(once.time_scale, rel=0.02)
    correction = fitted_correction([*replicated(spread[0], 0.98, 1.02), *spread[1:]], START, many)
    assert len(correction.anchors) == 3 and "(+1 rows of its setting)" in correction.row_ids[0]
    errors = loo_time_errors([*replicated(spread[0], 0.98, 1.02), *spread[1:]], START)
    assert len(errors) == 4
    # the two replicates are held out together: each is predicted by the fit on the other two settings alone
    alone = fit_stack(spread[1:], START).coefficients
    predicted = predicted_time_s(spread[0], alone)
    assert errors[:2] == pytest.approx([abs(predicted / (spread[0].measured_s * s) - 1) for s in (0.98, 1.02)])


def test_the_linearised_held_out_errors_follow_the_exact_refits(monkeypatch: pytest.MonkeyPatch) -> None:
    """On four spread settings the first-order leave-one-out (PRESS) lands near the refits it replaces."""
    rows = [
        row(1.5, seq_len=256),
        row(1.55, seq_len=8192, method="full"),
        row(1.8, seq_len=2048, method="qlora", micro_batch_size=4),
        row(1.4, seq_len=1024, micro_batch_size=8),
    ]
    exact = loo_time_errors(rows, START)
    monkeypatch.setattr(held_out, "EXACT_MAX_SETTINGS", 1)
    linear = loo_time_errors(rows, START)
    in_sample = [
        abs(x)
        for x in (math.expm1(-r) for r in row_log_ratios(replicate_groups(rows), fit_stack(rows, START).coefficients))
    ]
    assert linear == pytest.approx(exact, abs=0.03)
    assert sum(linear) > sum(in_sample)  # held out, a setting is predicted worse than fitted


def test_past_the_cap_the_settings_with_most_rows_are_fitted_then_a_sample_through_the_file() -> None:
    rows = [row(1.0, seq_len=64 + 8 * i) for i in range(3 * MAX_FIT_SETTINGS)]
    rows += replicated(rows[-1], 1.0)  # the last setting measured twice
    chosen = fitted_settings(replicate_groups(rows))
    seqs = [g.row.case.measurement.workload.seq_len for g in chosen]
    assert len(chosen) == MAX_FIT_SETTINGS and seqs[-1] == 64 + 8 * (3 * MAX_FIT_SETTINGS - 1)
    # the others every third setting through the file (3 × the cap settings): not the first 63
    assert seqs[:-1] == [64 + 8 * 3 * k for k in range(MAX_FIT_SETTINGS - 1)]
