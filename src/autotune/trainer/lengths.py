"""Token lengths of a dataset's examples as the training core tokenizes them: ``python -m autotune.trainer.lengths``.

``autotune plan --dataset`` runs this in a subprocess (planning itself never imports the training stack) and reads
one JSON object from its stdout, an :class:`autotune.schemas.dataset_stats.ExampleLengths`: for every example read,
its token count before truncation, the position of its first learned label and its learned tokens. The tokenization
is the launch's own (:data:`autotune.trainer.data.TOKENIZERS` with the model's tokenizer,
:func:`autotune.trainer.model.load_tokenizer`), so the lengths are the ones a launch of the plan trains on.

Rows are read in file order, at most ``--max-rows`` of them (``rows_read`` < ``rows_total`` then). Errors are one
line on stderr and exit code 2 (:class:`autotune.errors.AutotuneError`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, get_args

from autotune.schemas.trainer_options import DatasetFormat

BATCH_ROWS = 1000
"""Rows tokenized per tokenizer call (:func:`autotune.trainer.data.tokenize_rows`)."""


def example_lengths(
    dataset: str, tokenizer_source: str, dataset_format: str, max_rows: int, progress_every: int = 0
) -> dict[str, Any]:
    """The :class:`~autotune.schemas.dataset_stats.ExampleLengths` of ``dataset`` as a dict (see the module).

    Raises:
        ConfigError: the dataset or the tokenizer cannot be loaded, or its columns fit no format.
    """
    from autotune.quiet import quiet_third_party

    quiet_third_party()
    from autotune.trainer.data import IGNORE_INDEX, detect_format, load_raw_dataset, tokenize_rows
    from autotune.trainer.model import load_tokenizer, resolve_source

    raw = load_raw_dataset(dataset)
    fmt = detect_format(list(raw.column_names), dataset_format, dataset)
    tokenizer = load_tokenizer(resolve_source(tokenizer_source))
    total = len(raw)
    count = min(total, max_rows)
    lengths: list[int] = []
    first_learned: list[int] = []
    learned: list[int] = []
    reported = 0
    for start in range(0, count, BATCH_ROWS):
        for example in tokenize_rows(raw[start : min(count, start + BATCH_ROWS)], fmt, tokenizer):
            labels, size = example.labels, len(example.input_ids)
            lengths.append(size)
            first_learned.append(next((k for k in range(1, size) if labels[k] != IGNORE_INDEX), size))
            learned.append(size - 1 - labels[1:].count(IGNORE_INDEX) if size else 0)  # the first label never counts
        if progress_every and len(lengths) - reported >= progress_every:
            reported = len(lengths)
            print(f"progress {len(lengths)} {count}", file=sys.stderr, flush=True)
    return {
        "format": fmt,
        "rows_total": total,
        "rows_read": count,
        "lengths": lengths,
        "first_learned": first_learned,
        "learned": learned,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, print the lengths as one JSON object; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m autotune.trainer.lengths", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--tokenizer", required=True, help="Model directory, .gguf file or cached hub id.")
    parser.add_argument("--dataset-format", default="auto", choices=get_args(DatasetFormat))
    parser.add_argument("--max-rows", type=int, default=200_000)
    parser.add_argument("--progress-every", type=int, default=0, help="Print 'progress N TOTAL' to stderr.")
    args = parser.parse_args(argv)
    from autotune.errors import exit_code

    def run() -> int:
        result = example_lengths(args.dataset, args.tokenizer, args.dataset_format, args.max_rows, args.progress_every)
        json.dump(result, sys.stdout)
        return 0

    return exit_code(run)


if __name__ == "__main__":
    sys.exit(main())
