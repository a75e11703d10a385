"""The import contracts (pyproject.toml ``[tool.importlinter]``) cover every module, a new one included.

Most contracts name packages or wildcards (``autotune.*``, ``autotune.**``). Two lists cannot: import-linter's
wildcards match whole name parts only (``autotune.cli.*_cmd`` is not an expression), so the command-independence
contract lists the command modules, and the shared-helpers contract the top-level modules outside the layers; these
tests fail when a module is missing from either list (``lint-imports`` itself checks that the contracts are kept).
"""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "autotune"


def _contract(name_starts: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"].startswith(name_starts)]
    return contract


def test_every_command_module_is_in_the_independence_contract() -> None:
    commands = {f"autotune.cli.{path.stem}" for path in (PACKAGE / "cli").glob("*_cmd.py")}
    listed = set(_contract("CLI commands do not import each other")["modules"])
    assert commands == listed, f"missing: {sorted(commands - listed)}; gone: {sorted(listed - commands)}"


def _layered() -> set[str]:
    """The modules and packages the layers contract names."""
    layers = _contract("Layers:")["layers"]
    return {name.strip() for layer in layers for name in layer.split("|")}


def test_every_top_level_module_is_a_layer_or_a_shared_helper_below_every_package() -> None:
    modules = {f"autotune.{path.stem}" for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}
    packages = {f"autotune.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py")}
    layered = _layered()
    contract = _contract("Shared helpers")
    assert set(contract["source_modules"]) == modules - layered, "a top-level module outside the layers is a helper"
    assert set(contract["forbidden_modules"]) == packages | (modules & layered), "a shared helper imports no layer"
