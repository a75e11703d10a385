"""benchmarks/band_draw_spread.py and calibration_trials.py's coverage interval: how far a band's coverage reads from
its share over few draws, and whether a source's miss is its band's or its draws'."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    """The benchmark script ``name`` as a module (registered, so that its dataclasses resolve their module)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


spread = _load("band_draw_spread")
trials = _load("calibration_trials")


@pytest.mark.parametrize(("dof", "expected"), [(2, 0.8 / math.sqrt(0.18)), (1, math.tan(0.4 * math.pi)), (400, 1.2832)])
def test_t_quantile_matches_closed_forms(dof: int, expected: float) -> None:
    # ν = 2: t_p = (2p − 1) / √(2p(1 − p)); ν = 1 (Cauchy): tan(π(p − ½)); ν = 400: within 0.002 of z₀.₉ = 1.2816
    assert spread.t_quantile(0.9, dof) == pytest.approx(expected, abs=2e-3)


def test_both_ideal_bands_cover_80_percent_on_average_and_the_t_band_spreads_more(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert spread.main(["--samples", "3000", "--draws", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    known, from_rows = lines[1], lines[2]
    for line in (known, from_rows):
        mean = float(line.split("mean ")[1].split("%")[0])
        assert 78 <= mean <= 82
    landed = [int(line.split("of sources")[0].split()[-1].rstrip("%")) for line in (known, from_rows)]
    assert landed[0] > 80 and landed[1] < 40  # one draw: σ known lands in 70–90 % far more often than σ from the rows


def test_bad_arguments_exit_2() -> None:
    with pytest.raises(SystemExit) as stopped:
        spread.main(["--k", "1"])
    assert stopped.value.code == 2


def test_one_draw_has_no_interval_and_agreeing_draws_a_point() -> None:
    assert trials.coverage_interval([[1.0, 0.0, 1.0]], "s") is None
    assert trials.coverage_interval([[1.0, 0.0], [0.0, 1.0]] * 3, "s") == (0.5, 0.5)


def test_interval_spans_the_draws_and_the_verdict_names_a_miss_beyond_it() -> None:
    scattered = [[1.0] * 10, [0.0] * 10] * 5  # ten draws, each all in or all out: the spread is the draws'
    interval = trials.coverage_interval(scattered, "s")
    assert interval is not None
    low, high = interval
    assert 0.0 < low < 0.5 < high < 1.0
    over = trials.Tally(draw_coverage=[[1.0] * 4] * 5)
    spread_out = trials.Tally(draw_coverage=scattered)
    verdict = trials.target_verdict([over, spread_out], ["a", "b"])
    assert verdict == "0 of 2 sources in 70%–90%, 1 of 2 outside it beyond their draws' 90 % interval"
