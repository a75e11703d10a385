"""Print how long ``autotune calibrate`` takes to read a CSV of N valid measurement rows (issue 41 item 3).

Writes N rows (a catalog model on a catalog GPU; sequence lengths, micro batches and times vary) to a temporary CSV
and times :func:`autotune.profiles.measurement_csv.runs_from_csv` on it (streamed, each distinct setting validated
once); ``--calibrate`` also times the whole command (reading, then the fit over the 12 distinct settings the rows
repeat: ``calibration/replicates.py``), wall clock and CPU.

Usage (from the repository root):
    python benchmarks/calibrate_csv.py [--rows 100000] [--calibrate]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autotune.profiles.measurement_csv import runs_from_csv

HEADER = "model,gpu,method,seq_len,micro_batch_size,grad_accum,peak_memory_gib,memory_kind,micro_step_time_s\n"


def write_rows(path: Path, rows: int) -> None:
    """``rows`` valid rows: two models, two GPUs, four sequence lengths, three micro batches."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write(HEADER)
        for index in range(rows):
            model = ("llama3.2-1b", "llama3.1-8b")[index % 2]
            gpu = ("rtx-4090", "a100-80gb")[index // 2 % 2]
            seq_len = 512 * (1 + index % 4)
            micro = 1 + index % 3
            handle.write(f"{model},{gpu},qlora,{seq_len},{micro},8,{6 + index % 7},allocated,{0.2 + index % 11 / 10}\n")


def main() -> None:
    """Write the CSV, time reading it (and with --calibrate the whole command), print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--calibrate", action="store_true", help="also time `autotune calibrate` on the file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.csv"
        write_rows(path, args.rows)
        started = time.perf_counter()
        runs = runs_from_csv(path)
        read_s = time.perf_counter() - started
        print(f"read {len(runs):,} rows ({path.stat().st_size / 2**20:.1f} MiB) in {read_s:.1f} s")
        if args.calibrate:
            from autotune.cli.app import main as autotune

            started, cpu = time.perf_counter(), time.process_time()
            try:
                autotune(["calibrate", str(path), "-o", str(Path(folder) / "c.yaml")])
            except SystemExit as exit_:
                print(f"autotune calibrate exited {exit_.code}")
            print(
                f"autotune calibrate on {args.rows:,} rows: {time.perf_counter() - started:.1f} s "
                f"({time.process_time() - cpu:.1f} s of CPU: on a shared machine the difference is other work)"
            )


if __name__ == "__main__":
    main()
