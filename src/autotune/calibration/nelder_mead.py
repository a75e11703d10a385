"""A small Nelder–Mead minimizer in pure Python (planning and calibration stay free of numpy/scipy).

Nelder & Mead 1965, "A simplex method for function minimization", with the standard coefficients
(reflection 1, expansion 2, contraction 0.5, shrink 0.5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

REFLECTION = 1.0
"""Reflection coefficient: the worst point is mirrored through the centroid of the others at this distance."""

EXPANSION = 2.0
"""Expansion coefficient: how far past the centroid a reflection that beat the best point is pushed."""

CONTRACTION = 0.5
"""Contraction coefficient: the fraction of the way from the centroid towards the worst point tried next."""

SHRINK = 0.5
"""Shrink coefficient: every point but the best moves this fraction of the way towards the best."""

DEFAULT_STEP = 0.3
"""Initial simplex edge along each axis, in the caller's units (a factor 1.35 in log units)."""

DEFAULT_MAX_EVALUATIONS = 3000
"""Objective evaluations after which the search stops."""

TOLERANCE = 1e-7
"""Relative spread of the simplex's values under which the search has converged."""


def nelder_mead(
    objective: Callable[[Sequence[float]], float],
    start: Sequence[float],
    step: float = DEFAULT_STEP,
    max_evaluations: int = DEFAULT_MAX_EVALUATIONS,
    tolerance: float = TOLERANCE,
) -> tuple[list[float], float]:
    """Minimize ``objective`` from ``start``; returns (best point, best value).

    ``step`` is the initial simplex edge along each axis (in the caller's parameter units, typically logs).
    """
    dimension = len(start)
    simplex = [list(start)]
    for axis in range(dimension):
        point = list(start)
        point[axis] += step
        simplex.append(point)
    values = [objective(point) for point in simplex]
    evaluations = len(values)
    while evaluations < max_evaluations:
        order = sorted(range(len(simplex)), key=lambda index: values[index])
        simplex = [simplex[index] for index in order]
        values = [values[index] for index in order]
        if abs(values[-1] - values[0]) <= tolerance * (abs(values[0]) + tolerance):
            break
        centroid = [sum(point[axis] for point in simplex[:-1]) / dimension for axis in range(dimension)]
        worst = simplex[-1]
        reflected = [c + REFLECTION * (c - w) for c, w in zip(centroid, worst, strict=True)]
        reflected_value = objective(reflected)
        evaluations += 1
        if reflected_value < values[0]:
            expanded = [c + EXPANSION * (c - w) for c, w in zip(centroid, worst, strict=True)]
            expanded_value = objective(expanded)
            evaluations += 1
            if expanded_value < reflected_value:
                simplex[-1], values[-1] = expanded, expanded_value
            else:
                simplex[-1], values[-1] = reflected, reflected_value
        elif reflected_value < values[-2]:
            simplex[-1], values[-1] = reflected, reflected_value
        else:
            contracted = [c + CONTRACTION * (w - c) for c, w in zip(centroid, worst, strict=True)]
            contracted_value = objective(contracted)
            evaluations += 1
            if contracted_value < values[-1]:
                simplex[-1], values[-1] = contracted, contracted_value
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + SHRINK * (p - b) for b, p in zip(best, point, strict=True)] for point in simplex[1:]
                ]
                values = [values[0]] + [objective(point) for point in simplex[1:]]
                evaluations += dimension
    best_index = min(range(len(simplex)), key=lambda index: values[index])
    return simplex[best_index], values[best_index]
