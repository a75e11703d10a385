"""The ``autotune`` root: registers the commands and turns user errors into one line and exit code 2.

Command modules are imported here; each keeps its heavy imports inside the command function, so
``autotune plan`` never imports the training stack.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from autotune.errors import AutotuneError
from autotune.quiet import quiet_third_party

app = typer.Typer(
    name="autotune",
    help="Pick the fastest LLM fine-tuning setting that fits your GPUs, and launch it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def _register_commands() -> None:
    """Import the command modules (each decorates functions onto ``app``)."""
    from autotune.cli import commands  # noqa: F401  (import for its side effect)


def report_error(message: str) -> None:
    """Print one red line on stderr (no traceback)."""
    from rich.markup import escape

    _stderr.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app; user errors → one line on stderr, exit code 2."""
    quiet_third_party()
    _register_commands()
    try:
        code = app(args=argv, standalone_mode=False)
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
