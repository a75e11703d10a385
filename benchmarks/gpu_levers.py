"""Measure the memory and speed levers of the best stacks on one GPU, and a peer's recipe on the same shape (issue 44).

Three measurements, each in its own process (its own CUDA memory statistics), each printing one JSON line that
starts with ``{"lever"``; ``--all`` runs them in order within a time budget and appends the lines to ``--out``:

``tt-full``
    torchtune 0.6.1's single-device full fine-tuning recipe (``recipes/full_finetune_single_device.py`` with
    ``recipes/configs/llama3_1/8B_full_single_device.yaml``) rebuilt from its own components on random weights: the
    Llama-3.1 model builder (``torchtune.models.llama3_1._component_builders.llama3_1``) in pure bf16 on the device,
    ``training.set_activation_checkpointing`` on every ``TransformerSelfAttentionLayer``, bitsandbytes
    ``PagedAdamW8bit`` (lr 2e-5) stepped inside the backward (``training.register_optim_in_bwd_hooks``,
    ``optimizer_in_bwd: True``, gradient accumulation 1), ``CEWithChunkedOutputLoss`` with the model's chunked
    output, ``compile: False`` (the config's default), batch 2. Only the tokenizer, the checkpoint and the dataset
    differ from the recipe (random token ids, every position a target, as a packed dataset gives).
``hf-full``
    The same levers on the stack autotune's core runs: transformers' ``LlamaForCausalLM`` in pure bf16,
    ``gradient_checkpointing_enable`` (non-reentrant), ``PagedAdamW8bit`` per parameter stepped in a
    ``register_post_accumulate_grad_hook`` (torch's tutorial "How to save memory by fusing the optimizer step into
    the backward pass"), the core's own chunked loss (``autotune.trainer.chunked_loss.chunked_causal_lm_loss``).
    Its ratio to ``tt-full`` is the peer's recipe against our stack on the same shape and levers.
``fp8-layer``
    One decoder layer of the model (``LlamaDecoderLayer``), forward + backward on ``mbs × seq`` tokens, compiled
    (``torch.compile``), in bf16 and with torchao's float8 training linears (``convert_to_float8_training``,
    tensorwise scaling, the default ``Float8LinearConfig``), for full fine-tuning (weights trained) and frozen
    weights (the LoRA base: no weight gradient): the time ratio FP8 / bf16 per layer, the quantity the cost model's
    FP8 term prices.

Timing: CUDA-synchronised wall clock per optimizer step, the first ``--warmup`` steps left out; tokens/s counts
``mbs × seq`` tokens per step (torchtune's ``tokens_per_second_per_gpu`` counts the non-padded tokens; here every
token is real). Memory: ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over the timed steps and the
warm-up (the recipe's ``get_memory_stats`` reads the same counters), in GiB.

Usage (on the GPU machine; torchtune, torchao, bitsandbytes installed):
  python benchmarks/gpu_levers.py --all --out levers.jsonl --budget-s 240
  python benchmarks/gpu_levers.py --variant hf-full [--config benchmarks/gpu_kit/configs/llama3-8b.json]
On a machine without CUDA it runs on the CPU (``--device cpu``, AdamW instead of the paged 8-bit optimizer, no
float8): a smoke test of the code paths on a small config, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KIT = Path(__file__).resolve().parent / "gpu_kit"
VARIANTS = ("tt-full", "hf-full", "fp8-layer")
"""In the order ``--all`` runs them: the peer ratio first, then FP8 (compiles four layers)."""
GIB = 1024**3
LEVERS = "bf16,optim-in-bwd,paged-adamw-8bit,ckpt,chunked-ce"
"""The levers both full fine-tuning variants run (torchtune's 8B single-device recipe)."""


def _config(path: str) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig.from_dict(_config_dict(path))


def _config_dict(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return loaded


def _optimizer(params: list[Any], device: str) -> Any:
    """The optimizer: bitsandbytes ``PagedAdamW8bit`` (lr 2e-5, the recipe's) on CUDA; AdamW on the CPU (smoke test)."""
    import torch

    if device == "cuda":
        import bitsandbytes as bnb

        return bnb.optim.PagedAdamW8bit(params, lr=2e-5)
    return torch.optim.AdamW(params, lr=2e-5)


def _timed(step: Any, steps: int, warmup: int, device: str) -> tuple[list[float], float]:
    """Run ``step()`` ``warmup + steps`` times; the timed steps' seconds and the final loss."""
    import torch

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    times_s: list[float] = []
    loss = float("nan")
    for index in range(warmup + steps):
        sync()
        start_s = time.perf_counter()
        loss = step()
        sync()
        if index >= warmup:
            times_s.append(time.perf_counter() - start_s)
    return times_s, loss


def _measured(name: str, args: argparse.Namespace, step: Any, **extra: Any) -> dict[str, Any]:
    """Run ``step`` (warm-up, then timed steps) from fresh peak-memory counters; its JSON row."""
    import torch

    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times_s, loss = _timed(step, args.steps, args.warmup, args.device)
    return _result(name, args, times_s, loss, **extra)


def _result(name: str, args: argparse.Namespace, times_s: list[float], loss: float, **extra: Any) -> dict[str, Any]:
    import torch

    tokens = args.mbs * args.seq
    row: dict[str, Any] = {
        "lever": name,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "mbs": args.mbs,
        "seq": args.seq,
        "steps_timed": len(times_s),
        "step_s_median": sorted(times_s)[len(times_s) // 2],
        "tokens_per_s": tokens / (sum(times_s) / len(times_s)),
        "loss_last": loss,
        **extra,
    }
    if args.device == "cuda":
        row["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
        row["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
        row["peak_active_gib"] = torch.cuda.memory_stats().get("active_bytes.all.peak", 0) / GIB
    return row


def run_tt_full(args: argparse.Namespace) -> dict[str, Any]:
    """The peer: torchtune's single-device full fine-tuning recipe on random weights (module docstring)."""
    import torch
    from torchtune import modules, training
    from torchtune.models.llama3_1._component_builders import llama3_1
    from torchtune.modules.loss import CEWithChunkedOutputLoss

    cfg = _config(args.config)
    rope_base = float(_config_dict(args.config).get("rope_theta", 500000.0))
    with training.set_default_dtype(torch.bfloat16), torch.device(args.device):
        model = llama3_1(
            vocab_size=cfg.vocab_size,
            num_layers=cfg.num_hidden_layers,
            num_heads=cfg.num_attention_heads,
            num_kv_heads=cfg.num_key_value_heads,
            embed_dim=cfg.hidden_size,
            max_seq_len=max(args.seq, 2048),
            intermediate_dim=cfg.intermediate_size,
            norm_eps=cfg.rms_norm_eps,
            rope_base=rope_base,
        )
    training.set_activation_checkpointing(model, auto_wrap_policy={modules.TransformerSelfAttentionLayer})
    optim_dict = {p: _optimizer([p], args.device) for p in model.parameters()}
    training.register_optim_in_bwd_hooks(model=model, optim_dict=optim_dict)
    loss_fn = CEWithChunkedOutputLoss()
    model.set_num_output_chunks(loss_fn.num_output_chunks)
    generator = torch.Generator(device="cpu").manual_seed(0)
    ignore = torch.full((args.mbs, 1), loss_fn.ignore_index, dtype=torch.long, device=args.device)

    def step() -> float:
        tokens = torch.randint(0, cfg.vocab_size, (args.mbs, args.seq), generator=generator).to(args.device)
        logits = model(tokens)
        labels = torch.hstack((tokens[..., 1:], ignore))
        loss = loss_fn(logits, labels)
        loss.backward()
        return float(loss.detach())

    return _measured("tt-full", args, step, stack="torchtune", levers=LEVERS)


def run_hf_full(args: argparse.Namespace) -> dict[str, Any]:
    """The same levers on transformers' Llama with autotune's chunked loss (module docstring)."""
    import torch
    from transformers import LlamaForCausalLM

    from autotune.trainer.chunked_loss import chunked_causal_lm_loss

    cfg = _config(args.config)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(args.device):
        model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizers = {p: _optimizer([p], args.device) for p in model.parameters()}

    def hook(param: torch.Tensor) -> None:
        optimizers[param].step()
        optimizers[param].zero_grad(set_to_none=True)

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(hook)
    generator = torch.Generator(device="cpu").manual_seed(0)

    def step() -> float:
        tokens = torch.randint(0, cfg.vocab_size, (args.mbs, args.seq), generator=generator).to(args.device)
        hidden = model.model(input_ids=tokens).last_hidden_state
        loss = chunked_causal_lm_loss(hidden, model.lm_head.weight, tokens)
        loss.backward()
        return float(loss.detach())

    return _measured(
        "hf-full",
        args,
        step,
        stack="transformers",
        levers=LEVERS,
    )


def run_fp8_layer(args: argparse.Namespace) -> dict[str, Any]:
    """One decoder layer, compiled, bf16 vs torchao float8 linears, trained and frozen weights (module docstring)."""
    import torch
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = _config(args.config)
    cfg._attn_implementation = "sdpa"
    rows: dict[str, float] = {}
    hidden0 = torch.randn(args.mbs, args.seq, cfg.hidden_size, device=args.device, dtype=torch.bfloat16)
    rotary = LlamaRotaryEmbedding(config=cfg).to(args.device)
    position_ids = torch.arange(args.seq, device=args.device).unsqueeze(0).expand(args.mbs, -1)
    cos_sin = tuple(t.to(torch.bfloat16) for t in rotary(hidden0, position_ids))
    for precision in ("bf16", "fp8") if args.device == "cuda" else ("bf16",):
        for weights in ("trained", "frozen"):
            torch.manual_seed(0)
            layer = LlamaDecoderLayer(cfg, layer_idx=0).to(args.device, torch.bfloat16)
            if precision == "fp8":
                from torchao.float8 import convert_to_float8_training

                convert_to_float8_training(layer)
            layer.requires_grad_(weights == "trained")
            forward = torch.compile(layer) if args.device == "cuda" else layer

            def step(forward: Any = forward) -> float:
                x = hidden0.detach().requires_grad_(True)
                out = forward(x, position_embeddings=cos_sin, position_ids=position_ids)
                out = out[0] if isinstance(out, tuple) else out
                out.float().square().mean().backward()
                return 0.0

            times_s, _ = _timed(step, args.steps * 4, args.warmup + 2, args.device)
            rows[f"{precision}_{weights}_s"] = sorted(times_s)[len(times_s) // 2]
            del layer, forward
    extra = {k: v for k, v in rows.items()}
    for weights in ("trained", "frozen"):
        if f"fp8_{weights}_s" in rows:
            extra[f"fp8_over_bf16_{weights}"] = rows[f"fp8_{weights}_s"] / rows[f"bf16_{weights}_s"]
    return _result("fp8-layer", args, [rows["bf16_trained_s"]], 0.0, **extra)


RUNNERS = {"tt-full": run_tt_full, "hf-full": run_hf_full, "fp8-layer": run_fp8_layer}


def run_all(args: argparse.Namespace) -> int:
    """Each variant in its own process, in :data:`VARIANTS` order, while the budget lasts; lines to ``--out``."""
    start_s = time.perf_counter()
    for name in VARIANTS:
        left_s = args.budget_s - (time.perf_counter() - start_s)
        if left_s < 30:
            print(json.dumps({"lever": name, "status": f"skipped: {left_s:.0f} s left"}), flush=True)
            continue
        argv = [sys.executable, __file__, "--variant", name, "--config", args.config, "--device", args.device]
        argv += [
            "--steps",
            str(args.steps),
            "--warmup",
            str(args.warmup),
            "--mbs",
            str(args.mbs),
            "--seq",
            str(args.seq),
        ]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=left_s, check=False)
            lines = [line for line in proc.stdout.splitlines() if line.startswith('{"lever"')]
            row = json.loads(lines[-1]) if lines else {"lever": name, "status": f"failed (exit {proc.returncode})"}
            if not lines:
                row["error"] = proc.stderr[-3000:]
        except subprocess.TimeoutExpired:
            row = {"lever": name, "status": f"timed out after {left_s:.0f} s"}
        row["wall_s"] = time.perf_counter() - start_s
        print(json.dumps(row), flush=True)
        with open(args.out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line; run one variant (printing its JSON line) or all of them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS)
    parser.add_argument("--all", action="store_true", help="Run every variant, each in its own process.")
    parser.add_argument("--out", default="levers.jsonl", help="With --all: append the JSON lines here.")
    parser.add_argument("--budget-s", type=float, default=240.0, help="With --all: stop starting variants past this.")
    parser.add_argument("--config", default=str(KIT / "configs" / "llama3-8b.json"))
    parser.add_argument("--device", default=None, help="cuda (default where available) or cpu.")
    parser.add_argument("--mbs", type=int, default=2, help="Micro batch size (torchtune's 4090 table: 2).")
    parser.add_argument("--seq", type=int, default=2048, help="Tokens per sequence (packed).")
    parser.add_argument("--steps", type=int, default=5, help="Timed optimizer steps.")
    parser.add_argument("--warmup", type=int, default=2, help="Steps before timing (allocator, compile, paging).")
    args = parser.parse_args(argv)
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.all:
        return run_all(args)
    if args.variant is None:
        parser.error("name a --variant or give --all")
    print(json.dumps(RUNNERS[args.variant](args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
