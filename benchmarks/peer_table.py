"""autotune beside the best public fine-tuning figures: the peer's memory and tokens/s, ours for the same setting.

For each row of torchtune's README table ("Memory and training speed": Llama 3.1 on 1× RTX 4090, 1× RTX A6000 and
8× A100) and NeMo AutoModel's H100 LoRA row (docs/performance-summary.mdx, "Fine-Tuning (LoRA) Performance"), it
prints:

* the peer's figures, its settings and the figure's source (the addresses below; read with the search tool, not
  re-typed from memory);
* ``same``: autotune's estimate of the peer's own setting, as close as the core can run it (``autotune estimate``
  with the flags shown);
* ``plan``: what ``autotune plan`` chooses for the same model, card(s), sequence length and global batch;
* the gap: the peer's tokens/s over ours for the same setting, the model-FLOPs utilisation the peer's figure implies
  at our FLOPs per token (our estimate's MFU × peer / ours), and the terms of our step that differ.

    python benchmarks/peer_table.py

Sources (commit / date as read):
  torchtune README.md, "Memory and training speed" (pytorch/torchtune, introduced by 30b8519e "Readme Updates
  (#1664)", 2024-09-24; unchanged at bd2a0fc7, 2026-04-23): "all the below numbers are provided for batch size 2
  (without gradient accumulation), a dataset packed to sequence length 2048, and torch compile enabled", "Measured
  over one full training epoch"; the recipes log ``tokens_per_second_per_gpu`` = ``batch["tokens"].numel()`` / step
  wall time (``recipes/lora_finetune_single_device.py``) and peak memory from ``torchtune/training/memory.py``
  ``get_memory_stats`` (active, allocated and reserved: the README does not say which it shows).
  The configs at 30b8519e: ``recipes/configs/llama3_1/8B_full_single_device.yaml`` (bnb PagedAdamW8bit,
  optimizer_in_bwd, CEWithChunkedOutputLoss, activation checkpointing, bf16), ``8B_lora_single_device.yaml`` (LoRA r8
  alpha 16 on q_proj, v_proj; torch AdamW; chunked CE), ``8B_qlora_single_device.yaml`` (r8 on q, k, v, output_proj
  and the MLP), ``70B_full.yaml`` (FSDP, fsdp_cpu_offload, fused AdamW), ``70B_lora.yaml`` (r16 on q, k, v).
  NeMo AutoModel ``docs/performance-summary.mdx`` (NVIDIA-NeMo/Automodel at 36044ad3, "Last Updated: 2025-10-02"):
  Llama3 8B, 1 GPU (DGX-H100, BF16), GBS 32, MBS 2, GA 16, seq 4096, "TE + triton", 12,472.87 tokens/s/GPU, 402 model
  TFLOPs/s/GPU; recipe ``examples/llm_benchmark/llama3_1/llama3_1_8b_peft_benchmark.yaml`` (Llama-3.1-8B, LoRA dim 16
  alpha 32 on ``*_proj``, dropout 0.1, torch AdamW, mock data); no memory figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from autotune.costmodel.calibration import default_coefficients
from autotune.errors import AutotuneError
from autotune.planner import search
from autotune.planner.search import choose, evaluate_candidates
from autotune.profiles.catalog import resolve_gpu
from autotune.schemas.estimate import Estimate
from autotune.schemas.setting import TrainingSetting
from autotune.session.planning import PlanOptions, request_from_options
from autotune.session.setting_options import SettingOptions

TORCHTUNE = "pytorch/torchtune README.md 'Memory and training speed' (30b8519e, 2024-09-24)"
NEMO = "NVIDIA-NeMo/Automodel docs/performance-summary.mdx 'Fine-Tuning (LoRA) Performance' (36044ad3)"
TORCHTUNE_COUNTS = (
    "counts every token of packed 2048-token batches per GPU over one epoch's wall time (optimizer, data loading and "
    "logging included), torch.compile on; memory is one of active / allocated / reserved (not stated)"
)
STEP_TERMS_SHOWN = 3


@dataclass(frozen=True)
class PeerRow:
    """One public figure and the setting it ran, as our setting options (``SettingOptions`` names)."""

    label: str
    model: str
    gpu: str
    num_gpus: int
    seq_len: int
    global_batch_size: int
    memory_gib: float | None
    tokens_per_s_per_gpu: float
    source: str
    runs: str
    setting: dict[str, Any] = field(default_factory=dict)
    peer_total: bool = False
    """The peer's tokens/s is read as the sum over its GPUs (``tokens_per_s_per_gpu`` then holds that sum): torchtune's
    8× A100 rows would need several times the A100's dense peak per GPU (checked by the printed implied MFU)."""
    default_batch_plan: bool = False
    """Also print ``autotune plan MODEL --gpu GPU --seq-len S`` without ``--global-batch-size`` (the README's and the
    issue's literal commands): the default 32, or the smaller one the planner chooses where nothing fits at 32."""


