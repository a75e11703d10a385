"""Only the entry point reaches the command line: benchmarks and tools use autotune's API and session layer.

import-linter checks the package's own layers (pyproject.toml); this checks the scripts beside it, which it does not
see. A script may run the CLI as a user does, through ``autotune.cli.app.main``; it may not import the CLI's helper
modules (planning, rendering), whose code belongs to the session layer (:mod:`autotune.session`) and the API.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINT = "autotune.cli.app"
ALLOWED = {
    ("tools/check_docs.py", "autotune.cli.console"): "runs the CLI in-process as the entry point does, at a set width",
}
"""(script, module) → why it may import a CLI module other than the entry point. Shrinks as the API grows."""


def cli_imports(path: Path) -> set[str]:
    """The ``autotune.cli...`` modules ``path`` imports (module-level and inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autotune.cli"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("autotune.cli"))
    return found


def test_scripts_import_the_cli_only_through_its_entry_point() -> None:
    scripts = sorted([*ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("tools/**/*.py")])
    assert scripts
    offending = {
        (str(path.relative_to(ROOT)), module)
        for path in scripts
        for module in cli_imports(path)
        if module != ENTRY_POINT and (str(path.relative_to(ROOT)), module) not in ALLOWED
    }
    assert offending == set()


def test_the_allow_list_names_only_real_imports() -> None:
    stale = {(script, module) for script, module in ALLOWED if module not in cli_imports(ROOT / script)}
    assert stale == set()


def test_the_check_sees_a_helper_import(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text("def f():\n    from autotune.cli.planning import PlanOptions\n", encoding="utf-8")
    assert cli_imports(script) == {"autotune.cli.planning"}
