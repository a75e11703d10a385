"""Count the kernels one decoder layer dispatches and the bytes its element-wise kernels move.

Counted from the real transformers module code; writes ``src/autotune/profiles/op_counts.yaml`` (read by the torch-free
cost model).

Method: build one decoder layer of each family with transformers (a tiny config: widths ≤ 256, 64 tokens, so the
real CPU tensors take kilobytes), run forward and backward under a ``TorchDispatchMode`` that sees every aten op
eager PyTorch dispatches, and classify each op. (Under ``FakeTensorMode`` the mode sees the decompositions of
composite ops instead — 172 ops instead of 38 for a Llama layer's forward — which is not what eager CUDA
launches, so the tensors are real and tiny.)

* **view** — returns an alias of an input (``view``, ``transpose``, ``expand``, ``detach``, …) or only allocates
  (``empty*``): no kernel, no traffic;
* **gemm** — ``mm`` / ``addmm`` / ``bmm`` / ``baddbmm``: timed by the GEMM shape model (``costmodel/gemm.py``);
* **attention** — the SDPA kernels: timed by the attention model;
* **element-wise** — everything else (norms, RoPE, activations, casts, residual adds, dropout): one kernel launch
  each, moving the bytes of its tensor inputs and outputs.

Kernel counts do not depend on the sizes; element-wise bytes per token are linear in the layer's widths, so each
family is run at ten random widths and the bytes per token are solved by least squares (checked at h = 1024,
I = 2816, outside the fitted range: within 0.4 % forward and 0.2 % backward for Llama) as
``c_h·h + c_i·I + c_q·n_q·d + c_kv·n_kv·d + c_n·n_q + c_0`` bytes per token, in bf16. The optimizer step and
gradient clipping are counted the same way (``torch.optim.AdamW`` foreach / per-tensor;
``clip_grad_norm_`` foreach), and one peft LoRA ``Linear`` gives the kernels one adapter target adds.

MPT (llm-foundry) is not a transformers architecture with SDPA (transformers' ``MptForCausalLM`` always builds
ALiBi with eager s² attention, unlike the benchmarked llm-foundry yaml models): its counts come from GPT-2's
block (pre-LayerNorm, fused qkv with biases, GELU MLP 4×, learned positions) — the same block structure.

This script is the stand-in for ``autotune trace`` (H9): when the trace reports the same counts, replace this
file's producer and keep the data format. Usage (needs torch + transformers; about 30 s on 2 cores):

    python tools/count_ops.py            # write src/autotune/profiles/op_counts.yaml
    python tools/count_ops.py --check    # print the counts, write nothing
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "src" / "autotune" / "profiles" / "op_counts.yaml"
DTYPE = torch.bfloat16
TOKENS = 64
"""Tokens per layer call (micro batch 2 × 32); kernel counts do not depend on it, bytes are divided by it."""

GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm"}
ATTENTION_OPS = {
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_flash_attention_forward",
    "_flash_attention_backward",
    "_efficient_attention_forward",
    "_efficient_attention_backward",
}
NO_KERNEL_OPS = {
    "_unsafe_view",
    "_reshape_alias",
    "lift_fresh",
    "set_",
    "resize_",
    "_record_function_enter_new",
    "_record_function_exit",
}
"""Ops that launch no kernel although their schema does not mark the result as an alias (views by contract)
or that only allocate (every ``empty*`` / ``new_empty*``), and profiler markers."""


@dataclass
class Tally:
    """Kernels and element-wise bytes seen by the counting mode."""

    elementwise: int = 0
    gemm: int = 0
    attention: int = 0
    foreach: int = 0
    elementwise_bytes: float = 0.0
    names: dict[str, int] = field(default_factory=dict)

    @property
    def kernels(self) -> int:
        """Kernel launches (every op that is not a view)."""
        return self.elementwise + self.gemm + self.attention + self.foreach


def _nbytes(value: Any) -> float:
    if isinstance(value, torch.Tensor):
        return float(value.numel() * value.element_size())
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    return 0.0


class CountingMode(TorchDispatchMode):
    """Records every aten op dispatched into a :class:`Tally`."""

    def __init__(self) -> None:
        """Start with an empty :class:`Tally`."""
        super().__init__()
        self.tally = Tally()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run the op and tally it by kind (element-wise with its bytes); views and ops without a kernel are skipped."""
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        schema = func._schema
        aliases = any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        if aliases or name in NO_KERNEL_OPS or name.startswith(("empty", "new_empty")):
            return out
        tally = self.tally
        tally.names[name] = tally.names.get(name, 0) + 1
        if name in GEMM_OPS:
            tally.gemm += 1
        elif name in ATTENTION_OPS:
            tally.attention += 1
        elif name.startswith("_foreach") or name.startswith("_fused"):
            tally.foreach += 1
        else:
            tally.elementwise += 1
            inputs = [a for a in args if isinstance(a, torch.Tensor)]
            tally.elementwise_bytes += sum(_nbytes(a) for a in inputs) + _nbytes(out)
        return out


