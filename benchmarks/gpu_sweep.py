"""Measure the training core on the GPU it finds against a plain transformers + peft script.

Plans + launches a fixed list of settings, and runs the same settings as a plain transformers + peft script; prints
measured vs predicted peak memory and tokens/s with MFU.

Usage:
  python benchmarks/gpu_sweep.py --dry-run                 # list what it would run, with predictions (no torch)
  python benchmarks/gpu_sweep.py --results DIR [--gpu KEY] [--model llama3-8b] [--budget-s 540] [--work /tmp/...]
                                 [--only NAME,NAME]        # only these entries, in this order

What it does (issue 21, item 4):
1. The GPU: ``nvidia-smi -L`` / ``rocm-smi`` (:func:`autotune.launcher.gpus.detect_gpus`) resolved in autotune's GPU
   catalog, unless ``--gpu`` names it.
2. The model: random bf16 weights from ``benchmarks/gpu_kit/configs/MODEL.json`` (``gpu_kit/make_model.py``, no
   download) with the byte-level tokenizer of ``gpu_kit/tok`` (``--model``, or the entry's own ``model``: the
   full fine-tuning offload entries use a 1B model); the data: random words, one token per byte
   (:func:`write_data`), packed at the plan's sequence length.
3. Each entry of :data:`SETTINGS`: ``autotune plan MODEL_DIR --gpu KEY FLAGS -o PLAN``, then ``autotune launch PLAN
   --max-steps N --set ...``; the run directory (``run_report.json`` + ``plan.yaml``: the form ``autotune calibrate``
   reads) is kept under ``DIR/NAME`` (checkpoints and final weights are deleted: they are not measurements). An entry
   with a baseline also runs ``gpu_kit/plain_hf.py`` on the same model, data and batch shape.
4. Before the entries, :func:`probe_host_link` times 1 GiB host↔device copies (pinned and pageable) on the same
   machine: the offload entries' error splits into bandwidth and overlap only with it (docs/cost-model.md §7.7).
5. The table: peak allocated GiB and tokens/s, measured and predicted, the signed errors, and MFU by autotune's
   definition (the plan's predicted MFU × measured / predicted tokens/s: the same FLOPs per token).
   ``DIR/results.jsonl`` holds one row per run and ``DIR/table.md`` the table.

Time: runs stop being started when less than an entry's timeout is left of ``--budget-s`` (counted from the
script's start, set-up included), so one call fits a 10-minute limit; the entries come in the order that matters
most (the issue's goal rows first: LoRA at micro batch 2 without checkpointing, its baseline, QLoRA at the same
setting, then Liger, checkpointing, and the planner's own choice last). Timings seen on one H100 with the kit
this replaces: set-up 60–80 s for an 8B model, a LoRA run of 4 steps 45–70 s, full fine-tuning with compile 250 s.

The offload entries (issue 27 item 4: what a one-GPU machine can check of the offload time terms) come after the
goal rows: full fine-tuning of Llama-3.2-1B with FSDP CPU offload and with ZeRO-3 CPU offload at world size 1, and
LoRA of the 8B model with FSDP CPU offload; ``--only`` runs just them. The FSDP offload entries run one micro-step
per optimizer step: on one GPU torch FSDP with CPU offload cannot accumulate gradients, and the planner refuses it
(``planner.space.offload_accumulation_error``). ``--dry-run`` prints each entry's prediction (``autotune plan`` of
the kit model's catalog profile on the named GPU: tokens/s, peak GiB, MFU, the PCIe streaming terms).

The lever entry (issue 44): ``levers-full-8b`` fine-tunes every weight of the 8B kit model at torchtune's
single-device shape (``recipes/configs/llama3_1/8B_full_single_device.yaml``: batch 2, no accumulation, seq 2048,
pure bf16, bitsandbytes PagedAdamW8bit stepped inside the backward, chunked cross-entropy, checkpointing): its
measured peak and tokens/s against the plan's (on an 80+ GB card the paged states stay on the GPU: the paging term
is 0 there, and the 24 GB card's is not measured). Not measured yet.

The packing entries (issue 26: the packed / padded ratio of real tokens/s, predicted against measured) train LoRA
on the 1B kit model at micro batch 8 over the same long-tailed instruction rows (``dataset_plan.write_rows``, 2,000
rows, the kit's byte-level tokenizer), packed whole and padded: ``--only packed-1b-long,padded-1b-long``; the ratio
of their measured tokens/s against the ratio of their plans'.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataset_plan import write_rows

KIT = Path(__file__).resolve().parent / "gpu_kit"
AUTOTUNE = [sys.executable, "-c", "import sys; from autotune.cli.app import main; sys.argv[0] = 'autotune'; main()"]
"""The project's CLI in this interpreter (works from a source checkout on PYTHONPATH as well as installed)."""

