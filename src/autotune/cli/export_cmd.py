"""``autotune export RUN_DIR -o DIR [--merge [--dtype D]] [--checkpoint NAME]``: a trained run as a model others load.

The checks run here, before anything is written (one line, exit code 2 each): RUN_DIR is a run that ``autotune
launch`` wrote (its ``plan.yaml``), ``--checkpoint`` names one of its checkpoints (``checkpoint-<step>`` under
``checkpoints/``: no path, no ``..``, nothing outside the run), its weights exist (``final/``, or that checkpoint),
the output does not exist and is not inside the run, and the disk (and, for ``--merge``, the memory) holds what the
export needs, with the numbers. The export itself runs in the training core's process (``python -m
autotune.trainer.export``: the CLI never imports torch), which checks the weights against the trainer's manifest
before it writes. SIGINT and SIGTERM to the CLI are passed to that process, which removes its unfinished folder, and
the CLI waits for it: an interrupted export leaves no output folder.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated, Final

import typer

from autotune.cli.console import console, err_console, note
from autotune.errors import InvalidRequestError
from autotune.launcher.rundir import CHECKPOINT_PREFIX, CHECKPOINTS_DIR, FINAL_DIR
from autotune.units import BYTES_PER_DTYPE, GIB

EXPORT_DTYPES: Final = ("bf16", "fp16", "fp32")
"""The dtypes ``--dtype`` names (a merged model's weights; each costs ``units.BYTES_PER_DTYPE`` on disk)."""

MERGE_DTYPE: Final = "fp32"
"""The dtype ``--merge`` loads the base in and merges in (then casts to ``--dtype``): what it holds in memory."""


def export_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by autotune launch.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The folder to write (must not exist).")],
    merge: Annotated[
        bool, typer.Option("--merge", help="Merge a LoRA / QLoRA adapter into its base: a full model.")
    ] = False,
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", help="Export checkpoints/NAME instead of final/.")
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            help="With --merge: the merged weights' dtype, bf16|fp16|fp32 (the plan's compute "
            "dtype by default; merged in fp32, then cast).",
        ),
    ] = None,
) -> None:
    """Export a run's adapter (or, with --merge, a merged model) with its tokenizer, loadable by transformers."""
    weights, dtype_name = check_export(run_dir, output, merge, checkpoint, dtype)
    argv = [sys.executable, "-m", "autotune.trainer.export", "--run-dir", str(run_dir), "--weights", str(weights),
            "--output", str(output), "--dtype", dtype_name] + (["--merge"] if merge else [])  # fmt: skip
    with console().status(f"exporting {weights} …"):
        code, lines = run_export_child(argv)
    if code in INTERRUPT_EXIT_CODES:
        raise typer.Exit(code)
    if code != 0:
        raise InvalidRequestError(lines[-1].removeprefix("error: ") if lines else f"export exit {code}")
    console().print(lines[-1] if lines else f"wrote {output}", markup=False, soft_wrap=True)


INTERRUPT_EXIT_CODES: Final = (130, 128 + signal.SIGTERM)
"""How an export stopped by SIGINT / SIGTERM exits (the shell's 128 + signal number; the child reports 130)."""


def run_export_child(argv: list[str]) -> tuple[int, list[str]]:
    """Run the export process; returns its exit code and its non-blank output lines (stderr and stdout, in order).

    Its ``writing …`` line is shown on stderr as it comes (the export is under way). SIGINT / SIGTERM received
    meanwhile are sent on to the child, which removes its unfinished folder; the CLI waits for it to end and then
    returns ``128 + signal``, with the child's last line shown on stderr.
    """
    received: list[int] = []
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:

        def forward(signum: int, _frame: FrameType | None) -> None:
            received.append(signum)
            child.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            assert child.stdout is not None
            for line in child.stdout:
                if line.strip():
                    lines.append(line.rstrip("\n"))
                if line.startswith("writing "):
                    err_console().print(lines[-1], markup=False, highlight=False)
            code = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if received:
        if lines:
            err_console().print(lines[-1].removeprefix("error: "), markup=False, highlight=False)
        return 128 + received[0], lines
    return code, lines


