"""A small Nelder–Mead minimizer in pure Python (planning and calibration stay free of numpy/scipy).

Nelder & Mead 1965, "A simplex method for function minimization", with the standard coefficients
(reflection 1, expansion 2, contraction 0.5, shrink 0.5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def nelder_mead(
    objective: Callable[[Sequence[float]], float],
    start: Sequence[float],
    step: float = 0.3,
    max_evaluations: int = 3000,
    tolerance: float = 1e-7,
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
        reflected = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        reflected_value = objective(reflected)
        evaluations += 1
        if reflected_value < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            expanded_value = objective(expanded)
            evaluations += 1
            if expanded_value < reflected_value:
                simplex[-1], values[-1] = expanded, expanded_value
            else:
                simplex[-1], values[-1] = reflected, reflected_value
        elif reflected_value < values[-2]:
            simplex[-1], values[-1] = reflected, reflected_value
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            contracted_value = objective(contracted)
            evaluations += 1
            if contracted_value < values[-1]:
                simplex[-1], values[-1] = contracted, contracted_value
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + 0.5 * (p - b) for b, p in zip(best, point, strict=True)] for point in simplex[1:]
                ]
                values = [values[0]] + [objective(point) for point in simplex[1:]]
                evaluations += dimension
    best_index = min(range(len(simplex)), key=lambda index: values[index])
    return simplex[best_index], values[best_index]