TORCHTUNE_8B = {"micro_batch_size": 2, "grad_ckpt": True, "compile": True, "loss_impl": "chunked", "sharding": "none"}
TORCHTUNE_8B_FULL = {
    **TORCHTUNE_8B, "method": "full", "optimizer": "paged-adamw-8bit", "optimizer_in_backward": True,
}  # fmt: skip
TORCHTUNE_8B_LORA = {
    **TORCHTUNE_8B, "method": "lora", "lora_rank": 8, "lora_alpha": 16.0, "lora_targets": "q_proj,v_proj",
    "optimizer": "adamw",
}  # fmt: skip
PEERS: tuple[PeerRow, ...] = (
    PeerRow("torchtune 8B full, 1× 4090", "llama3.1-8b", "rtx-4090", 1, 2048, 2, 18.9, 1650, TORCHTUNE,
            "pure bf16, PagedAdamW8bit in the backward, chunked CE, checkpointing", TORCHTUNE_8B_FULL,
            default_batch_plan=True),
    PeerRow("torchtune 8B full, 1× A6000", "llama3.1-8b", "rtx-a6000", 1, 2048, 2, 37.4, 2579, TORCHTUNE,
            "the same recipe as the 4090 row", TORCHTUNE_8B_FULL),
    PeerRow("torchtune 8B LoRA, 1× 4090", "llama3.1-8b", "rtx-4090", 1, 2048, 2, 16.2, 3083, TORCHTUNE,
            "LoRA r8 on q_proj, v_proj (bf16 adapters), torch AdamW, chunked CE, checkpointing", TORCHTUNE_8B_LORA,
            default_batch_plan=True),
    PeerRow("torchtune 8B LoRA, 1× A6000", "llama3.1-8b", "rtx-a6000", 1, 2048, 2, 30.3, 4699, TORCHTUNE,
            "the same recipe as the 4090 row", TORCHTUNE_8B_LORA),
    PeerRow("torchtune 8B QLoRA, 1× 4090", "llama3.1-8b", "rtx-4090", 1, 2048, 2, 7.4, 2413, TORCHTUNE,
            "QLoRA r8 on q, k, v, output_proj and the MLP, fused AdamW, chunked CE, checkpointing",
            {**TORCHTUNE_8B, "method": "qlora", "lora_rank": 8, "lora_alpha": 16.0,
             "lora_targets": "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"}),
    PeerRow("torchtune 70B full, 8× A100", "llama3.1-70b", "a100-80gb", 8, 2048, 16, 13.9, 1568, TORCHTUNE,
            "FSDP with CPU offload and the fused optimizer, checkpointing (A100 80 GB assumed: not stated)",
            {"method": "full", "micro_batch_size": 2, "grad_ckpt": True, "compile": True,
             "sharding": "fsdp-offload"}, peer_total=True),
    PeerRow("torchtune 70B LoRA, 8× A100", "llama3.1-70b", "a100-80gb", 8, 2048, 16, 27.6, 3497, TORCHTUNE,
            "FSDP, LoRA r16 on q, k, v, checkpointing (A100 80 GB assumed)",
            {"method": "lora", "micro_batch_size": 2, "grad_ckpt": True, "compile": True, "sharding": "fsdp",
             "lora_targets": "q_proj,k_proj,v_proj"}, peer_total=True),
    PeerRow("NeMo AutoModel 8B LoRA, 1× H100", "llama3.1-8b", "h100-80gb", 1, 4096, 32, None, 12472.87, NEMO,
            "LoRA r16 alpha 32 on every *_proj, dropout 0.1, torch AdamW, Transformer Engine + triton LoRA kernels, "
            "no checkpointing (the recipe sets none), mock data, 5 warm-up steps excluded",
            {"method": "lora", "micro_batch_size": 2, "grad_ckpt": False, "lora_dropout": 0.1, "sharding": "none"}),
)  # fmt: skip
"""The peers' rows (the 405B QLoRA row of torchtune's table is left out: the 8× A100 plan of a 405B QLoRA model
needs parameter-sharded QLoRA, which the core does not run)."""