def check_export(
    run_dir: Path, output: Path, merge: bool, checkpoint: str | None, dtype: str | None = None
) -> tuple[Path, str]:
    """The weights folder to export and a merged model's dtype name, after every check; nothing is written.

    The dtype is ``dtype`` (one of :data:`EXPORT_DTYPES`) or the plan's compute dtype (the cost model's rule,
    ``costmodel.precision.dtype_bytes``: bf16 plans compute in fp16 on a card without bf16).
    Disk: parameters × the dtype's bytes for a merged model, the weights' size otherwise; memory (``--merge``):
    parameters × the bytes of :data:`MERGE_DTYPE`.

    Raises:
        InvalidRequestError: not a run directory, a ``--checkpoint`` that is not one of the run's
            (:func:`checkpoint_folder`), no weights, an existing output or one inside the run, a ``--dtype`` that is
            not one of the names or comes without ``--merge`` of an adapter run, too little disk or memory.
    """
    from autotune.costmodel.params import count_params
    from autotune.costmodel.precision import dtype_bytes
    from autotune.launcher.preflight import has_weights
    from autotune.profiles.catalog import resolve_gpu
    from autotune.schemas.plan_io import load_plan

    if not (run_dir / "plan.yaml").is_file():
        raise InvalidRequestError(f"{run_dir} is not a run directory (no plan.yaml written by autotune launch)")
    weights = checkpoint_folder(run_dir, checkpoint) if checkpoint is not None else run_dir / FINAL_DIR
    if not has_weights(weights):
        raise InvalidRequestError(f"the run {run_dir} has no weights in {weights.name}/{_checkpoints_hint(run_dir)}")
    if output.exists() or output.is_symlink():
        raise InvalidRequestError(f"{output} exists: export writes a new folder (choose another -o)")
    if output.resolve().is_relative_to(run_dir.resolve()):
        raise InvalidRequestError(
            f"{output} is inside the run {run_dir}: export to a folder outside it (choose another -o)"
        )
    if dtype is not None and dtype not in EXPORT_DTYPES:
        raise InvalidRequestError(f"--dtype {dtype}: choose one of {', '.join(EXPORT_DTYPES)}")
    plan = load_plan(run_dir / "plan.yaml")
    merged = merge and plan.setting.uses_adapters
    if dtype is not None and not merged:
        raise InvalidRequestError(
            "--dtype sets a merged model's dtype: it needs --merge of a LoRA / QLoRA run (other exports keep the "
            "weights as trained)"
        )
    dtype_name = dtype or dtype_bytes(plan.setting, resolve_gpu(plan.cluster.gpu)[0]).compute_dtype
    params = count_params(plan.model).total_params
    need_bytes = int(params * BYTES_PER_DTYPE[dtype_name]) if merged else _size(weights)
    parent = next(p for p in [output.absolute(), *output.absolute().parents] if p.exists())
    free_bytes = shutil.disk_usage(parent).free
    if need_bytes > free_bytes:
        raise InvalidRequestError(
            f"export needs about {need_bytes / GIB:.1f} GiB on {parent}, which has {free_bytes / GIB:.1f} GiB free"
        )
    available_bytes = available_memory_bytes() if merged else None
    memory_bytes = int(params * BYTES_PER_DTYPE[MERGE_DTYPE])
    if available_bytes is not None and memory_bytes > available_bytes:
        raise InvalidRequestError(
            f"--merge holds the {params / 1e9:.2f} B-parameter base in {MERGE_DTYPE} in memory (about "
            f"{memory_bytes / GIB:.1f} GiB), and {available_bytes / GIB:.1f} GiB is available: export the adapter "
            "alone (without --merge)"
        )
    return weights, dtype_name


CHECKPOINT_NAME: Final = re.compile(rf"{CHECKPOINT_PREFIX}\d+")
"""What ``--checkpoint`` takes: a checkpoint's folder name under the run's ``checkpoints/`` (``checkpoint-<step>``)."""


def checkpoint_folder(run_dir: Path, name: str) -> Path:
    """``run_dir/checkpoints/NAME`` for a ``--checkpoint`` that names one of the run's checkpoints.

    Raises:
        InvalidRequestError: an empty name, a path (``/``, ``..``, absolute), a name that is not ``checkpoint-<step>``,
            one the run does not have, or one that leads outside the run's ``checkpoints/`` (a link); one line with
            the run's checkpoints.
    """
    if not name.strip():
        raise InvalidRequestError(
            f"--checkpoint is empty: name one of the run's checkpoints{_checkpoints_hint(run_dir)}"
        )
    if not CHECKPOINT_NAME.fullmatch(name):
        raise InvalidRequestError(
            f"--checkpoint {name!r} is not a checkpoint name: give the name of a folder under {run_dir}/"
            f"{CHECKPOINTS_DIR} (checkpoint-<step>), not a path{_checkpoints_hint(run_dir)}"
        )
    checkpoints = run_dir / CHECKPOINTS_DIR
    folder = checkpoints / name
    if not folder.is_dir():
        raise InvalidRequestError(f"the run {run_dir} has no checkpoint {name}{_checkpoints_hint(run_dir)}")
    if not folder.resolve().is_relative_to(checkpoints.resolve()):
        raise InvalidRequestError(f"{folder} leads outside the run's {CHECKPOINTS_DIR}/: export refused")
    return folder


def _checkpoints_hint(run_dir: Path) -> str:
    checkpoints = run_dir / CHECKPOINTS_DIR
    available = sorted(
        (p.name for p in checkpoints.glob(f"{CHECKPOINT_PREFIX}*") if CHECKPOINT_NAME.fullmatch(p.name) and p.is_dir()),
        key=lambda name: int(name.removeprefix(CHECKPOINT_PREFIX)),
    )
    return f"; checkpoints: {', '.join(available)} (--checkpoint NAME)" if available else ""


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def available_memory_bytes() -> int | None:
    """Physical memory available without swapping, bytes (``psutil.virtual_memory().available``), or None.

    psutil is in the ``train`` extra, which the export itself needs (it loads the model with torch); without it the
    merge is not checked against memory and a note on stderr says so.
    """
    try:
        import psutil
    except ImportError:
        note('memory not checked before the merge: psutil is not installed (pip install -e ".[train]")')
        return None
    return int(psutil.virtual_memory().available)
