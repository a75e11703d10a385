"""``--dataset`` for ``plan`` and ``estimate``: the user's own data, tokenized as a launch would, into the workload.

The lengths come from ``python -m autotune.trainer.lengths`` in a subprocess (planning never imports the training
stack): the launch's loader, format detection and tokenization with the model's own tokenizer. They become a
:class:`~autotune.schemas.dataset_stats.DatasetStats` at the plan's ``seq_len`` and a workload (``--packing``): the
packed blocks (the core packs whole examples by best-fit decreasing: ``num_samples`` = blocks, each a sequence of
``seq_len``), or padded rows (one example per sequence, each micro batch padded to its longest example:
``Workload.computed_tokens_per_sequence``). ``auto`` prices both and keeps the faster whole run (``cli.dataset_plan``).

Packed blocks carry what attention over them costs (``schemas.dataset_stats.packed_batches``: Σ lᵢ² / Σ lᵢ for
flash-attention-2's flattened rows, the share of blocks of several examples for sdpa's masked rows). Not priced yet:
packed blocks are costed as full ``seq_len`` sequences otherwise, and their tokens/s counts the blocks' padding
(``packing_efficiency`` says how much is real).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, get_args

from autotune.errors import InvalidRequestError
from autotune.schemas.dataset_stats import (
    PACKINGS,
    DatasetStats,
    ExampleLengths,
    Packing,
    dataset_batches,
    fingerprint,
    seq_len_notes,
    summarize,
)
from autotune.schemas.trainer_options import DatasetFormat
from autotune.session.progress import sink
from autotune.units import human_duration

if TYPE_CHECKING:
    from autotune.session.planning import PlanOptions

DATASET_FORMATS: Final[tuple[str, ...]] = get_args(DatasetFormat)
"""What ``--dataset-format`` takes (the launch's choices: :data:`autotune.schemas.trainer_options.DatasetFormat`)."""

LENGTHS_TIMEOUT_S: Final[float] = 3600.0
"""Tokenizing stops after an hour (``--max-rows`` bounds it well before that for usual files)."""


def tokenizer_source(model: str, tokenizer: str | None) -> str:
    """Where the tokenizer for ``--dataset`` comes from.

    ``--tokenizer``, else MODEL when it is a model directory with a tokenizer (the launch pre-flight's rule,
    :func:`autotune.launcher.preflight.has_tokenizer`), a ``.gguf`` file or a hub id (``org/name``).

    Raises:
        InvalidRequestError: MODEL is a catalog name or a ``config.json`` without a tokenizer beside it (one line
            naming ``--tokenizer``).
    """
    if tokenizer:
        return tokenizer
    from autotune.launcher.preflight import has_tokenizer  # imported here: plan's cold start

    path = Path(model).expanduser()
    if path.is_file() and path.name == "config.json":
        path = path.parent
    if path.is_dir() and has_tokenizer(path):
        return str(path)
    if path.is_file() and path.suffix == ".gguf":
        return str(path)
    if not path.exists() and model.count("/") == 1 and not model.startswith((".", "/", "~")):
        return model
    raise InvalidRequestError(
        f"--dataset needs the model's tokenizer, and {model} has none here: pass --tokenizer DIR (a model directory "
        "or a cached hub id with the same tokenizer)"
    )


PARALLELISM_ENV: Final = "TOKENIZERS_PARALLELISM"
"""The Hugging Face tokenizers switch for batch encoding on every core (``tokenizers`` reads it at the first batch).
Quiet mode sets it false for processes that fork (the trainer's data loader); the lengths subprocess never forks, so
it runs with it true unless the user set it (measured: docs/usage.md, "Plan from your dataset")."""


@functools.lru_cache(maxsize=4)
def read_lengths(dataset: str, source: str, dataset_format: str, max_rows: int) -> ExampleLengths:
    """Run ``python -m autotune.trainer.lengths`` and return its lengths; a spinner on stderr while it runs.

    Cached per arguments: ``sweep --dataset`` summarizes the same lengths at each ``seq_len``, tokenizing once.

    Raises:
        InvalidRequestError: the subprocess refused the dataset or the tokenizer (its one line), the training stack
            is not installed, or it printed no lengths.
    """
    argv = [sys.executable, "-m", "autotune.trainer.lengths", "--dataset", dataset, "--tokenizer", source,
            "--dataset-format", dataset_format, "--max-rows", str(max_rows)]  # fmt: skip
    from autotune.quiet import set_by_user  # not at import: plan without --dataset stays light

    env = dict(os.environ)
    if not set_by_user(PARALLELISM_ENV):
        env[PARALLELISM_ENV] = "true"  # the child never forks: let the Rust tokenizer use every core
    started = time.perf_counter()
    with sink().status(f"tokenizing {dataset} with the tokenizer of {source} …"):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=LENGTHS_TIMEOUT_S, check=False, env=env)
        except subprocess.TimeoutExpired:
            raise InvalidRequestError(
                f"tokenizing {dataset} took over {LENGTHS_TIMEOUT_S:.0f} s: lower --max-rows"
            ) from None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    if done.returncode != 0:
        if any("ModuleNotFoundError" in line for line in lines):
            raise InvalidRequestError(
                '--dataset tokenizes with the training stack, which is not installed: pip install -e ".[train]"'
            )
        last = lines[-1] if lines else f"exit code {done.returncode}"
        raise InvalidRequestError(last.removeprefix("error: "))
    try:
        lengths = ExampleLengths.model_validate(json.loads(done.stdout))
    except (json.JSONDecodeError, ValueError) as error:
        raise InvalidRequestError(f"tokenizing {dataset} printed no lengths ({error})") from None
    if not lengths.lengths:
        raise InvalidRequestError(f"dataset {dataset} has no rows")
    elapsed = time.perf_counter() - started
    if elapsed > 1.0:
        sink().done(f"tokenized {lengths.rows_read:,} rows of {dataset} in {elapsed:.1f} s")
    return lengths