UNSTATED_LEVERS_OFF: dict[str, Any] = {"activation_offloading": False, "bf16_stochastic_rounding": False, "fp8": False}
"""The peer's own setting runs none of the levers its source does not state (the planner would otherwise take
activation offloading where nothing else fits the peer's shape, a setting the peer did not run)."""


def _options(row: PeerRow, setting: dict[str, Any]) -> PlanOptions:
    return PlanOptions(
        model=row.model,
        gpu=row.gpu,
        num_gpus=row.num_gpus,
        seq_len=row.seq_len,
        global_batch_size=row.global_batch_size,
        setting=SettingOptions(**setting),
    )


def same_setting(row: PeerRow) -> tuple[TrainingSetting, Estimate] | str:
    """Our estimate of the peer's own setting (every choice it states forced), fitting or not; or why it cannot run.

    The planner's candidates with the peer's choices forced; the best that fits (``choose``), else the one closest to
    fitting (its estimate is still our prediction of the peer's time and memory).
    """
    try:
        request, _ = request_from_options(_options(row, {**UNSTATED_LEVERS_OFF, **row.setting}))
        scored = evaluate_candidates(request)
    except AutotuneError as error:
        return str(error)
    if not scored:
        return "no candidate setting"
    fitting = [s for s in scored if s.estimate.fits]
    best = choose(fitting, request.objective) if fitting else min(scored, key=lambda s: s.estimate.peak_memory_gib)
    return best.setting, best.estimate


def our_plan(row: PeerRow, stated: bool = True) -> tuple[TrainingSetting, Estimate, int] | str:
    """What ``autotune plan`` chooses for the peer's model, card(s), sequence length and global batch.

    Returned with the global batch it planned; ``stated`` False: without ``--global-batch-size`` (the planner's default
    or the smaller one it chose).
    """
    options = _options(row, {"method": row.setting["method"]})
    if not stated:
        options = replace(options, global_batch_size=None)
    try:
        request, _ = request_from_options(options)
        result = search(request)
    except AutotuneError as error:
        return str(error)
    return result.best.setting, result.best.estimate, result.planned_workload(request).global_batch_size


def _per_gpu(estimate: Estimate, row: PeerRow) -> float:
    """Our tokens/s on the peer's basis: per GPU, or the sum over the GPUs where the peer's figure is one."""
    return estimate.tokens_per_s if row.peer_total else estimate.tokens_per_s / row.num_gpus


def gap_lines(row: PeerRow, estimate: Estimate) -> list[str]:
    """The peer's figure against ours for its setting: ratio, implied utilisation, our largest terms."""
    ours = _per_gpu(estimate, row)
    ratio = row.tokens_per_s_per_gpu / ours
    implied = estimate.mfu * ratio
    terms = sorted(estimate.time_breakdown_s.items(), key=lambda item: -item[1])[:STEP_TERMS_SHOWN]
    needed = estimate.step_time_s / ratio
    lines = [
        f"gap: the peer runs {ratio:.2f}× our prediction for its setting; at our FLOPs per token its figure is "
        f"{implied:.0%} MFU (ours {estimate.mfu:.0%})",
        "our step "
        + f"{estimate.step_time_s:.3f} s (the peer's figure needs {needed:.3f} s): "
        + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in terms),
    ]
    gemm_s = estimate.time_breakdown_s.get("gemm", 0.0)
    if gemm_s > needed:
        gpu, _ = resolve_gpu(row.gpu)
        efficiency = default_coefficients().matmul_efficiency.get(gpu.generation)
        fitted = f"our {gpu.generation} matmul efficiency {efficiency:.2f}" if efficiency is not None else "our prior"
        lines.append(
            f"our gemm term alone ({gemm_s:.3f} s) exceeds the peer's whole step: the same GEMMs in {needed:.3f} s "
            f"need a matmul efficiency above {gemm_s / needed:.2f}× {fitted}"
        )
    if row.memory_gib is not None:
        lines.append(
            f"memory: ours {estimate.peak_memory_gib:.1f} GiB allocated / {estimate.peak_reserved_gib:.1f} reserved vs "
            f"{row.memory_gib:.1f} ({estimate.peak_memory_gib / row.memory_gib - 1:+.0%} allocated)"
        )
    return lines