SEQ_LEN = 2048
"""Sequence length of every entry: the issue's measurements (Llama-3-8B shape, seq 2048)."""

DATA_ROWS, DATA_CHARS = 400, 2000
"""Random-word text: 400 lines of ~2,000 bytes = ~800 k tokens (byte-level), enough for the planner's choice."""


@dataclass(frozen=True)
class Entry:
    """One setting: plan flags, launch ``--set`` overrides and, when ``baseline``, a plain-script twin."""

    name: str
    plan: tuple[str, ...]
    sets: tuple[str, ...] = ()
    steps: int = 5
    timeout_s: float = 200.0
    baseline: tuple[str, int, int, bool] | None = None
    """(method, micro batch, grad accumulation, checkpointing) of the plain transformers + peft run."""
    needs: tuple[str, ...] = field(default=())
    """Import names the entry needs (skipped, with the reason, where one is missing)."""
    model: str | None = None
    """The kit model (``gpu_kit/configs/MODEL.json``, also a catalog key) this entry trains; None = ``--model``."""

    @property
    def data(self) -> str:
        """The dataset the entry trains on: ``long-tailed`` or ``random``.

        ``long-tailed`` when the plan flags name :data:`LONG_TAILED` (the instruction rows of
        ``dataset_plan.write_rows``, ``LONG_TAILED_ROWS``), else ``random`` (the text of :func:`write_data`).
        """
        return "long-tailed" if LONG_TAILED in self.plan else "random"


def _setting_plan(method: str, mbs: int, global_batch: int, ckpt: bool, sharding: str | None = None) -> tuple[str, ...]:
    """Plan flags fixing the method, batch shape and checkpointing (and the sharding, when given)."""
    return (
        *(("--sharding", sharding) if sharding else ()),
        "--seq-len",
        str(SEQ_LEN),
        "--global-batch-size",
        str(global_batch),
        "--method",
        method,
        "--micro-batch-size",
        str(mbs),
        "--grad-ckpt" if ckpt else "--no-grad-ckpt",
        "--optimizer",
        "adamw",
        "--no-compile",
    )


OFFLOAD_FULL_MODEL = "llama3.2-1b"
"""The model of the full fine-tuning offload entries: 1.2 B parameters, whose AdamW states fit a one-GPU host."""

LONG_TAILED = "{long-tailed}"
"""Placeholder in an entry's plan flags for the long-tailed dataset's path (written at the start of a run)."""
LONG_TAILED_ROWS = 2000
"""Rows of the long-tailed instruction dataset (``dataset_plan.write_rows``, seed 0): the packing entries' data."""
PACKING_ENTRIES = ("packed-1b-long", "padded-1b-long")
"""Issue 26's packed vs padded ratio measured on a GPU: the same long-tailed data, LoRA on the 1B kit model at micro
batch 8 (compute-bound on an H100), packed whole and padded; the ratio of their real tokens/s against the plans'."""

OFFLOAD_ENTRIES = ("full-1b-fsdp-offload", "full-1b-zero3-offload", "lora-8b-fsdp-offload")
"""The entries that check the CPU offload time terms on one GPU (issue 27 item 4)."""

