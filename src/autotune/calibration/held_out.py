"""The held-out time errors a calibration's time band is read from: each setting predicted by a refit without it.

:func:`loo_time_errors` refits without each setting in turn (``stack_fit.fit_stack`` on the others) and predicts its
rows: the errors a user gets on a setting the rows did not measure, where in-sample residuals are what three rows fit
by construction. Rows measured at one setting are held out together (``replicates``): holding out one of them would
leave its replicates to predict it, which measures their noise, not the error at a new setting. A file of distinct
settings is thus held out row by row, as before.

Each exact refit costs a fit; past :data:`EXACT_MAX_SETTINGS` settings the leave-one-out errors come from the one fit
on all of them, linearised: for a penalised least-squares fit with Jacobian J (∂ log predicted / ∂ log coefficient per
setting, at the fit), row weights W = diag(c / σ²) and prior precision P, the setting's leverage is
hᵢ = Wᵢᵢ Jᵢ (JᵀWJ + P)⁻¹ Jᵢᵀ and its held-out residual eᵢ / (1 − hᵢ) — the leave-one-out shortcut of a linear smoother
(Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning* 2nd ed., §7.10.1; Allen's PRESS, Technometrics
16 (1974) 125), exact for a linear model and to first order for the log-linear refit around its optimum. The stack
factor's test (``stack_fit.stack_evidence``) is not redone per setting there: with that many settings it does not turn
on one of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotune.calibration.coverage import inverse_spd
from autotune.calibration.replicates import Replicates, fitted_settings, member_rows, replicate_groups
from autotune.calibration.stack_fit import (
    ELASTICITY_STEP,
    ROW_LOG_SIGMA,
    StackFit,
    fit_stack,
    value_of,
    with_values,
)
from autotune.calibration.time_fit import UNBOUNDED_ABOVE_ONE, TimeRow, predicted_time_s
from autotune.schemas.calibration import CostCoefficients

EXACT_MAX_SETTINGS = 8
"""Most settings whose held-out errors come from one refit each (each a fit of the others: 8 settings, 8 fits of 7);
beyond, the linearised leave-one-out of the one fit on all (module docstring)."""


def loo_time_errors(rows: Sequence[TimeRow], start: CostCoefficients, fit: StackFit | None = None) -> list[float]:
    """|predicted / measured − 1| of each row, predicted by a refit without its setting; [] under 2 settings.

    In the order of ``rows``. ``fit``: ``stack_fit.fit_stack(rows, start)`` when the caller has it (the linearised
    errors start from it).
    """
    groups = replicate_groups(rows)
    if len(groups) < 2:
        return []
    if len(groups) <= EXACT_MAX_SETTINGS:
        held = {}
        for group in groups:
            others = member_rows([g for g in groups if g is not group])
            fitted = fit_stack(others, start).coefficients
            held[id(group)] = predicted_time_s(group.row, fitted)
    else:
        held = _linearised_held_out(groups, fit or fit_stack(rows, start))
    predicted_of_row = {id(r): held[id(g)] for g in groups for r in g.members}
    return [abs(predicted_of_row[id(r)] / r.measured_s - 1) for r in rows]


def _linearised_held_out(groups: Sequence[Replicates], fit: StackFit) -> dict[int, float]:
    """Each setting's predicted time by the fit without it, to first order (module docstring); keyed by id(group).

    ``fit``: the fit on all of ``groups``' rows. Settings beyond ``replicates.MAX_FIT_SETTINGS`` are not in it: their
    prediction is the fit's own.
    """
    fitted = fitted_settings(groups)
    settings = [g.row for g in fitted]
    predicted = {id(g): predicted_time_s(g.row, fit.coefficients) for g in groups}
    if not fit.fitted:
        return predicted
    jacobian = _jacobian(fit, settings)
    weights = [g.count / ROW_LOG_SIGMA**2 for g in fitted]
    size = len(fit.fitted)
    normal = [
        [sum(w * row[a] * row[b] for w, row in zip(weights, jacobian, strict=True)) for b in range(size)]
        for a in range(size)
    ]
    for a, sigma in enumerate(fit.prior_log_sigmas):
        normal[a][a] += 1 / sigma**2
    covariance = inverse_spd(normal)
    for group, row, weight in zip(fitted, jacobian, weights, strict=True):
        leverage = weight * sum(row[a] * covariance[a][b] * row[b] for a in range(size) for b in range(size))
        residual = math.log(group.row.measured_s / predicted[id(group)])
        moved = residual / max(1 - leverage, 1e-6) - residual  # how far the held-out prediction moves away
        predicted[id(group)] *= math.exp(-moved)
    return predicted


def _jacobian(fit: StackFit, settings: Sequence[TimeRow]) -> list[list[float]]:
    """∂ log predicted / ∂ log coefficient of each fitted name, per setting, by a one-sided difference at the fit.

    The step goes down for a fraction capped at 1 (as ``stack_fit.elasticity_spreads``); a name its clamp holds gets 0.
    """
    base = [math.log(predicted_time_s(r, fit.coefficients)) for r in settings]
    columns = []
    for name in fit.fitted:
        value = value_of(fit.coefficients, name, settings)
        step = ELASTICITY_STEP if name[0] in UNBOUNDED_ABOVE_ONE else -ELASTICITY_STEP
        moved = with_values(fit.coefficients, {name: value * math.exp(step)})
        actual = math.log(value_of(moved, name, settings) / value)
        columns.append(
            [
                0.0 if actual == 0 else (math.log(predicted_time_s(r, moved)) - b) / actual
                for r, b in zip(settings, base, strict=True)
            ]
        )
    return [list(row) for row in zip(*columns, strict=True)]
