"""The docs quote what the tool prints: tools/check_docs.py finds no drift, and catches one."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cli_runner import run

ROOT = Path(__file__).resolve().parents[2]


def _check_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "tools" / "check_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_docs"] = module
    spec.loader.exec_module(module)
    return module


check_docs = _check_docs()


def _refits_every_seed_row(document: Path) -> bool:
    """Whether a block of ``document`` quotes ``autotune calibrate --with-seeds`` (a time fit over every seed row)."""
    return any("--with-seeds" in match["spec"] for match in check_docs.BLOCK.finditer(document.read_text()))


DOCUMENTS = [
    pytest.param(
        document,
        id=document.name,
        marks=[pytest.mark.slow] if _refits_every_seed_row(document) else [],  # 20-30 s: `pytest --all` runs it
    )
    for document in check_docs.DOCUMENTS
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_documents_match_the_tool(document: Path) -> None:
    drifts = check_docs.check(write=False, documents=[document])
    assert not drifts, "docs drifted; run: python tools/check_docs.py --write\n" + "\n".join(
        f"{d.document.name}: {d.spec}\n{d.expected}" for d in drifts
    )


def test_a_stale_quote_is_caught() -> None:
    text = (
        "<!-- docs-check: autotune plan llama3-8b --gpu 4090 --seq-len 2048; from=^Rejected -->\n"
        "```text\n✗ full: needs 49.7 GiB per GPU\n```\n<!-- /docs-check -->\n"
    )
    new_text, [(_spec, old, new)] = check_docs.regenerate(text)
    assert old != new and "49.7" not in new and "✗ full" in new and new in new_text


def test_only_autotune_commands_run() -> None:
    with pytest.raises(ValueError, match="autotune commands only"):
        check_docs.quoted_output("rm -rf /tmp/x", {})


def _keys(value: object, prefix: str = "") -> set[str]:
    """Every key of a JSON document (dicts inside lists included)."""
    if isinstance(value, dict):
        keys = set()
        for key, item in value.items():
            keys.add(key)
            if key not in ("memory_breakdown_gib", "time_breakdown_s", "matmul_efficiency"):
                keys |= _keys(item)
        return keys
    if isinstance(value, list):
        return set().union(*(_keys(item) for item in value)) if value else set()
    return set()


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "llama3-8b", "--gpu", "4090", "--json"],
        ["estimate", "llama3-8b", "--gpu", "4090", "--method", "full", "--json"],
    ],
)
def test_every_json_key_is_documented(capsys, argv: list[str]) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0
    documented = (ROOT / "docs" / "json.md").read_text()
    missing = sorted(key for key in _keys(json.loads(out)) if f"`{key}`" not in documented)
    assert not missing, f"not in docs/json.md: {missing}"


def test_every_schema_type_named_in_json_md_has_its_section() -> None:
    """A field typed by one of our schemas (``list[Alternative]``) links to a section that lists its fields."""
    import re

    from pydantic import BaseModel

    import autotune.schemas.estimate as estimate_schemas
    import autotune.schemas.plan as plan_schemas
    import autotune.schemas.setting as setting_schemas

    schemas = {
        name
        for module in (estimate_schemas, plan_schemas, setting_schemas)
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__.startswith("autotune.")
    }
    text = (ROOT / "docs" / "json.md").read_text()
    named = {
        word
        for type_cell in re.findall(r"^\| `[^`]+` \| `([^`]+)` \|", text, re.MULTILINE)
        for word in re.findall(r"[A-Z]\w+", type_cell)
    }
    headings = set(re.findall(r"^#+ .*?(\w+)\)?$", text, re.MULTILINE))
    missing = sorted((named & schemas) - headings)
    assert not missing, f"docs/json.md names these schemas without a section: {missing}"