FAST = ("adapter_dtype=compute", "lora_dropout=0")
"""The LoRA fast path of issue 21 (adapters in the compute dtype, no dropout op), stated so that the sweep measures
it whatever the schema's defaults are."""

TORCHTUNE_FULL_8B = (
    *_setting_plan("full", 2, 2, True)[:-3],
    *("--optimizer", "paged-adamw-8bit", "--optimizer-in-backward", "--loss-impl", "chunked", "--no-compile"),
)
"""torchtune's single-device full fine-tune of the 8B model as plan flags (``recipes/configs/llama3_1/
8B_full_single_device.yaml``: batch 2, no accumulation, pure bf16, PagedAdamW8bit in the backward, chunked loss,
checkpointing), compile off to measure the levers alone."""

SETTINGS: tuple[Entry, ...] = (
    Entry("lora-m2-noc", _setting_plan("lora", 2, 8, False), FAST, baseline=("lora", 2, 4, False)),
    Entry("qlora-m2-noc", _setting_plan("qlora", 2, 8, False), FAST, baseline=("qlora", 2, 4, False)),
    Entry("lora-m2-noc-liger", _setting_plan("lora", 2, 8, False), (*FAST, "kernels=liger"), needs=("liger_kernel",)),
    Entry("lora-m1-ck", _setting_plan("lora", 1, 8, True), FAST, baseline=("lora", 1, 8, True)),
    Entry("qlora-m1-ck", _setting_plan("qlora", 1, 8, True), FAST),
    # FSDP CPU offload on one GPU: one micro-step per optimizer step (planner/space.offload_accumulation_error)
    Entry("full-1b-fsdp-offload", _setting_plan("full", 2, 2, True, "fsdp-offload"), steps=4, model=OFFLOAD_FULL_MODEL),
    Entry(
        "full-1b-zero3-offload",
        _setting_plan("full", 2, 8, True, "zero3-offload"),
        steps=4,
        needs=("deepspeed",),
        model=OFFLOAD_FULL_MODEL,
    ),
    Entry("lora-8b-fsdp-offload", _setting_plan("lora", 1, 1, False, "fsdp-offload"), FAST, steps=6, model="llama3-8b"),
    *(
        Entry(
            f"{layout}-1b-long",
            (*_setting_plan("lora", 8, 8, False), "--dataset", LONG_TAILED, "--packing", layout),
            FAST,
            steps=8,
            model=OFFLOAD_FULL_MODEL,
        )
        for layout in ("packed", "padded")
    ),
    Entry("planner-default", ("--seq-len", str(SEQ_LEN)), steps=3, timeout_s=330),
    # issue 44's levers, after the entries already queued: torchtune's 8B full single-device shape (batch 2, no
    # accumulation) with pure bf16, paged 8-bit AdamW stepped inside the backward and the chunked loss
    Entry(
        "levers-full-8b",
        TORCHTUNE_FULL_8B,
        steps=6,
        timeout_s=300,
        model="llama3-8b",
    ),
    Entry(
        "levers-fp8-lora-8b",
        (*_setting_plan("lora", 2, 8, False), "--fp8"),
        FAST,
        steps=6,
        timeout_s=300,
        needs=("torchao",),
        model="llama3-8b",
    ),
    Entry(
        "levers-fp8-full-8b",
        (*TORCHTUNE_FULL_8B, "--fp8"),
        steps=6,
        timeout_s=300,
        needs=("torchao",),
        model="llama3-8b",
    ),
    Entry(
        "levers-rounding-full-8b",
        (
            *_setting_plan("full", 2, 2, True)[:-3],
            "--optimizer",
            "adamw",
            "--optimizer-in-backward",
            "--bf16-stochastic-rounding",
            "--loss-impl",
            "chunked",
            "--no-compile",
        ),
        steps=6,
        timeout_s=300,
        needs=("torchao",),
        model="llama3-8b",
    ),
    Entry(
        "levers-offload-lora-1b",
        (*_setting_plan("lora", 2, 8, False), "--activation-offloading"),
        FAST,
        model=OFFLOAD_FULL_MODEL,
    ),
)
"""The fixed list, in the order it runs (see the module docstring). The lever entries of issue 44 follow the ones
already queued: ``levers-full-8b`` (torchtune's single-device shape), FP8 linears for LoRA and full fine-tuning
(torchao float8 through accelerate), bf16 stochastic rounding (torchao's AdamW) and activation offloading: each
measured against its plan; all not measured yet."""


