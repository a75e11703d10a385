"""The ``autotune`` app: its command table is complete on import, one-way, and ``--help`` imports no command."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import typer

from autotune.cli.app import COMMANDS, app

EXPECTED = {
    "plan",
    "estimate",
    "trace",
    "sweep",
    "launch",
    "export",
    "probe",
    "calibrate",
    "validate",
    "gpus",
    "models",
}


def test_the_app_registers_every_command_on_import() -> None:
    group = typer.main.get_command(app)
    context = typer.Context(group)
    assert isinstance(group, typer.core.TyperGroup)
    assert set(group.list_commands(context)) == EXPECTED
    for name in EXPECTED:
        command = group.get_command(context, name)
        assert command is not None and command.name == name
    assert group.get_command(context, "nope") is None


def test_each_summary_is_its_commands_docstring_first_line() -> None:
    """``autotune --help`` shows the table's summaries without importing commands; they must not drift."""
    for name, ref in COMMANDS.items():
        function = getattr(importlib.import_module(ref.module), ref.function)
        assert ref.summary == (inspect.getdoc(function) or "").splitlines()[0], name


def test_no_cli_module_imports_the_app() -> None:
    """Dependencies point one way: app.py names the commands; nothing imports app back."""
    from pathlib import Path

    import autotune.cli

    package = Path(autotune.cli.__file__).parent
    offenders = [
        path.name
        for path in package.glob("*.py")
        if path.name != "app.py" and "autotune.cli.app" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys\n"
        "from autotune.cli.app import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "names = ('rich', 'autotune.costmodel')\n"
        "loaded = sorted(m for m in sys.modules if m.endswith('_cmd') or m.startswith(names))\n"
        "print('LOADED', loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "LOADED []" in done.stdout, done.stdout
    for name in EXPECTED:
        assert name in done.stdout
