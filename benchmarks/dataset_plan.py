"""Time ``autotune plan MODEL --dataset`` on a long-tailed instruction dataset written here (issue 26, item 1).

Usage:
  python benchmarks/dataset_plan.py --model MODEL_DIR_OR_GGUF [--rows 100000] [--seq-len 2048] [--seed 0]
  python benchmarks/dataset_plan.py --write-only data.jsonl [--rows 5000]      # just the dataset

The dataset: instruction rows whose prompt and answer lengths (in words) are log-normal (median 12 and 60 words,
σ 0.9 and 1.1: a long tail like real instruction sets, where a few answers are 20× the median), seeded. The
benchmark writes it, runs ``autotune plan MODEL --gpu 4090 --dataset FILE --seq-len S --json`` once as a fresh
process, and prints the wall time, the rows read per second and the length statistics the plan reports.
Issue 26's bar: 100,000 rows in under 20 s on a laptop-class CPU.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "it",
         "an", "were", "are", "which", "this", "be", "or", "has", "had", "not", "but", "they", "their", "one", "all",
         "been", "more", "also", "new", "other", "some", "time", "first", "two", "may", "after")  # fmt: skip


def write_rows(path: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` instruction rows with log-normal prompt and answer lengths (see the module docstring)."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(rows):
            prompt = max(1, int(rng.lognormvariate(2.5, 0.9)))
            answer = max(1, int(rng.lognormvariate(4.1, 1.1)))
            row = {
                "instruction": " ".join(rng.choice(WORDS) for _ in range(prompt)),
                "output": " ".join(rng.choice(WORDS) for _ in range(answer)),
            }
            handle.write(json.dumps(row) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Write the dataset and time the plan; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A model directory or .gguf with a tokenizer.")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-only", type=Path, default=None, help="Write the dataset here and stop.")
    args = parser.parse_args(argv)
    if args.write_only is not None:
        write_rows(args.write_only, args.rows, args.seed)
        print(f"wrote {args.rows:,} rows to {args.write_only}")
        return 0
    if not args.model:
        parser.error("--model is required unless --write-only")
    with tempfile.TemporaryDirectory() as work:
        data = write_rows(Path(work) / "rows.jsonl", args.rows, args.seed)
        argv_plan = [sys.executable, "-c", "from autotune.cli.app import main; main()", "plan", args.model, "--gpu",
                     "4090", "--dataset", str(data), "--seq-len", str(args.seq_len), "--max-rows", str(args.rows),
                     "--json"]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(argv_plan, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - start
    if done.returncode != 0:
        print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
        return 1
    stats = json.loads(done.stdout)["plan_file"]["dataset"]
    print(
        f"{args.rows:,} rows in {wall_s:.1f} s ({args.rows / wall_s:,.0f} rows/s; bar: 100,000 rows < 20 s): "
        f"p50 / p90 / p99 / max {stats['p50_tokens']} / {stats['p90_tokens']} / {stats['p99_tokens']} / "
        f"{stats['max_tokens']} tokens, {stats['truncated']} truncated at {args.seq_len}, {stats['blocks']:,} blocks "
        f"at {stats['packing_efficiency']:.1%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