def write_data(path: Path, rows: int = DATA_ROWS, chars: int = DATA_CHARS, seed: int = 0) -> Path:
    """Random lower-case words as a ``{"text": ...}`` JSONL dataset of ``rows`` lines of about ``chars`` bytes."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(rows):
            line: list[str] = []
            size = 0
            while size < chars:
                word = rng.choice(words)
                line.append(word)
                size += len(word) + 1
            handle.write(json.dumps({"text": " ".join(line)}) + "\n")
    return path


def plan_argv(entry: Entry, model_dir: str, gpu: str, plan_path: str, long_tailed: str = LONG_TAILED) -> list[str]:
    """``autotune plan`` for ``entry``; ``long_tailed``: the long-tailed dataset's path (:data:`LONG_TAILED`)."""
    return [*AUTOTUNE, "plan", model_dir, "--gpu", gpu, *plan_flags(entry, long_tailed), "-o", plan_path, "--json"]


def plan_flags(entry: Entry, long_tailed: str) -> list[str]:
    """``entry.plan`` with the long-tailed dataset's path in place of :data:`LONG_TAILED`.

    An entry that plans a dataset also names the kit's byte-level tokenizer (the kit model's own, so that a catalog
    profile plans the same tokens). An entry that does not name its precision or FP8 plans pure bf16 without FP8 (the
    settings the entries were written to measure; the planner now also offers bf16-mixed for full fine-tuning and FP8
    on Hopper, which entries ask for by name).
    """
    flags = [long_tailed if flag == LONG_TAILED else flag for flag in entry.plan]
    if "--precision" not in flags:
        flags += ["--precision", "bf16"]
    if "--fp8" not in flags and "--no-fp8" not in flags:
        flags += ["--no-fp8"]
    return [*flags, "--tokenizer", str(KIT / "tok")] if "--dataset" in flags else flags


def entry_dataset(entry: Entry, random_words: str, long_tailed: str) -> str:
    """The dataset ``entry`` trains on: the random-word text or the long-tailed instruction rows."""
    return long_tailed if entry.data == "long-tailed" else random_words


def launch_argv(
    entry: Entry, plan_path: str, dataset: str, run_dir: str, profile_steps: int | None = None
) -> list[str]:
    """``autotune launch`` for ``entry`` (no checkpoint saved before the end, the loss logged every step).

    ``profile_steps``: the core records that many steps after the first with torch.profiler (``--profile-steps``:
    ``RUN/profile/``); they are left out of the report's timings, so the run is that many steps longer.
    """
    sets = [part for value in entry.sets for part in ("--set", value)]
    profile = ["--profile-steps", str(profile_steps)] if profile_steps is not None else []
    return [
        *AUTOTUNE,
        "launch",
        plan_path,
        "--dataset",
        dataset,
        "--output-dir",
        run_dir,
        "--max-steps",
        str(entry.steps + (profile_steps or 0)),
        "--save-steps",
        "100000",
        "--logging-steps",
        "1",
        *sets,
        *profile,
    ]


def baseline_argv(entry: Entry, model_dir: str, dataset: str) -> list[str]:
    """``gpu_kit/plain_hf.py`` for ``entry``'s baseline (``entry.baseline`` must be set)."""
    assert entry.baseline is not None
    method, mbs, ga, ckpt = entry.baseline
    return [
        sys.executable,
        str(KIT / "plain_hf.py"),
        model_dir,
        dataset,
        str(SEQ_LEN),
        str(mbs),
        str(ga),
        str(entry.steps),
        method,
        "1" if ckpt else "0",
    ]


