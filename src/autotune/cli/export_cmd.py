"""``autotune export RUN_DIR -o DIR [--merge] [--checkpoint NAME]``: a trained run as a model others load.

The checks run here, before anything is written (one line, exit code 2 each): RUN_DIR is a run that ``autotune
launch`` wrote (its ``plan.yaml``), its weights exist (``final/``, or ``checkpoints/NAME``), the output does not
exist, and the disk (and, for ``--merge``, the memory) holds what the export needs, with the numbers. The export
itself runs in the training core's process (``python -m autotune.trainer.export``): the CLI never imports torch.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Final

import typer

from autotune.cli.console import console, note
from autotune.errors import InvalidRequestError
from autotune.units import GIB

MERGE_BYTES_PER_PARAM: Final[dict[str, int]] = {"bf16": 2, "bf16-mixed": 2, "fp16-mixed": 2, "fp32": 4}
"""Bytes per parameter of a merged model in the plan's compute dtype (what ``--merge`` writes and holds in memory)."""


def export_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by autotune launch.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The folder to write (must not exist).")],
    merge: Annotated[
        bool, typer.Option("--merge", help="Merge a LoRA / QLoRA adapter into its base: a full model.")
    ] = False,
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", help="Export checkpoints/NAME instead of final/.")
    ] = None,
) -> None:
    """Export a run's adapter (or, with --merge, a merged model) with its tokenizer, loadable by transformers."""
    weights = check_export(run_dir, output, merge, checkpoint)
    argv = [sys.executable, "-m", "autotune.trainer.export", "--run-dir", str(run_dir), "--weights", str(weights),
            "--output", str(output)] + (["--merge"] if merge else [])  # fmt: skip
    with console().status(f"exporting {weights} …"):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = [line for line in (done.stderr + done.stdout).strip().splitlines() if line.strip()]
    if done.returncode != 0:
        raise InvalidRequestError(lines[-1].removeprefix("error: ") if lines else f"export exit {done.returncode}")
    console().print(lines[-1] if lines else f"wrote {output}", markup=False, soft_wrap=True)


def check_export(run_dir: Path, output: Path, merge: bool, checkpoint: str | None) -> Path:
    """The weights folder to export, after every check; nothing is written.

    Raises:
        InvalidRequestError: not a run directory, no weights, an existing output, too little disk or memory.
    """
    from autotune.costmodel.params import count_params
    from autotune.launcher.preflight import has_weights
    from autotune.schemas.plan_io import load_plan

    if not (run_dir / "plan.yaml").is_file():
        raise InvalidRequestError(f"{run_dir} is not a run directory (no plan.yaml written by autotune launch)")
    weights = run_dir / "checkpoints" / checkpoint if checkpoint else run_dir / "final"
    if not has_weights(weights):
        available = sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*") if p.is_dir())
        hint = f"; checkpoints: {', '.join(available)} (--checkpoint NAME)" if available else ""
        raise InvalidRequestError(f"the run {run_dir} has no weights in {weights.name}/{hint}")
    if output.exists():
        raise InvalidRequestError(f"{output} exists: export writes a new folder (choose another -o)")
    plan = load_plan(run_dir / "plan.yaml")
    merged = merge and plan.setting.uses_adapters
    params = count_params(plan.model).total_params
    need_bytes = params * MERGE_BYTES_PER_PARAM.get(plan.setting.precision, 4) if merged else _size(weights)
    parent = next(p for p in [output.absolute(), *output.absolute().parents] if p.exists())
    free_bytes = shutil.disk_usage(parent).free
    if need_bytes > free_bytes:
        raise InvalidRequestError(
            f"export needs about {need_bytes / GIB:.1f} GiB on {parent}, which has {free_bytes / GIB:.1f} GiB free"
        )
    available_bytes = available_memory_bytes() if merged else None
    if available_bytes is not None and need_bytes > available_bytes:
        raise InvalidRequestError(
            f"--merge holds the {params / 1e9:.2f} B-parameter base in memory (about {need_bytes / GIB:.1f} GiB), "
            f"and {available_bytes / GIB:.1f} GiB is available: export the adapter alone (without --merge)"
        )
    return weights


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
