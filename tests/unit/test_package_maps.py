"""Every package's ``__init__`` docstring maps its modules: each module and subpackage is named, each name exists.

The map is the block that follows a line ``Modules:`` in the package docstring. An entry line is indented by
two spaces and starts with one or more names (``a, b`` for several) followed by two or more spaces and the
description; a deeper-indented line continues the entry above it; a blank or unindented line ends the map.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import autotune

PACKAGE_ROOT = Path(autotune.__file__).resolve().parent
ENTRY = re.compile(r"^  (?P<names>[A-Za-z_][\w]*(?:, [A-Za-z_][\w]*)*)(?:\s{2,}\S.*)?$")


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE_ROOT.rglob("__init__.py") if "__pycache__" not in p.parts)


def _members(package: Path) -> set[str]:
    """The modules (``*.py`` but ``__init__``) and subpackages (folders with an ``__init__.py``) of a package."""
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    subpackages = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    return modules | subpackages


def _dotted(package: Path) -> str:
    return ".".join(("autotune", *package.relative_to(PACKAGE_ROOT).parts))


def mapped_names(docstring: str) -> list[str]:
    """The names the ``Modules:`` map of a package docstring lists (raises if there is no map)."""
    lines = docstring.splitlines()
    if "Modules:" not in lines:
        raise ValueError("no 'Modules:' line")
    names: list[str] = []
    for line in lines[lines.index("Modules:") + 1 :]:
        if not line.startswith("  "):
            break
        if line.startswith("   "):  # continuation of the entry above
            continue
        match = ENTRY.match(line)
        if match is None:
            raise ValueError(f"map line is not 'name  description': {line!r}")
        names.extend(match["names"].split(", "))
    return names


@pytest.mark.parametrize("package", _packages(), ids=_dotted)
def test_the_package_map_names_every_module_and_only_modules(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert docstring, f"{_dotted(package)} has no docstring"
    names = mapped_names(docstring)
    members = _members(package)
    assert sorted(members - set(names)) == [], f"{_dotted(package)}: modules missing from the map"
    assert sorted(set(names) - members) == [], f"{_dotted(package)}: the map names modules that do not exist"
    assert len(names) == len(set(names)), f"{_dotted(package)}: a module is mapped twice"


def test_the_map_parser_reads_names_continuations_and_the_end() -> None:
    doc = (
        "Summary.\n\nModules:\n  alpha          the first\n                 continued\n"
        "  beta, gamma    two at once\n  delta\n\nAfter the map:\n  epsilon  not a module\n"
    )
    assert mapped_names(doc) == ["alpha", "beta", "gamma", "delta"]
    with pytest.raises(ValueError, match="not 'name  description'"):
        mapped_names("Modules:\n  *_cmd  one per command\n")
    with pytest.raises(ValueError, match="no 'Modules:'"):
        mapped_names("Summary only.")