@dataclass(frozen=True)
class Dims:
    """Widths of one test layer."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int


def _llama_like(cls_config: Any, cls_layer: Any, **extra: Any) -> Callable[[Dims], torch.nn.Module]:
    def build(d: Dims) -> torch.nn.Module:
        config = cls_config(
            hidden_size=d.hidden,
            intermediate_size=d.intermediate,
            num_attention_heads=d.heads,
            num_key_value_heads=d.kv_heads,
            head_dim=d.head_dim,
            num_hidden_layers=1,
            vocab_size=128,
            **extra,
        )
        config._attn_implementation = "sdpa"
        return _Wrapped(cls_layer(config, 0), config)

    return build


class _Wrapped(torch.nn.Module):
    """A decoder layer with its rotary embedding, called like the model calls it."""

    def __init__(self, layer: torch.nn.Module, config: Any) -> None:
        super().__init__()
        self.layer = layer
        self.config = config
        self.rotary: torch.nn.Module | None = None
        rotary_cls = _rotary_class(layer)
        if rotary_cls is not None:
            self.rotary = rotary_cls(config=config)

        self.position_embeddings: Any = None

    def prepare(self, hidden: torch.Tensor, positions: torch.Tensor) -> None:
        """Compute the rotary cos/sin once, outside the count (the model does it once, not per layer)."""
        if self.rotary is not None:
            self.position_embeddings = self.rotary(hidden, positions)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {"attention_mask": None, "position_ids": positions}
        if self.position_embeddings is not None:
            kwargs["position_embeddings"] = self.position_embeddings
        out = self.layer(hidden, **kwargs)
        return out[0] if isinstance(out, tuple) else out


def _rotary_class(layer: torch.nn.Module) -> Any:
    module = __import__(type(layer).__module__, fromlist=["_"])
    for name in dir(module):
        if name.endswith("RotaryEmbedding") and not name.startswith("_"):
            return getattr(module, name)
    return None


class _Gpt2Block(torch.nn.Module):
    """GPT-2's block with SDPA (the MPT / llm-foundry block structure: see the module docstring)."""

    def __init__(self, d: Dims) -> None:
        super().__init__()
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block

        config = transformers.GPT2Config(
            n_embd=d.hidden, n_head=d.heads, n_inner=d.intermediate, activation_function="gelu", n_layer=1
        )
        config._attn_implementation = "sdpa"
        config.resid_pdrop = config.attn_pdrop = config.embd_pdrop = 0.0
        self.block = GPT2Block(config, layer_idx=0)

    def forward(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        out = self.block(hidden)
        return out[0] if isinstance(out, tuple) else out


def builders() -> dict[str, Callable[[Dims], torch.nn.Module]]:
    """Family name → layer builder (transformers' own classes)."""
    from transformers.models.gemma.modeling_gemma import GemmaDecoderLayer
    from transformers.models.gemma2.modeling_gemma2 import Gemma2DecoderLayer
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer
    from transformers.models.phi3.modeling_phi3 import Phi3DecoderLayer
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    return {
        "llama": _llama_like(transformers.LlamaConfig, LlamaDecoderLayer),
        "qwen2": _llama_like(transformers.Qwen2Config, Qwen2DecoderLayer),
        "gemma": _llama_like(transformers.GemmaConfig, GemmaDecoderLayer),
        "gemma2": _llama_like(
            transformers.Gemma2Config, Gemma2DecoderLayer, sliding_window=None, attn_logit_softcapping=None
        ),
        "phi3": _llama_like(transformers.Phi3Config, Phi3DecoderLayer),
        "mpt": lambda d: _Gpt2Block(d),
    }


def _random_dims(rng: random.Random, gqa: bool) -> Dims:
    head_dim = rng.choice((16, 32, 64))
    kv = rng.choice((1, 2, 4))
    heads = kv * (rng.choice((1, 2, 4)) if gqa else 1)
    return Dims(
        hidden=rng.choice((64, 96, 128, 192, 256)),
        intermediate=rng.choice((128, 160, 256, 384)),
        heads=heads,
        kv_heads=kv if gqa else heads,
        head_dim=head_dim,
    )


def _run_layer(
    module: torch.nn.Module, d: Dims, trainable: bool, batch: int = 2, seq: int = TOKENS // 2
) -> tuple[Tally, Tally]:
    """(forward tally, backward tally) of one layer call on batch × seq tokens."""
    if any(p.dtype != DTYPE for p in module.parameters()):
        module = module.to(DTYPE)
    module.train()
    for p in module.parameters():
        p.requires_grad_(trainable)
    hidden = torch.randn(batch, seq, d.hidden, dtype=DTYPE, requires_grad=True)
    positions = torch.arange(seq).unsqueeze(0).expand(batch, -1)
    if isinstance(module, _Wrapped):
        with torch.no_grad():
            module.prepare(hidden, positions)
    with CountingMode() as forward:
        out = module(hidden, positions)
    grad = torch.randn_like(out)
    with CountingMode() as backward:
        out.backward(grad)
    return forward.tally, backward.tally


def _features(d: Dims) -> list[float]:
    return [d.hidden, d.intermediate, d.heads * d.head_dim, d.kv_heads * d.head_dim, d.heads, 1.0]


FEATURE_NAMES = ("hidden", "intermediate", "q", "kv", "heads", "constant")


def _solve(rows: list[list[float]], values: list[float]) -> dict[str, float]:
    solution, *_ = np.linalg.lstsq(np.array(rows), np.array(values), rcond=None)
    return {name: round(float(v), 3) for name, v in zip(FEATURE_NAMES, solution, strict=True)}


def count_family(name: str, build: Callable[[Dims], torch.nn.Module]) -> dict[str, Any]:
    """Kernel counts and element-wise bytes per token (bf16) of one family's decoder layer."""
    rng = random.Random(0)
    gqa = name != "mpt"
    result: dict[str, Any] = {}
    for label, trainable in (("full", True), ("frozen", False)):
        rows: list[list[float]] = []
        fwd_bytes: list[float] = []
        bwd_bytes: list[float] = []
        first: tuple[Tally, Tally] | None = None
        for _ in range(10):
            d = _random_dims(rng, gqa)
            if name == "mpt":
                d = Dims(d.hidden, 4 * d.hidden, d.heads, d.heads, d.hidden // d.heads)
            torch.manual_seed(0)
            forward, backward = _run_layer(build(d), d, trainable)
            first = first or (forward, backward)
            rows.append(_features(d))
            fwd_bytes.append(forward.elementwise_bytes / TOKENS)
            bwd_bytes.append(backward.elementwise_bytes / TOKENS)
        assert first is not None
        forward, backward = first
        result[label] = {
            "forward_kernels": {
                "elementwise": forward.elementwise,
                "gemm": forward.gemm,
                "attention": forward.attention,
            },
            "backward_kernels": {
                "elementwise": backward.elementwise,
                "gemm": backward.gemm,
                "attention": backward.attention,
            },
            "forward_elementwise_bytes_per_token": _solve(rows, fwd_bytes),
            "backward_elementwise_bytes_per_token": _solve(rows, bwd_bytes),
        }
    return result


def count_eager_attention() -> dict[str, Any]:
    """What the math (eager) attention path adds over SDPA in a Llama layer: kernels, and bytes per score element.

    Bytes per score element are per head per query per key; both come from the difference between two sequence lengths
    at the same token count.
    """
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    d = Dims(128, 256, 4, 2, 32)

    def run(eager: bool, batch: int, seq: int) -> tuple[Tally, Tally]:
        module = _llama_like(transformers.LlamaConfig, LlamaDecoderLayer)(d)
        if eager:
            module.config._attn_implementation = "eager"
        torch.manual_seed(0)
        return _run_layer(module, d, True, batch, seq)

    short_fwd, short_bwd = run(True, 2, TOKENS // 2)
    long_fwd, long_bwd = run(True, 1, TOKENS)
    sdpa_fwd, sdpa_bwd = run(False, 2, TOKENS // 2)
    scores_per_token_step = d.heads * (TOKENS - TOKENS // 2)  # extra score elements per token, long vs short
    return {
        "forward_extra_kernels": short_fwd.kernels - sdpa_fwd.kernels,
        "backward_extra_kernels": short_bwd.kernels - sdpa_bwd.kernels,
        "forward_bytes_per_score": round(
            (long_fwd.elementwise_bytes - short_fwd.elementwise_bytes) / TOKENS / scores_per_token_step, 3
        ),
        "backward_bytes_per_score": round(
            (long_bwd.elementwise_bytes - short_bwd.elementwise_bytes) / TOKENS / scores_per_token_step, 3
        ),
    }


def count_lora_target() -> dict[str, Any]:
    """Kernels one peft LoRA target adds (dropout > 0, as the planner's default 0.05), forward and backward."""
    from peft import LoraConfig, get_peft_model

    class _One(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(64, 96, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.proj(x)

    base = torch.nn.Linear(64, 96, bias=False).to(DTYPE)
    base.weight.requires_grad_(False)
    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["proj"])
    module = get_peft_model(_One().to(DTYPE), config)
    for n, p in module.named_parameters():
        if "lora_" in n:
            p.data = p.data.float()  # the training core keeps adapters in fp32 (peft's autocast_adapter_dtype)
    module.train()
    x = torch.randn(TOKENS, 64, dtype=DTYPE, requires_grad=True)
    with CountingMode() as base_forward:
        base_out = base(x)
    with CountingMode() as base_backward:
        base_out.backward(torch.randn_like(base_out))
    with CountingMode() as forward:
        out = module(x)
    with CountingMode() as backward:
        out.backward(torch.randn_like(out))
    return {
        "forward_kernels": forward.tally.kernels - base_forward.tally.kernels,
        "backward_kernels": backward.tally.kernels - base_backward.tally.kernels,
    }


def count_optimizer() -> dict[str, Any]:
    """Kernel-dispatching calls per optimizer step: AdamW foreach / fused / per-tensor, clip_grad_norm_."""
    result: dict[str, Any] = {}
    for variant, kwargs in (("foreach", {"foreach": True}), ("per_tensor", {"foreach": False})):
        counts = []
        for n in (4, 8):
            params = [torch.nn.Parameter(torch.randn(16, dtype=torch.float32)) for _ in range(n)]
            for p in params:
                p.grad = torch.randn_like(p)
            optimizer = torch.optim.AdamW(params, lr=1e-3, **kwargs)
            optimizer.step()  # state initialisation happens on the first step
            with CountingMode() as mode:
                optimizer.step()
            counts.append(mode.tally)
        per_tensor = (counts[1].kernels - counts[0].kernels) / 4
        result[f"adamw_{variant}"] = {
            "calls_per_step": counts[0].kernels - 4 * per_tensor,
            "calls_per_tensor": per_tensor,
        }
    params = [torch.nn.Parameter(torch.randn(16)) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    with CountingMode() as clip:
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    result["clip_grad_norm_foreach_calls"] = clip.tally.kernels
    return result


def main(argv: list[str] | None = None) -> int:
    """Count and write (or print with ``--check``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="print the counts; write nothing")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    families = {name: count_family(name, build) for name, build in builders().items()}
    data = {
        "schema_version": 1,
        "source": (
            f"tools/count_ops.py: transformers {transformers.__version__} decoder layers (GPT-2 block for mpt), "
            f"torch {torch.__version__} TorchDispatchMode, bf16, eager, SDPA attention"
        ),
        "command": "python tools/count_ops.py",
        "families": families,
        "eager_attention": count_eager_attention(),
        "lora_target": count_lora_target(),
        "optimizer": count_optimizer(),
    }
    text = yaml.safe_dump(data, sort_keys=False)
    if args.check:
        print(text)
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