def dataset_samples(
    model: str,
    dataset: str,
    tokenizer: str | None,
    dataset_format: str,
    max_rows: int,
    seq_len: int,
    sized: bool,
) -> tuple[int, DatasetStats, list[str]]:
    """The workload's ``num_samples`` (the dataset's packed blocks), its statistics and notes, for ``--dataset``.

    ``sized``: ``--num-samples`` or ``--dataset-tokens`` was given too (refused: the dataset gives the size).

    Raises:
        AutotuneError: ``sized``, ``max_rows`` < 1, an unknown format, a dataset the launch would refuse
            (:func:`autotune.launcher.preflight.check_dataset`), no example with a learned token within ``seq_len``,
            or what :func:`tokenizer_source` / :func:`read_lengths` refuse.
    """
    if sized:
        raise InvalidRequestError("--dataset gives the data's size: drop --num-samples / --dataset-tokens")
    if max_rows < 1:
        raise InvalidRequestError(f"--max-rows must be at least 1, got {max_rows}")
    if dataset_format not in DATASET_FORMATS:
        raise InvalidRequestError(f"--dataset-format {dataset_format!r}: choose one of {', '.join(DATASET_FORMATS)}")
    from autotune.launcher import preflight  # not at import: plan without --dataset stays light

    source = tokenizer_source(model, tokenizer)
    if not Path(source).expanduser().exists():
        preflight.check_hub_model(source)  # cached, or the hub reachable: no download retries to wait through
    preflight.check_dataset(dataset, dataset_format)  # the launch's own check of the file and every row
    lengths = read_lengths(dataset, source, dataset_format, max_rows)
    stats = summarize(lengths, seq_len, fingerprint(dataset), source)
    if stats.examples_kept == 0:
        raise InvalidRequestError(f"dataset {dataset}: no example has a learned token within seq_len {seq_len}")
    notes = seq_len_notes(stats)
    if stats.rows_read < stats.rows_total:
        notes.append(
            f"tokenized the first {stats.rows_read:,} of {stats.rows_total:,} rows (--max-rows); the rest are assumed "
            "alike"
        )
    return stats.blocks_total, stats, notes


