"""Which calibration a request uses (the option, the user's file, the shipped fit); a plan's estimator."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.costmodel.calibration import SHIPPED_CALIBRATION, default_coefficients, load_coefficients
from autotune.errors import ConfigError
from autotune.profiles.user_config import find_user_calibration
from autotune.schemas.calibration import USER_STACK, CostCoefficients
from autotune.session.progress import sink

if TYPE_CHECKING:  # the launcher package is imported only by the commands that launch
    from autotune.launcher.overrides import Estimator, GpuResolver
    from autotune.schemas.plan import PlanFile


def coefficients_from_option(path: Path | None) -> tuple[CostCoefficients, str]:
    """The calibration to use: ``--calibration FILE``, else the user's calibration, else the shipped fit.

    The user's calibration is ``calibration.yaml`` in the user config dir (see
    :mod:`autotune.profiles.user_config`); when it is used, a one-line note on stderr says so (stderr keeps
    ``--json`` output clean).

    Raises:
        ConfigError: the chosen file is missing or invalid (one line naming it).
    """
    path = calibration_file(path)
    if path is None:
        return default_coefficients(), SHIPPED_CALIBRATION
    coefficients = load_coefficients(path)
    return coefficients, coefficients.name


def calibration_file(path: Path | None) -> Path | None:
    """The calibration file to read: ``path`` (``--calibration FILE``), else the user's, else None (the shipped fit).

    When the user's file is taken, a one-line note on stderr says so: a command that plans several times (``sweep``)
    calls this once and passes the file on, so the note is printed once.

    Raises:
        ConfigError: the user's calibration file is invalid (one line naming it).
    """
    if path is not None:
        return path
    user_file = find_user_calibration()
    if user_file is not None:
        name = load_coefficients(user_file).name
        sink().note(f"using calibration '{name}' from {user_file} (--calibration FILE to choose another)")
    return user_file


def stack_note(coefficients: CostCoefficients | None) -> str | None:
    """One line saying whose speed a plan's times are (the time fit's reference stack) and how much slower others ran.

    The reference stack has ``stack_time_factor`` 1: the fastest training stack in the calibration data
    (``calibration/time_fit.py``, docs/cost-model.md "Stacks"). None when the reference is the user's own runs (a
    calibration by ``autotune calibrate``) or the calibration has no stacks (priors only).
    """
    coefficients = coefficients or default_coefficients()
    factors = coefficients.stack_time_factor
    if not factors or USER_STACK in factors:
        return None
    reference = min(factors, key=lambda stack: factors[stack])
    others = sorted(factor / factors[reference] for stack, factor in factors.items() if stack != reference)
    slower = f"; others ran {others[0]:.2f}–{others[-1]:.2f}× slower" if len(others) > 1 else ""
    if len(others) == 1:
        slower = f"; the other ran {others[0]:.2f}× slower"
    return (
        f"tokens/s and times are the fastest training stack's in calibration '{coefficients.name}' "
        f"({reference}{slower}): yours may be slower, 'autotune calibrate RUN_DIR' fits it"
    )


def plan_coefficients(plan: PlanFile, path: Path | None = None) -> CostCoefficients:
    """The calibration ``plan`` was computed with (its ``calibration`` name), so a re-estimate stays comparable.

    ``path`` (``--calibration FILE``) is used when given and its name must match the plan's; otherwise the
    shipped fit when the plan names it, else the user's calibration file when its name matches.

    Raises:
        ConfigError: the plan's calibration cannot be found, or ``path`` holds another calibration (one line
            saying which file to pass).
    """
    wanted = plan.calibration
    if path is not None:
        coefficients = load_coefficients(path)
        if coefficients.name != wanted:
            raise ConfigError(
                f"--calibration {path} is calibration '{coefficients.name}', the plan was made with '{wanted}': "
                "pass the plan's calibration file, or re-plan with this one"
            )
        return coefficients
    if wanted == SHIPPED_CALIBRATION:
        return default_coefficients()
    user_file = find_user_calibration()
    if user_file is not None:
        coefficients = load_coefficients(user_file)
        if coefficients.name == wanted:
            return coefficients
    raise ConfigError(
        f"the plan was made with calibration '{wanted}', which is not the shipped one nor your calibration file: "
        "pass it with --calibration FILE so that re-estimates use it"
    )


def plan_estimator(plan: PlanFile, path: Path | None = None) -> tuple[Estimator, GpuResolver]:
    """The cost model with ``plan``'s calibration (:func:`plan_coefficients`) and the GPU catalog lookup.

    Raises:
        ConfigError: the plan's calibration cannot be found.
    """
    from autotune.costmodel.estimate import estimate_setting
    from autotune.profiles.catalog import resolve_gpu

    coefficients = plan_coefficients(plan, path)
    return partial(estimate_setting, coefficients=coefficients), lambda key: resolve_gpu(key)[0]
