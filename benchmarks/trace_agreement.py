"""Analytic memory model vs the traced training step over the agreement matrix; prints the worst cells.

Matrix: one model per catalog family (llama, mistral, qwen2, gemma, gemma2, phi3) × method (full / LoRA /
QLoRA) × activation checkpointing on/off × seq_len (512, 2048, 4096) × micro batch (1, 2) × loss
implementation (fp32-upcast, native, chunked), on one H100 80GB, bf16. Each cell is traced at the real widths
and vocabulary with 2 and 4 decoder layers and extrapolated linearly in depth
(``autotune.trace.agreement``); ``--full-depth`` traces every layer instead (slow).

    python benchmarks/trace_agreement.py            # the whole matrix (tens of minutes on 2 cores)
    python benchmarks/trace_agreement.py --families llama --seq-lens 2048   # a slice
    python benchmarks/trace_agreement.py --families mixtral --methods lora  # the MoE family (opt-in)
    python benchmarks/trace_agreement.py --save traces.jsonl      # also keep each cell's traced peak
    python benchmarks/trace_agreement.py --traces traces.jsonl    # re-compare saved traces (no tracing)
    python benchmarks/trace_agreement.py --lora-pairs   # issue 29's four llama3-8b LoRA cells, full depth (~2 min)
    python benchmarks/trace_agreement.py --levers --gpu 4090   # issue 44's levers, llama3-8b full, extrapolated

Built models are reused across the cells of one family × method × checkpointing (``BuildCache``).
Prints one line per cell, then the worst |analytic − trace| / trace cells and the count above 3 %.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.costmodel.memory import predict_memory
from autotune.profiles.catalog import FAMILY_REPRESENTATIVES, resolve_gpu, resolve_model_profile
from autotune.profiles.hf_config import model_spec_from_config
from autotune.quiet import quiet_third_party
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, default_precision
from autotune.schemas.workload import Workload
from autotune.trace.agreement import Agreement, BuildCache, compare, traced_peak_bytes

FAMILY_MODELS = FAMILY_REPRESENTATIVES
CONFIG_FAMILIES = {"mixtral": Path(__file__).parent.parent / "tests" / "fixtures" / "configs" / "mixtral-8x7b"}
"""Families outside the catalog, read from a config.json (opt-in: ``--families mixtral``); Mixtral-8x7B's LoRA
wraps the fused experts with peft's ParamWrapper (``autotune.costmodel.param_adapters``)."""


def _spec(family: str) -> ModelSpec:
    if family in CONFIG_FAMILIES:
        return model_spec_from_config(CONFIG_FAMILIES[family])
    return resolve_model_profile(FAMILY_MODELS[family])


FAMILY_ATTENTION = {"gemma2": "eager"}
"""transformers builds Gemma 2 only with eager (or flash-attn) attention: its logit soft-capping has no SDPA
path (``Gemma2PreTrainedModel._supports_sdpa`` is False), so ``attn_implementation='sdpa'`` raises."""
TOLERANCE = 0.03


def _setting(cell: dict[str, Any]) -> TrainingSetting:
    return TrainingSetting(
        method=cell["method"],
        micro_batch_size=cell["micro_batch_size"],
        grad_ckpt=cell["grad_ckpt"],
        loss_impl=cell["loss_impl"],
        attention_impl=FAMILY_ATTENTION.get(cell["family"], "sdpa"),
    )


def _agreement(cell: dict[str, Any], cluster: ClusterSpec) -> Agreement:
    """Analytic (prior coefficients) vs the cell's traced peak."""
    spec = _spec(cell["family"])
    setting = _setting(cell)
    seq_len = cell["seq_len"]
    workload = Workload(seq_len=seq_len, global_batch_size=setting.micro_batch_size * cluster.world_size)
    prediction = predict_memory(spec, setting, cluster, workload, CostCoefficients())
    label = f"{spec.key} {setting.short()} seq {seq_len} {setting.loss_impl}"
    return Agreement(
        label, prediction.peak_allocated_bytes, cell["traced_bytes"], prediction.peak_phase, cell["traced_phase"]
    )


LORA_PAIR_CELLS = ((1024, 2, False), (2048, 1, True))
"""(seq_len, micro batch, activation checkpointing) of issue 29's trace / estimate pairs: where the planner picks a
large micro batch without checkpointing, and the checkpointed default."""
LORA_PAIR_ADAPTERS: tuple[dict[str, Any], ...] = ({}, {"adapter_dtype": "fp32", "lora_dropout": 0.05})
"""Today's default adapters (compute dtype, dropout 0) and peft's defaults (fp32 adapters, dropout 0.05)."""


def lora_pairs(cluster: ClusterSpec, model: str = "llama3-8b") -> list[Agreement]:
    """``autotune estimate`` vs ``autotune trace`` (every layer traced) for LoRA at the four cells of issue 29.

    The same figures as ``autotune estimate MODEL --gpu GPU --method lora --seq-len S --micro-batch-size B
    [--no-grad-ckpt] --no-compile [--adapter-dtype fp32 --lora-dropout 0.05]`` and the ``trace`` command with the
    same flags print as peak allocated / predicted CUDA max allocated.
    """
    spec = resolve_model_profile(model)
    results = []
    for adapters in LORA_PAIR_ADAPTERS:
        for seq_len, micro_batch_size, grad_ckpt in LORA_PAIR_CELLS:
            setting = TrainingSetting(
                method="lora",
                micro_batch_size=micro_batch_size,
                grad_ckpt=grad_ckpt,
                compile=False,
                precision=default_precision(cluster.gpu.supports_bf16),
                **adapters,
            )
            agreement = compare(spec, setting, seq_len, cluster, extrapolate=False)
            extra = f", adapters {setting.adapter_dtype}, dropout {setting.lora_dropout:g}"
            results.append(replace(agreement, label=agreement.label + extra))
    return results


