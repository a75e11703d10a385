"""``autotune export RUN_DIR -o DIR [--merge [--dtype D]] [--checkpoint NAME]``: a trained run as a model others load.

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
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = [line for line in (done.stderr + done.stdout).strip().splitlines() if line.strip()]
    if done.returncode != 0:
        raise InvalidRequestError(lines[-1].removeprefix("error: ") if lines else f"export exit {done.returncode}")
    console().print(lines[-1] if lines else f"wrote {output}", markup=False, soft_wrap=True)


def check_export(
    run_dir: Path, output: Path, merge: bool, checkpoint: str | None, dtype: str | None = None
) -> tuple[Path, str]:
    """The weights folder to export and a merged model's dtype name, after every check; nothing is written.

    The dtype is ``dtype`` (one of :data:`EXPORT_DTYPES`) or the plan's compute dtype (the cost model's rule,
    ``costmodel.precision.dtype_bytes``: bf16 plans compute in fp16 on a card without bf16).
    Disk: parameters × the dtype's bytes for a merged model, the weights' size otherwise; memory (``--merge``):
    parameters × the bytes of :data:`MERGE_DTYPE`.

    Raises:
        InvalidRequestError: not a run directory, no weights, an existing output, a ``--dtype`` that is not one of
            the names or comes without ``--merge`` of an adapter run, too little disk or memory.
    """
    from autotune.costmodel.params import count_params
    from autotune.costmodel.precision import dtype_bytes
    from autotune.launcher.preflight import has_weights
    from autotune.profiles.catalog import resolve_gpu
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
