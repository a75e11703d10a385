"""The ``autotune`` root: the command table, and user errors turned into one line and exit code 2.

Dependencies point one way: this module names every command (``COMMANDS``: name → module, function and
one-line help) and nothing in :mod:`autotune.cli` imports it back. A command's module is imported only
when that command runs (or its ``--help`` is shown), so ``autotune plan`` never imports the calibration
fitter and ``autotune --help`` imports no command module at all; each command module keeps its heavy
imports inside the function too, so ``autotune plan`` never imports the training stack.

``app`` is complete on import: ``typer.main.get_command(app)`` lists and builds every command.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperGroup

from autotune.errors import AutotuneError


@dataclass(frozen=True)
class CommandRef:
    """Where a command's function lives, and its one-line summary for ``autotune --help``."""

    module: str
    function: str
    summary: str
    context_settings: dict[str, Any] | None = None
    plan_options_in_help: bool = False
    """List ``autotune plan``'s planning options in this command's help (``launch MODEL`` accepts them)."""


LAUNCH_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
"""``launch`` collects unknown options (``ctx.args``): plan options for a MODEL, refused for a plan file."""

COMMANDS: dict[str, CommandRef] = {
    "plan": CommandRef(
        "autotune.cli.plan_cmd",
        "plan_command",
        "Find the best setting that fits MODEL on your GPUs; every option fixes one choice.",
    ),
    "estimate": CommandRef(
        "autotune.cli.estimate_cmd", "estimate_command", "Predict peak memory per GPU and step time for one setting."
    ),
    "trace": CommandRef(
        "autotune.cli.trace_cmd",
        "trace_command",
        "Trace one training step on fake tensors: live memory per phase, ops, FLOPs (needs torch).",
    ),
    "sweep": CommandRef(
        "autotune.cli.sweep_cmd",
        "sweep_command",
        "Plan MODEL for each method × sequence length: what fits, how fast, or why not.",
    ),
    "launch": CommandRef(
        "autotune.cli.launch_cmd",
        "launch_command",
        "Run a plan with the shared training core: a PLAN.yaml, or a MODEL planned first.",
        LAUNCH_CONTEXT,
        plan_options_in_help=True,
    ),
    "export": CommandRef(
        "autotune.cli.export_cmd",
        "export_command",
        "Export a run's adapter (or, with --merge, a merged model) with its tokenizer, loadable by transformers.",
    ),
    "probe": CommandRef(
        "autotune.cli.probe_cmd",
        "probe_command",
        "Run a few real steps of a plan (and its neighbours) on this machine's GPU, then recalibrate.",
    ),
    "calibrate": CommandRef(
        "autotune.cli.calibrate_cmd",
        "calibrate_command",
        "Refit the cost model's time coefficients from your runs and write a calibration file.",
    ),
    "validate": CommandRef(
        "autotune.cli.validate_cmd",
        "validate_command",
        "Compare the cost model's predictions with every measured row (the seed tables by default).",
    ),
    "gpus": CommandRef(
        "autotune.cli.catalog_cmd",
        "gpus_command",
        "List the GPUs autotune knows (datasheet values; see each profile's source).",
    ),
    "models": CommandRef(
        "autotune.cli.catalog_cmd",
        "models_command",
        "List the catalog models with their parameter counts (from config.json shapes).",
    ),
}
"""Every command of ``autotune``, in the order ``autotune --help`` lists them."""


def build_command(name: str) -> typer.core.TyperCommand:
    """Import ``name``'s module and turn its function into a click command (typer reads the signature)."""
    ref = COMMANDS[name]
    module = importlib.import_module(ref.module)
    function = getattr(module, ref.function)
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    epilog = getattr(module, "EPILOG", None)  # a module's EPILOG string ends its command's help
    single.command(name, context_settings=ref.context_settings, epilog=epilog)(function)
    command = typer.main.get_command(single)
    assert isinstance(command, typer.core.TyperCommand)
    if ref.plan_options_in_help:
        command.epilog = _plan_options_epilog(own={opt for param in command.params for opt in param.opts})
    return command


def _plan_options_epilog(own: set[str]) -> str:
    """'With a MODEL, the planning options of autotune plan apply: --gpu, ...'.

    The names come from ``plan`` itself, less the options in ``own``, which the command takes for itself.
    """
    from autotune.session.planning import PLAN_OUTPUT_PARAMS

    plan = build_command("plan")
    names = [
        param.opts[-1]
        for param in plan.params
        if param.param_type_name == "option" and param.name not in PLAN_OUTPUT_PARAMS and param.opts[-1] not in own
    ]
    return (
        "With a MODEL instead of PLAN.yaml, the planning options of 'autotune plan' apply (see autotune plan "
        f"--help): {', '.join(names)}."
    )