LEVER_CELLS: tuple[dict[str, Any], ...] = (
    {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": True, "loss_impl": "chunked"},
    {"optimizer": "adamw", "optimizer_in_backward": True, "loss_impl": "chunked"},
    {"optimizer": "adamw-8bit", "optimizer_in_backward": True, "loss_impl": "fp32-upcast"},
    {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": False, "loss_impl": "chunked"},
    {"optimizer": "adamw", "optimizer_in_backward": False, "loss_impl": "chunked"},
    {"optimizer": "adamw", "bf16_stochastic_rounding": True, "loss_impl": "chunked"},
    {"optimizer": "adamw", "bf16_stochastic_rounding": True, "optimizer_in_backward": True, "loss_impl": "chunked"},
    {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": True, "activation_offloading": True, "grad_ckpt": False},
)
"""Issue 44's levers on full fine-tuning (pure bf16, micro batch 2, checkpointing unless a cell turns it off): the
optimizer in backward with each optimizer, paged states, the chunked loss, bf16 stochastic rounding, activation
offloading (which runs without checkpointing)."""


def lever_pairs(cluster: ClusterSpec, model: str = "llama3-8b", seq_len: int = 2048) -> list[Agreement]:
    """``autotune estimate`` vs ``autotune trace`` (depth-extrapolated) for each of :data:`LEVER_CELLS`."""
    spec = resolve_model_profile(model)
    results = []
    for fields in LEVER_CELLS:
        setting = TrainingSetting(method="full", micro_batch_size=2, compile=False, **{"grad_ckpt": True, **fields})
        results.append(compare(spec, setting, seq_len, cluster))
    return results


def _cells(args: argparse.Namespace) -> list[dict[str, Any]]:
    grid = itertools.product(
        args.families.split(","),
        args.methods.split(","),
        (True, False),
        [int(v) for v in args.seq_lens.split(",")],
        [int(v) for v in args.micro_batches.split(",")],
        args.loss_impls.split(","),
    )
    keys = ("family", "method", "grad_ckpt", "seq_len", "micro_batch_size", "loss_impl")
    return [dict(zip(keys, values, strict=True)) for values in grid]


def _line(agreement: Agreement) -> str:
    return (
        f"{agreement.relative_error:+7.2%}  analytic {agreement.predicted_bytes / 2**30:8.3f} GiB "
        f"({agreement.predicted_phase})  trace {agreement.traced_bytes / 2**30:8.3f} GiB ({agreement.traced_phase})"
        f"  {agreement.label}"
    )


def main() -> None:
    """Run the matrix (or read saved traces) and print the worst cells."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILY_MODELS))
    parser.add_argument("--methods", default="full,lora,qlora")
    parser.add_argument("--seq-lens", default="512,2048,4096")
    parser.add_argument("--micro-batches", default="1,2")
    parser.add_argument("--loss-impls", default="fp32-upcast,native,chunked")
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--full-depth", action="store_true", help="Trace every layer (no depth extrapolation).")
    parser.add_argument("--save", type=Path, help="Append each traced cell to this JSON-lines file.")
    parser.add_argument("--traces", type=Path, help="Compare the cells saved in this file instead of tracing.")
    parser.add_argument("--worst", type=int, default=10)
    parser.add_argument(
        "--lora-pairs", action="store_true", help="Only issue 29's four llama3-8b LoRA estimate / trace pairs."
    )
    parser.add_argument(
        "--levers",
        action="store_true",
        help="Only issue 44's levers on llama3-8b full fine-tuning (--gpu sets the card).",
    )
    args = parser.parse_args()
    quiet_third_party()
    gpu, _ = resolve_gpu(args.gpu)
    cluster = ClusterSpec(gpu=gpu, host_memory_gib_per_node=2 * gpu.memory_gib)
    if args.lora_pairs or args.levers:
        pairs = lora_pairs(cluster) if args.lora_pairs else lever_pairs(cluster)
        for agreement in pairs:
            print(_line(agreement), flush=True)
        over = sum(abs(a.relative_error) > TOLERANCE for a in pairs)
        print(f"{over} of {len(pairs)} pairs beyond ±{TOLERANCE:.0%} (estimate - trace) / trace")
        return
    results: list[Agreement] = []
    started = time.perf_counter()
    if args.traces is not None:
        cells = [json.loads(line) for line in args.traces.read_text().splitlines() if line.strip()]
    else:
        cells = _cells(args)
    cache = BuildCache()
    for cell in cells:
        if "traced_bytes" not in cell:
            spec = _spec(cell["family"])
            cell["traced_bytes"], cell["traced_phase"] = traced_peak_bytes(
                spec, _setting(cell), cell["seq_len"], cluster, not args.full_depth, cache
            )
            if args.save is not None:
                with args.save.open("a") as handle:
                    handle.write(json.dumps(cell) + "\n")
        agreement = _agreement(cell, cluster)
        results.append(agreement)
        print(_line(agreement), flush=True)
    results.sort(key=lambda a: -abs(a.relative_error))
    over = [a for a in results if abs(a.relative_error) > TOLERANCE]
    print(f"\n{len(results)} cells in {time.perf_counter() - started:.0f} s; {len(over)} beyond ±{TOLERANCE:.0%}")
    print(f"worst |analytic - trace| / trace: {abs(results[0].relative_error):.2%}")
    for agreement in results[: args.worst]:
        print(f"  {agreement.relative_error:+7.2%}  {agreement.label}")


if __name__ == "__main__":
    main()