def missing(entry: Entry) -> list[str]:
    """The packages ``entry`` needs that are not installed (found, not imported)."""
    return [name for name in entry.needs if importlib.util.find_spec(name) is None]


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """Measured vs predicted of one run report (``run_report.json`` as a dict).

    Returns peak allocated GiB and tokens/s, measured and predicted, their signed relative errors
    (measured / predicted − 1) and MFU: predicted MFU × measured / predicted tokens/s (autotune's MFU is model
    FLOPs per token × tokens/s / the GPU's dense peak, so it scales with tokens/s at fixed setting). A value that
    the report lacks is None.
    """
    prediction = report.get("prediction") or {}
    memory, memory_pred = report.get("peak_memory_gib_measured"), prediction.get("peak_memory_gib")
    tps, tps_pred = report.get("tokens_per_s_measured"), prediction.get("tokens_per_s")
    mfu_pred = prediction.get("mfu")

    def error(measured: float | None, predicted: float | None) -> float | None:
        return None if measured is None or not predicted else measured / predicted - 1.0

    return {
        "status": report.get("status"),
        "memory_gib": memory,
        "memory_gib_pred": memory_pred,
        "memory_error": error(memory, memory_pred),
        "tokens_per_s": tps,
        "tokens_per_s_pred": tps_pred,
        "tokens_per_s_error": error(tps, tps_pred),
        "mfu": None if tps is None or not tps_pred or mfu_pred is None else mfu_pred * tps / tps_pred,
        "mfu_pred": mfu_pred,
    }


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the rows (runs, baselines and skipped entries)."""
    lines = [
        "| run | status | peak alloc GiB meas (pred, err) | tokens/s meas (pred, err) | MFU meas (pred) |",
        "|---|---|---:|---:|---:|",
    ]
    for row in rows:
        s = row.get("summary") or {}
        lines.append(
            f"| {row['name']} | {row.get('status', '-')} "
            f"| {_number(s.get('memory_gib'), '.2f')} ({_number(s.get('memory_gib_pred'), '.2f')}, "
            f"{_number(s.get('memory_error'), '+.1%')}) "
            f"| {_number(s.get('tokens_per_s'), ',.0f')} ({_number(s.get('tokens_per_s_pred'), ',.0f')}, "
            f"{_number(s.get('tokens_per_s_error'), '+.1%')}) "
            f"| {_number(s.get('mfu'), '.1%')} ({_number(s.get('mfu_pred'), '.1%')}) |"
        )
    return "\n".join(lines)


def _run(argv: list[str], timeout_s: float) -> tuple[int, str, str, float]:
    start_s = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start_s
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        err = expired.stderr.decode() if isinstance(expired.stderr, bytes) else (expired.stderr or "")
        return 124, out, err, time.perf_counter() - start_s


HOST_LINK_PROBE = """
import json, sys, torch
if not torch.cuda.is_available():
    print(json.dumps({"status": "skipped: no CUDA device"})); sys.exit(0)
size = 1 << 30
device = torch.empty(size, dtype=torch.uint8, device="cuda")
result = {"status": "completed", "bytes": size}
for kind, host in (("pinned", torch.empty(size, dtype=torch.uint8).pin_memory()),
                   ("pageable", torch.empty(size, dtype=torch.uint8))):
    for direction, copy in (("h2d", lambda: device.copy_(host, non_blocking=True)),
                            ("d2h", lambda: host.copy_(device, non_blocking=True))):
        copy(); torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            copy()
        end.record(); torch.cuda.synchronize()
        result[f"{direction}_{kind}_gb_per_s"] = 5 * size / (start.elapsed_time(end) / 1e3) / 1e9
