"""Where a number lives: fitted coefficients in the calibration schema, stated priors in ``costmodel.priors``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from autotune.calibration import fit as fitting
from autotune.calibration import stack_fit, time_fit
from autotune.costmodel import priors
from autotune.costmodel.calibration import default_coefficients
from autotune.schemas.calibration import FITTED_FIELDS, PRIOR_FIELDS, CostCoefficients, field_bounds

COSTMODEL = Path(priors.__file__).parent
UNIT_SUFFIXES = ("_S", "_BYTES", "_ELEMENTS", "_COUNT", "_RATIO", "_PER_MICRO_STEP")
METADATA_FIELDS = {"schema_version", "name", "source"}


def _module_constants(path: Path) -> list[str]:
    names = []
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


def test_every_coefficient_is_marked_fitted_or_prior() -> None:
    assert set(FITTED_FIELDS).isdisjoint(PRIOR_FIELDS)
    assert set(FITTED_FIELDS) | set(PRIOR_FIELDS) | METADATA_FIELDS == set(CostCoefficients.model_fields)


def test_what_the_fitters_move_is_marked_fitted() -> None:
    moved = {
        *time_fit.BOUNDS,
        *time_fit.UNBOUNDED_ABOVE_ONE,
        *time_fit.PRIOR_LOG_SIGMA_BY_FIELD,
        *time_fit.SHARED_FIT_FIELDS,
        *fitting.MEMORY_PARAMETERS,
        *stack_fit.TERM_CANDIDATES,
        stack_fit.STACK[0],
    }
    assert moved <= set(FITTED_FIELDS)
    assert moved.isdisjoint(PRIOR_FIELDS)


def test_the_fit_keeps_to_the_schema_bounds() -> None:
    for name, bounds in time_fit.BOUNDS.items():
        assert bounds == field_bounds(name), name


def test_field_bounds_reads_the_schema() -> None:
    assert field_bounds("bandwidth_efficiency") == (0.5, 0.95)
    assert field_bounds("compile_speedup") == (0.0, 1.0)
    assert field_bounds("kernel_launch_s") == (0.0, float("inf"))


@pytest.mark.parametrize("name", PRIOR_FIELDS)
def test_the_shipped_fit_left_every_prior_at_its_default(name: str) -> None:
    assert getattr(default_coefficients(), name) == CostCoefficients.model_fields[name].default


def test_the_shipped_fit_moved_the_fitted_coefficients() -> None:
    shipped, prior = default_coefficients(), CostCoefficients()
    assert shipped.bandwidth_efficiency != prior.bandwidth_efficiency
    assert shipped.allocator_overhead_fraction != prior.allocator_overhead_fraction


def test_prior_fields_say_so_in_their_description() -> None:
    for name in PRIOR_FIELDS:
        assert "no fit moves it" in (CostCoefficients.model_fields[name].description or ""), name


def test_each_prior_has_a_unit_in_its_name_and_a_docstring() -> None:
    source = Path(priors.__file__).read_text()
    body = ast.parse(source).body
    names = _module_constants(Path(priors.__file__))
    assert names
    for name in names:
        assert name.endswith(UNIT_SUFFIXES), name
        index = next(i for i, node in enumerate(body) if isinstance(node, ast.Assign) and node.targets[0].id == name)  # type: ignore[attr-defined]
        following = body[index + 1 : index + 3]  # a docstring after it, or after its sibling (COMPILE_FIXED_S)
        assert any(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in following), name
    assert "The rule for where a number lives" in inspect.getdoc(priors)  # type: ignore[operator]


def test_each_prior_has_one_home() -> None:
    homes = {name: [] for name in _module_constants(Path(priors.__file__))}
    for path in COSTMODEL.glob("*.py"):
        if path.name == "priors.py":
            continue
        for name in _module_constants(path):
            if name in homes:
                homes[name].append(path.name)
    assert all(not others for others in homes.values()), homes