PACKING_CHOICES: Final[tuple[str, ...]] = ("auto", *PACKINGS)
"""What ``--packing`` takes."""


def check_packing(packing: str, dataset: str | None) -> None:
    """Refuse a ``--packing`` value that is not one of :data:`PACKING_CHOICES`, or one given without ``--dataset``.

    Raises:
        InvalidRequestError: one line naming the choices.
    """
    packing_layouts(packing)  # refuses a value outside PACKING_CHOICES
    if packing != "auto" and dataset is None:
        raise InvalidRequestError("--packing chooses how --dataset's examples are batched: give --dataset too")


def packing_layouts(packing: str) -> tuple[Packing, ...]:
    """The layouts ``--packing`` asks to price: both for ``auto``, else the one named.

    Raises:
        InvalidRequestError: not one of :data:`PACKING_CHOICES`.
    """
    if packing == "auto":
        return PACKINGS
    for layout in PACKINGS:
        if layout == packing:
            return (layout,)
    raise InvalidRequestError(f"--packing {packing!r}: choose one of {', '.join(PACKING_CHOICES)}")


def packing_choice_note(chosen: Packing, total_time_s: Mapping[Packing, float | None], command: str) -> str:
    """'packing: CHOSEN — the whole run A against B OTHER (--packing OTHER to COMMAND it that way)' for ``auto``.

    ``total_time_s``: both layouts' whole runs (None: no setting fits); ``command``: 'plan' or 'estimate'.
    """
    other = next(layout for layout in total_time_s if layout != chosen)
    times = {layout: "no setting fits" if t is None else human_duration(t) for layout, t in total_time_s.items()}
    return (
        f"packing: {chosen} — the whole run {times[chosen]} against {times[other]} {other} "
        f"(--packing {other} to {command} it that way)"
    )


def packing_note(stats: DatasetStats, packing: Packing) -> str:
    """What the workload of ``packing`` is, in one line (sequences, their real tokens, what the time is priced on)."""
    if packing == "packed":
        return (
            f"packed: {stats.blocks_total:,} blocks of seq_len {stats.seq_len} at {stats.packing_efficiency:.1%} "
            "packing efficiency, priced as full blocks (real tokens are that fraction)"
        )
    return (
        f"padded: {stats.examples_total:,} examples of {stats.mean_kept_tokens:,.0f} tokens on average, one per row, "
        "each micro batch padded to its longest example (priced from the length distribution; tokens/s counts real "
        "tokens)"
    )


def with_packing(options: PlanOptions, stats: DatasetStats, packing: Packing) -> PlanOptions:
    """``options`` whose workload is ``stats``'s examples batched as ``packing`` (packed blocks or padded rows)."""
    num_samples, batches = dataset_batches(stats, packing)
    return replace(options, num_samples=num_samples, batches=batches)


def dataset_workload(options: PlanOptions) -> tuple[PlanOptions, DatasetStats | None, list[str]]:
    """``options`` with the workload of ``options.dataset`` (:func:`dataset_samples`), its statistics and notes.

    The workload is ``options.packing``'s (packed blocks for ``auto``: ``cli.dataset_plan`` then prices both).
    ``options`` come back unchanged, with no statistics, without ``--dataset``.

    Raises:
        AutotuneError: what :func:`check_packing` and :func:`dataset_samples` refuse.
    """
    check_packing(options.packing, options.dataset)
    if options.dataset is None:
        return options, None, []
    sized = options.num_samples is not None or options.dataset_tokens is not None
    _, stats, notes = dataset_samples(
        options.model, options.dataset, options.tokenizer, options.dataset_format, options.max_rows,
        options.seq_len, sized,
    )  # fmt: skip
    return with_packing(options, stats, packing_layouts(options.packing)[0]), stats, notes