TERM_GAPS = {
    "pcie optimizer paging": "our term moves the paged 8-bit states that do not fit beside our reserved peak over the "
    "host link once per step; the peer's figure leaves room for less of that traffic (more states resident beside its "
    "lower peak, or bitsandbytes' prefetch overlapping the backward), which the first lent GPU's levers-full-8b run "
    "measures",
    "optimizer step": "e.g. a faster optimizer on the host than our CPU-Adam rate",
}
"""What a term that carries the gap may differ in, for the terms that do (``explanation``)."""


def explanation(row: PeerRow, estimate: Estimate) -> str:
    """What differs between the peer's figure and our prediction of it, where our terms say it (one line)."""
    ratio = row.tokens_per_s_per_gpu / _per_gpu(estimate, row)
    implied = estimate.mfu * ratio
    name, seconds = max(((n, s) for n, s in estimate.time_breakdown_s.items() if n != "gemm"), key=lambda item: item[1])
    gap_s = estimate.step_time_s - estimate.step_time_s / ratio
    if seconds > estimate.step_time_s / ratio:
        return (
            f"our '{name}' term alone ({seconds:.1f} s) exceeds the peer's whole step: the peer does not pay what that "
            f"term prices for this setting in our core ({TERM_GAPS.get(name, 'a cost its run avoids')})"
        )
    if ratio > 1 and seconds >= gap_s / 2:
        return (
            f"our '{name}' term ({seconds:.2f} s) is {seconds / gap_s:.0%} of the gap to the peer's step "
            f"({gap_s:.2f} s): {TERM_GAPS.get(name, 'the peer pays less for it')}"
        )
    if implied > 0.8:
        return (
            "the peer's figure implies more than 80 % of the card's dense bf16 peak at our FLOPs per token (with "
            "checkpointing's recompute): it cannot be the work we count, so it counts or runs less (e.g. "
            "checkpointing off, or not every token computed); our gemm term is the fitted matmul efficiency of the "
            "core (autotune-core-h100), not the peer's"
        )
    if ratio > 1.2:
        return (
            "the peer is faster than our core is predicted to be: our time terms are fitted to the core's own runs "
            "(HF Trainer, no fused kernels); the peer's fused kernels / compile of the whole step are not in them"
        )
    if ratio < 0.8:
        return "our prediction is faster than the peer's measurement: a term the peer pays is missing from ours"
    return "within 20 %: the same work at a similar efficiency"


def _setting_text(
    result: tuple[TrainingSetting, Estimate] | tuple[TrainingSetting, Estimate, int] | str, row: PeerRow
) -> str:
    if isinstance(result, str):
        return f"cannot run: {result}"
    setting, estimate = result[0], result[1]
    batch = f"global batch {result[2]}, " if len(result) == 3 else ""
    fits = "" if estimate.fits else " (predicted not to fit)"
    return (
        f"{batch}{setting.short()}: {estimate.peak_memory_gib:.1f} GiB{fits}, {_per_gpu(estimate, row):,.0f} tokens/s "
        f"{'over the GPUs' if row.peer_total else 'per GPU'}, MFU {estimate.mfu:.0%}"
    )


def main() -> None:
    """Print one block per peer row."""
    for row in PEERS:
        memory = f"{row.memory_gib:.1f} GiB" if row.memory_gib is not None else "memory not given"
        basis = f"tokens/s over the {row.num_gpus} GPUs (read as their sum)" if row.peer_total else "tokens/s per GPU"
        print(f"\n{row.label} — seq {row.seq_len}, global batch {row.global_batch_size}")
        print(f"  peer: {memory}, {row.tokens_per_s_per_gpu:,.0f} {basis} — {row.runs}")
        print(f"        source: {row.source}")
        if row.source == TORCHTUNE:
            print(f"        counts: {TORCHTUNE_COUNTS}")
        same = same_setting(row)
        print(f"  same: {_setting_text(same, row)}")
        print(f"  plan: {_setting_text(our_plan(row), row)}")
        if row.default_batch_plan:
            print(
                f"  plan without --global-batch-size (the literal command): {_setting_text(our_plan(row, False), row)}"
            )
        if not isinstance(same, str):
            for line in gap_lines(row, same[1]):
                print(f"        {line}")
            print(f"        why: {explanation(row, same[1])}")


if __name__ == "__main__":
    main()
