"""How far one draw of k rows can put an ideal 80 % band's coverage from 80 %: the spread behind issue 43's target.

``calibration_trials.py`` judges the printed band per source: the share of a source's held-out rows inside it, over a
few draws of k = 3 calibration rows (one draw for ``--suggest``). This script asks what that figure can read for a
band that is *exactly* calibrated, on the simplest case the issue's model contains: a stack's log errors are
independent N(μ, σ²), the user measures k of them, and the band is centred on their mean. Two ideal bands:

* **σ known** (a prior that knows each stack's scatter exactly; the limit of an informative prior that is right for
  this stack): ±z₀.₉ σ √(1 + 1/k).
* **σ from the rows** (the reference prior p(μ, σ²) ∝ 1/σ², whose predictive is Student's t with k − 1 degrees of
  freedom; Gelman et al., *BDA3* §3.2; the classical prediction interval, Geisser, *Predictive Inference*, 1993):
  ±t₀.₉,ₖ₋₁ s √(1 + 1/k). Its coverage is exactly 80 % for every μ and σ — per stack, whatever its scatter —
  averaged over draws.

For each, the coverage of one draw is its conditional probability over a new row, Φ((h − d)/σ) − Φ((−h − d)/σ) with
d the draw's mean error and h its half-width (an infinite held-out set); the script prints its mean, and how often one
draw, and the mean of ``--draws`` draws, lands in 70–90 %. Standard library only; Monte Carlo, seeded.

Usage:  python benchmarks/band_draw_spread.py [--k 3] [--draws 1,5,20] [--samples 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Callable, Sequence
from statistics import NormalDist

NORMAL = NormalDist()
BAND_SHARE = 0.8
"""The printed band's central share (``calibration.coverage.BAND_SHARE``)."""
TARGET = (0.70, 0.90)
"""Issue 43's target for a source's coverage."""


def t_cdf(x: float, dof: int) -> float:
    """Student's t CDF at ``x`` ≥ 0 with ``dof`` degrees of freedom (Simpson's rule on the density from 0)."""
    log_c = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)

    def density(t: float) -> float:
        return math.exp(log_c - (dof + 1) / 2 * math.log1p(t * t / dof))

    steps = 4000
    width = x / steps
    total = density(0) + density(x) + sum((4 if i % 2 else 2) * density(i * width) for i in range(1, steps))
    return 0.5 + total * width / 3


def t_quantile(p: float, dof: int) -> float:
    """The t with ``t_cdf(t, dof)`` = ``p`` (p ≥ ½), by bisection."""
    low, high = 0.0, 100.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, dof) < p else (low, middle)
    return (low + high) / 2


def draw_coverage(rows: Sequence[float], half_width: Callable[[Sequence[float]], float]) -> float:
    """Coverage of a band centred on the mean of ``rows`` (σ = 1 units) for a new N(0, 1) row."""
    centre = sum(rows) / len(rows)
    half = half_width(rows)
    return NORMAL.cdf(half - centre) - NORMAL.cdf(-half - centre)


def bands(k: int) -> dict[str, Callable[[Sequence[float]], float]]:
    """The two ideal bands' half-widths from k rows (module docstring), in σ units."""
    inflate = math.sqrt(1 + 1 / k)
    z = NORMAL.inv_cdf((1 + BAND_SHARE) / 2)
    t = t_quantile((1 + BAND_SHARE) / 2, k - 1)

    def scatter(rows: Sequence[float]) -> float:
        centre = sum(rows) / len(rows)
        return math.sqrt(sum((x - centre) ** 2 for x in rows) / (len(rows) - 1))

    return {
        "sigma known": lambda rows: z * inflate,
        "sigma from the rows (t)": lambda rows: t * scatter(rows) * inflate,
    }


def main(argv: list[str] | None = None) -> int:
    """Print, per ideal band, the mean coverage and how often 1, 5, 20 draws' coverage lands in 70–90 %."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=3, help="rows per draw (default 3; at least 2)")
    parser.add_argument("--draws", default="1,5,20", help="draws per source, comma-separated (default 1,5,20)")
    parser.add_argument("--samples", type=int, default=20000, help="Monte Carlo sources per figure (default 20000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.draws.split(",") if c.strip()]
    if args.k < 2 or not counts or min(counts) < 1 or args.samples < 1:
        parser.error("--k needs at least 2, --draws positive counts, --samples at least 1")
    rng = random.Random(args.seed)
    low, high = TARGET
    print(f"k = {args.k} rows per draw; an exactly calibrated 80 % band; {args.samples} sources per figure")
    for name, half_width in bands(args.k).items():
        figures = []
        for count in counts:
            landed, total = 0, 0.0
            for _ in range(args.samples):
                share = (
                    sum(draw_coverage([rng.gauss(0, 1) for _ in range(args.k)], half_width) for _ in range(count))
                    / count
                )
                total += share
                landed += low <= share <= high
            figures.append(
                f"{count} draw(s): mean {total / args.samples:.1%}, in {low:.0%}–{high:.0%} "
                f"{landed / args.samples:.0%} of sources"
            )
        print(f"{name:24s} " + "; ".join(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