class LazyGroup(TyperGroup):
    """The root group: commands come from ``COMMANDS`` and are built on first use.

    The root's own help is click's plain help with the summaries of ``COMMANDS`` (no command module and
    no rich imported); each command's help is typer's rich help.
    """

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        """The command names, in table order."""
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> typer.core.TyperCommand | None:  # type: ignore[override]
        """The command ``cmd_name``, imported and built once (None for an unknown name)."""
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            from autotune.quiet import quiet_third_party  # logging: only once a command runs, not for --help

            quiet_third_party()  # before the command's module (and the libraries it imports) loads
            self.commands[cmd_name] = build_command(cmd_name)
        command = self.commands[cmd_name]
        assert isinstance(command, typer.core.TyperCommand)
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the commands with their summaries from the table, without importing them."""
        rows = [(name, ref.summary) for name, ref in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    name="autotune",
    cls=LazyGroup,
    help="Pick the fastest LLM fine-tuning setting that fits your GPUs, and launch it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from autotune import __version__

        print(f"autotune {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
) -> None:
    """Pick the fastest LLM fine-tuning setting that fits your GPUs, and launch it."""


def report_error(message: str) -> None:
    """Print one red line on stderr (no traceback)."""
    from autotune.cli.console import err_console

    err_console().print(f"[bold red]error:[/] {_escape(message)}", markup=True, highlight=False)


def _escape(message: str) -> str:
    from rich.markup import escape

    return escape(message)


PYDANTIC_PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"
"""pydantic's switch for its plugin discovery (pydantic ``plugin/_loader.py``): without it, building the first
schema validator scans every installed distribution's entry points (about 6 ms with this project's dependencies
installed). autotune uses no pydantic plugin, so the CLI sets it to ``__all__`` unless the user set it; child
processes (``launch``) inherit it, as they inherit :func:`autotune.quiet.quiet_third_party`'s switches."""


BROKEN_PIPE_EXIT_CODE = 128 + 13
"""Exit code when the reader of stdout went away (``autotune models | head -1``): 128 + SIGPIPE, what a shell reports
for git, cat or grep, which the signal ends silently. Python ignores SIGPIPE and raises BrokenPipeError instead; the
CLI ends as those tools do: no message, no traceback, and a status that ``set -o pipefail`` sees like theirs."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app; user errors → one line on stderr, exit code 2.

    Third-party output is silenced (:func:`autotune.quiet.quiet_third_party`) when a command is looked up, before
    its module is imported: ``autotune --help`` and ``--version`` import no third-party library to silence. A closed
    stdout ends the command silently with :data:`BROKEN_PIPE_EXIT_CODE`.
    """
    from autotune.cli.console import StdoutClosed

    stdout_was_devnull = _stdout_is_devnull()
    try:
        _run(argv)
        sys.stdout.flush()  # a pipe closed after the last write shows here, not at exit
    except (StdoutClosed, BrokenPipeError):
        _exit_on_closed_stdout()
    except SystemExit as exit_:
        # click and rich handle a broken pipe themselves, with exit code 1: click wraps sys.stdout (a help text),
        # rich points stdout at devnull (typer's rich help).
        click_pipe = type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper"
        if exit_.code == 1 and (click_pipe or (_stdout_is_devnull() and not stdout_was_devnull)):
            _exit_on_closed_stdout()
        raise


def _stdout_is_devnull() -> bool:
    """Whether file descriptor 1 is the null device."""
    try:
        return os.path.samestat(os.fstat(1), os.stat(os.devnull))
    except OSError:
        return False


def _exit_on_closed_stdout() -> None:
    """End silently with :data:`BROKEN_PIPE_EXIT_CODE`.

    Python's recipe (signal module docs, "Note on SIGPIPE"): stdout now points at devnull, so the flush at interpreter
    exit does not raise again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(BROKEN_PIPE_EXIT_CODE)


def _run(argv: list[str] | None) -> None:
    os.environ.setdefault(PYDANTIC_PLUGINS_ENV, "__all__")
    try:
        code = app(args=argv, prog_name="autotune", standalone_mode=False)
    except AutotuneError as error:
        report_error(str(error))
        sys.exit(2)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except typer.Abort:
        report_error("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        report_error("interrupted")
        sys.exit(130)
    except Exception as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # ``autotune`` alone: its help, on stdout, exit 0
            print(error.ctx.get_help())  # type: ignore[attr-defined]
            sys.exit(0)
        # Usage errors from click (or the click that typer vendors): duck-typed, so both work.
        exit_code = getattr(error, "exit_code", None)
        format_message = getattr(error, "format_message", None)
        if callable(format_message) and isinstance(exit_code, int):
            message = str(format_message()).strip().splitlines()
            report_error(message[0] if message else type(error).__name__)
            sys.exit(exit_code)
        raise
    if isinstance(code, int) and code != 0:
        sys.exit(code)
