"""Commands are parsing and rendering: no command function of autotune.cli is over 60 lines (issue 40).

A command that grows past it is moving work into the CLI that belongs to the session layer (autotune.session),
where the Python API shares it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import autotune.cli

MAX_COMMAND_LINES = 60
CLI = Path(autotune.cli.__file__).parent


def command_lengths() -> dict[str, int]:
    """``module.function`` → lines (decorators excluded, signature included) of every ``*_command`` in cli/."""
    lengths = {}
    for path in sorted(CLI.glob("*_cmd.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_command"):
                assert node.end_lineno is not None
                lengths[f"{path.stem}.{node.name}"] = node.end_lineno - node.lineno + 1
    return lengths


def test_every_command_is_found() -> None:
    assert {"plan_cmd.plan_command", "launch_cmd.launch_command", "estimate_cmd.estimate_command"} <= set(
        command_lengths()
    )


def test_no_command_function_is_over_60_lines() -> None:
    assert {name: n for name, n in command_lengths().items() if n > MAX_COMMAND_LINES} == {}
