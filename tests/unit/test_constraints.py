"""The lock (constraints.txt) pins every declared dependency, inside the range pyproject.toml declares."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")
requirements = pytest.importorskip("packaging.requirements")
utils = pytest.importorskip("packaging.utils")

ROOT = Path(__file__).resolve().parents[2]

OUTSIDE_THE_LOCK = {"skypilot"}
"""Extras that cannot be installed with the lock: SkyPilot 0.14 needs click < 8.2 and the lock holds click 8.5.1
(``pip install --dry-run -c constraints.txt -e ".[skypilot]"``: ResolutionImpossible). pyproject.toml says so where it
declares the extra, and docs/usage.md tells users to install it without ``-c constraints.txt``."""


def _declared(*, locked_only: bool) -> list:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = list(project["dependencies"])
    for name, extra in project["optional-dependencies"].items():
        if not (locked_only and name in OUTSIDE_THE_LOCK):
            texts.extend(extra)
    return [requirements.Requirement(text) for text in texts]


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in (ROOT / "constraints.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt: {raw!r} is not an exact pin (name==version)"
        pins[utils.canonicalize_name(name)] = version
    return pins


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for requirement in _declared(locked_only=True):
        name = utils.canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is declared in pyproject.toml but not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pins[name]}, outside pyproject.toml's {requirement.specifier}"
        )


def test_every_declared_range_has_an_upper_bound() -> None:
    for requirement in _declared(locked_only=False):
        if utils.canonicalize_name(requirement.name) == "types-pyyaml":
            continue  # type stubs: versioned with their date, any recent one works
        assert any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier), (
            f"{requirement} has no upper bound: a new release could change a fresh install"
        )


def test_readme_and_ci_install_with_the_lock() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme_first_command = next(
        line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("python -m venv")
    )
    for text in (ci, readme_first_command):
        assert "-c constraints.txt torch==" in text
        assert '-c constraints.txt -e ".[train,plot,dev]"' in text


def test_readme_gives_a_cpu_only_install_from_pytorchs_cpu_index() -> None:
    """A machine without a GPU installs torch from PyTorch's CPU index (PyPI's torch 2.13 is the CUDA build), at the
    locked version, then the project with the lock (issue 41 item 7)."""
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    venv_lines = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("python -m venv")]
    cpu = [line for line in venv_lines if "--index-url https://download.pytorch.org/whl/cpu" in line]
    assert len(cpu) == 1, venv_lines
    assert f"--index-url https://download.pytorch.org/whl/cpu torch=={pins['torch']} " in cpu[0]
    assert '-c constraints.txt -e ".[train,plot,dev]"' in cpu[0]
