"""Step time of a ``--cpu`` run of the training core against its thread count (issue 29 item 9).

Trains the integration tests' tiny Llama (2 layers, hidden 64, random weights; nothing downloads) for a few
steps with ``OMP_NUM_THREADS`` unset (torch's default: one thread per logical CPU) and set to 1, 2, …, once on
the machine as it is and once with ``--load N`` busy processes beside it, and prints the measured step time
(``run_report.json``'s ``step_time_s_measured``) and how far the logged losses are from the default's.
The launcher's rule (:func:`autotune.launcher.cputhreads.cpu_threads`) is printed for each condition, and once
more right after the busy processes stop, next to what the one-minute load average would have given then.

Usage:
    python benchmarks/cpu_threads.py [--steps 12] [--load 2] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.trainer_helpers import (  # noqa: E402
    build_plan_file,
    core_args,
    instruction_rows,
    save_tiny_model,
    write_jsonl,
)

from autotune.hostcpu import host_cpu  # noqa: E402
from autotune.launcher.cputhreads import cpu_threads  # noqa: E402


def _busy() -> None:
    while True:
        pass


def run_once(plan: Path, data: Path, out: Path, steps: int, threads: int | None) -> tuple[float, list[float], float]:
    """One run of the core; returns (median step time s, losses, wall s)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env.update({"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT / "src")})
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "autotune.trainer", *core_args(plan, data, out, steps), "--logging-steps", "1"],
        env=env,
        check=True,
        capture_output=True,
    )
    wall_s = time.perf_counter() - start
    report = json.loads((out / "run_report.json").read_text())
    return report["step_time_s_measured"], report["losses"], wall_s


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--load", type=int, default=2, help="busy processes for the loaded condition")
    parser.add_argument("--threads", default="1,2", help="thread counts to try besides torch's default")
    args = parser.parse_args()
    counts: list[int | None] = [None, *(int(t) for t in args.threads.split(","))]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = save_tiny_model(root / "model")
        data = write_jsonl(root / "data.jsonl", instruction_rows(128))
        plan = build_plan_file(model, root / "plan.yaml", seq_len=128, micro_batch_size=8, method="full")
        for load in (0, args.load):
            workers = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(load)]
            for worker in workers:
                worker.start()
            time.sleep(5 if load else 0)  # let them start (and the load average see them)
            cores, busy = host_cpu()
            rule = cpu_threads(processes=1, physical_cores=cores, busy=busy)
            print(
                f"busy processes {load}: {cores} physical core(s), {busy:.1f} other thread(s) running, load average "
                f"{os.getloadavg()[0]:.2f}; rule -> OMP_NUM_THREADS={rule}"
            )
            reference: list[float] | None = None
            for index, threads in enumerate(counts):
                step_s, losses, wall_s = run_once(plan, data, root / f"out-{load}-{index}", args.steps, threads)
                reference = reference or losses
                delta = max(abs(a - b) for a, b in zip(losses, reference, strict=True))
                same = "identical" if losses == reference else f"max |difference| {delta:.2e}"
                label = "default" if threads is None else str(threads)
                print(
                    f"  OMP_NUM_THREADS={label:>7}: step {step_s * 1000:8.1f} ms, wall {wall_s:6.1f} s, losses {same}"
                )
            for worker in workers:
                worker.terminate()
                worker.join()
            if workers:
                cores, busy = host_cpu()
                load_avg = os.getloadavg()[0]
                print(
                    f"just after they stop: {busy:.1f} other thread(s) running -> OMP_NUM_THREADS="
                    f"{cpu_threads(processes=1, physical_cores=cores, busy=busy)}; the load average {load_avg:.2f} "
                    f"would give {cpu_threads(processes=1, physical_cores=cores, busy=load_avg)}"
                )


if __name__ == "__main__":
    main()
