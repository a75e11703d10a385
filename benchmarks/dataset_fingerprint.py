"""Print what the dataset fingerprint (a SHA-256 of the whole file, streamed) costs per GiB (issue 41 item 4).

Writes a file of ``--gib`` GiB of random bytes to a temporary folder, reads it once to put it in the page cache,
then times :func:`autotune.schemas.dataset_stats.fingerprint` on it (what ``plan --dataset`` and each launch pay).

Usage (from the repository root):
    python benchmarks/dataset_fingerprint.py [--gib 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from autotune.schemas.dataset_stats import fingerprint

CHUNK_BYTES = 1 << 24


def main() -> None:
    """Write the file, time the fingerprint ``--repeat`` times, print seconds per GiB (best and median)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    size = int(args.gib * 2**30)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.jsonl"
        with path.open("wb") as handle:
            for start in range(0, size, CHUNK_BYTES):
                handle.write(os.urandom(min(CHUNK_BYTES, size - start)))
        path.read_bytes()  # into the page cache: the hash, not the disk, is timed
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            fingerprint(str(path))
            times.append((time.perf_counter() - started) / args.gib)
        times.sort()
        print(
            f"fingerprint of {args.gib:g} GiB: {times[0]:.2f} s/GiB best, {times[len(times) // 2]:.2f} s/GiB median "
            f"of {args.repeat} ({os.cpu_count()} CPUs)"
        )


if __name__ == "__main__":
    main()