print(json.dumps(result))
"""
"""Time 1 GiB host↔device copies, pinned and pageable (CUDA events, 5 copies after one warm-up): the host link the
offload entries stream over, measured on the same machine so that their error can be split into bandwidth and
overlap (docs/cost-model.md §7.7)."""


def probe_host_link(timeout_s: float = 60.0) -> dict[str, Any]:
    """The host-link row of the results: GB/s per direction and host memory kind, or why it was skipped."""
    code, out, err, wall_s = _run([sys.executable, "-c", HOST_LINK_PROBE], timeout_s)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    row: dict[str, Any] = {"name": "host-link probe", "wall_s": wall_s}
    if code == 0 and lines:
        row.update(json.loads(lines[-1]))
    else:
        row["status"] = f"failed (exit {code})"
        row["error"] = err[-2000:]
    return row


def find_gpu(requested: str | None) -> str:
    """The catalog key of ``--gpu`` or of the first GPU this machine shows.

    Raises:
        SystemExit: no GPU found and none named (one line, exit code 2).
    """
    from autotune.launcher.gpus import detect_gpus
    from autotune.profiles.catalog import resolve_gpu

    name = requested or next(iter(detect_gpus()), None)
    if name is None:
        raise SystemExit("error: no GPU found (nvidia-smi / rocm-smi): run on a GPU machine, or --dry-run")
    return resolve_gpu(name)[0].key


def selected(only: str | None) -> tuple[Entry, ...]:
    """The entries ``--only`` names (comma-separated, in the order named: a short lease runs the first first), or all.

    Raises:
        SystemExit: a name that is no entry (one line, exit code 2).
    """
    if not only:
        return SETTINGS
    names = list(dict.fromkeys(name.strip() for name in only.split(",") if name.strip()))
    by_name = {entry.name: entry for entry in SETTINGS}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise SystemExit(
            f"error: --only: no entry {', '.join(unknown)} (entries: {', '.join(e.name for e in SETTINGS)})"
        )
    return tuple(by_name[name] for name in names)


def predict(entry: Entry, model: str, gpu: str, long_tailed: str = LONG_TAILED) -> str:
    """One line: ``entry``'s prediction on ``gpu`` for the catalog profile ``model`` (``autotune plan --json``).

    tokens/s, peak allocated GiB, MFU and, under CPU offload, the PCIe streaming terms in seconds per step; or why
    the plan failed (its last line of output).
    """
    argv = [*AUTOTUNE, "plan", model, "--gpu", gpu, *plan_flags(entry, long_tailed), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return f"no prediction ({lines[-1] if lines else f'exit {proc.returncode}'})"
    plan = json.loads(proc.stdout)["plan"]
    terms = plan["time_breakdown_s"]
    streaming = [f"{name} {terms[name]:.2f} s" for name in terms if name.startswith("pcie") and terms[name] > 0]
    setting = plan["setting"]
    return (
        f"predicted on {gpu} ({model}, {setting['method']}, {setting['sharding']}): {plan['tokens_per_s']:,.0f} "
        f"tokens/s, peak {plan['peak_memory_gib']:.1f} GiB, MFU {plan['mfu']:.1%}"
        + (f"; per step: {', '.join(streaming)}" if streaming else "")
    )


def dry_run(args: argparse.Namespace) -> int:
    """Print every command the sweep would run, with placeholders for the machine's paths, and each prediction."""
    gpu = args.gpu or "h100"
    entries = selected(args.only)
    dataset, long_tailed = f"{args.work}/data.jsonl", f"{args.work}/long-tailed.jsonl"
    print(f"gpu_sweep (dry run): {len(entries)} settings on {gpu} (the GPU found when run), model {args.model}")
    models = sorted({entry.model or args.model for entry in entries})
    setup = [f"python {KIT / 'make_model.py'} {KIT / 'configs' / f'{m}.json'} {args.work}/models/{m}" for m in models]
    long_rows = f"{long_tailed} ({LONG_TAILED_ROWS} rows); " if any(e.data == "long-tailed" for e in entries) else ""
    print(f"set-up: write {dataset}; {long_rows}" + "; ".join(setup))
    with tempfile.TemporaryDirectory() as scratch:  # the predictions plan the long-tailed rows, where an entry has them
        written = write_rows(Path(scratch) / "long-tailed.jsonl", LONG_TAILED_ROWS) if long_rows else None
        predicted_data = str(written) if written is not None else LONG_TAILED
        predictions = {entry.name: predict(entry, entry.model or args.model, gpu, predicted_data) for entry in entries}
    for entry in entries:
        model = entry.model or args.model
        model_dir = f"{args.work}/models/{model}"
        plan_path = f"{args.work}/{entry.name}.yaml"
        need = f" (needs {', '.join(entry.needs)}; skipped where missing)" if entry.needs else ""
        print(f"\n[{entry.name}] {model}, {entry.steps} steps, timeout {entry.timeout_s:.0f} s{need}")
        print("  " + predictions[entry.name])
        planned = plan_argv(entry, model_dir, gpu, plan_path, long_tailed)
        print("  " + shlex.join(["autotune", *planned[len(AUTOTUNE) :]]))
        run_dir = f"{args.results}/{entry.name}"
        data = entry_dataset(entry, dataset, long_tailed)
        launched = launch_argv(entry, plan_path, data, run_dir, args.profile_steps)
        print("  " + shlex.join(["autotune", *launched[len(AUTOTUNE) :]]))
        if entry.baseline is not None:
            print("  baseline: " + shlex.join(["python", *baseline_argv(entry, model_dir, dataset)[1:]]))
    print(f"\nbudget {args.budget_s:.0f} s from the start, set-up included; results in {args.results}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run (or list) the sweep, print the table; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="List what would run; import no torch, need no GPU.")
    parser.add_argument("--results", default="benchmarks/results/gpu-sweep", help="Folder of the run directories.")
    parser.add_argument("--work", default="/tmp/autotune-gpu-sweep", help="Model, data and plans (not kept).")
    parser.add_argument("--gpu", default=None, help="GPU catalog key (default: the GPU this machine shows).")
    parser.add_argument(
        "--model", default="llama3-8b", choices=sorted(p.stem for p in (KIT / "configs").glob("*.json"))
    )
    parser.add_argument("--budget-s", type=float, default=540.0, help="Stop starting runs past this (seconds).")
    parser.add_argument("--only", default=None, help="Comma-separated entry names (default: every entry).")
    parser.add_argument(
        "--no-baselines",
        dest="baselines",
        action="store_false",
        help="Skip the plain transformers + peft twins (a short lease measured them before).",
    )
    parser.add_argument(
        "--profile-steps",
        type=int,
        default=None,
        help="Each run records this many steps after the first with torch.profiler (RUN/profile/) and runs that "
        "many steps more (the profiled ones are left out of its timings).",
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    start_s = time.perf_counter()
    entries = selected(args.only)
    gpu = find_gpu(args.gpu)
    work, results = Path(args.work), Path(args.results)
    if results.exists() and any(results.iterdir()):
        raise SystemExit(f"error: {results} is not empty; choose another --results folder")
    work.mkdir(parents=True, exist_ok=True)
    results.mkdir(parents=True, exist_ok=True)
    dataset = str(write_data(work / "data.jsonl"))
    long_tailed = str(write_rows(work / "long-tailed.jsonl", LONG_TAILED_ROWS))
    link = probe_host_link()
    print(f"host link: {json.dumps({k: v for k, v in link.items() if k != 'error'})}", flush=True)
    with (results / "results.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(link) + "\n")
    rows: list[dict[str, Any]] = []
    for entry in entries:
        absent = missing(entry)
        if absent:
            rows.append({"name": entry.name, "status": f"skipped: {', '.join(absent)} not installed"})
            continue
        model_dir = _make_model(entry.model or args.model, work, args.budget_s - (time.perf_counter() - start_s))
        if model_dir is None:
            return 1
        for kind in ("autotune", "baseline") if entry.baseline is not None and args.baselines else ("autotune",):
            left_s = args.budget_s - (time.perf_counter() - start_s)
            if left_s < min(entry.timeout_s, 60.0) + 10.0:
                rows.append({"name": _row_name(entry, kind), "status": f"skipped: {left_s:.0f} s left of the budget"})
                continue
            timeout_s = min(entry.timeout_s, left_s - 10.0)
            row = (
                _run_autotune(
                    entry, gpu, str(model_dir), (dataset, long_tailed), work, results, timeout_s, args.profile_steps
                )
                if kind == "autotune"
                else (_run_baseline(entry, str(model_dir), dataset, timeout_s))
            )
            rows.append(row)
            print(f"{row['name']}: {row.get('status')} ({row.get('wall_s', 0):.0f} s)", flush=True)
            with (results / "results.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
    text = table(rows)
    (results / "table.md").write_text(text + "\n", encoding="utf-8")
    print(f"\n{gpu}, {args.model}, seq {SEQ_LEN}; {time.perf_counter() - start_s:.0f} s in all\n{text}")
    return 0


def _make_model(model: str, work: Path, timeout_s: float) -> Path | None:
    """The kit model's directory under ``work``, written by ``make_model.py`` when absent; None when that failed."""
    model_dir = work / "models" / model
    if (model_dir / "config.json").is_file():
        return model_dir
    code, out, err, _ = _run(
        [sys.executable, str(KIT / "make_model.py"), str(KIT / "configs" / f"{model}.json"), str(model_dir)],
        timeout_s,
    )
    print((out or err).strip().splitlines()[-1] if (out or err).strip() else f"make_model exit {code}", flush=True)
    if code != 0:
        print(err[-3000:], file=sys.stderr)
        return None
    return model_dir


def _row_name(entry: Entry, kind: str) -> str:
    return entry.name if kind == "autotune" else f"{entry.name} (plain transformers + peft)"


def _run_autotune(
    entry: Entry,
    gpu: str,
    model_dir: str,
    datasets: tuple[str, str],
    work: Path,
    results: Path,
    timeout_s: float,
    profile_steps: int | None,
) -> dict[str, Any]:
    plan_path = str(work / f"{entry.name}.yaml")
    Path(plan_path).unlink(missing_ok=True)
    random_words, long_tailed = datasets
    code, out, err, plan_s = _run(plan_argv(entry, model_dir, gpu, plan_path, long_tailed), 120)
    if code != 0:
        return {"name": entry.name, "status": f"plan failed ({code})", "error": (err or out)[-2000:]}
    run_dir = results / entry.name
    dataset = entry_dataset(entry, random_words, long_tailed)
    launched = launch_argv(entry, plan_path, dataset, str(run_dir), profile_steps)
    code, out, err, wall_s = _run(launched, timeout_s - plan_s)
    for bulky in ("final", "checkpoints"):  # weights are not measurements: keep the report and the plan
        shutil.rmtree(run_dir / bulky, ignore_errors=True)
    report_path = run_dir / "run_report.json"
    row: dict[str, Any] = {"name": entry.name, "launch_rc": code, "wall_s": wall_s, "run_dir": str(run_dir)}
    if report_path.is_file():
        report = json.loads(report_path.read_text())
        row["summary"] = summarize(report)
        row["status"] = report.get("status")
    else:
        row["status"] = f"no report (exit {code})"
    if code != 0:
        row["error"] = (err or out)[-3000:]
    return row


def _run_baseline(entry: Entry, model_dir: str, dataset: str, timeout_s: float) -> dict[str, Any]:
    code, out, err, wall_s = _run(baseline_argv(entry, model_dir, dataset), timeout_s)
    row: dict[str, Any] = {"name": _row_name(entry, "baseline"), "launch_rc": code, "wall_s": wall_s}
    lines = [line for line in out.splitlines() if line.startswith('{"baseline"')]
    if lines:
        result = json.loads(lines[-1])
        row["baseline"] = result
        row["summary"] = {"memory_gib": result.get("peak_allocated_gib"), "tokens_per_s": result.get("tokens_per_s")}
        row["status"] = "completed"
    else:
        row["status"] = f"failed (exit {code})"
        row["error"] = err[-3000:]
    return row


if __name__ == "__main__":
    sys.exit(main())
