"""Kernels dispatched and element-wise bytes moved per decoder layer, read from ``profiles/op_counts.yaml``.

The data file is produced by ``tools/count_ops.py`` (torch: it runs the real transformers module code of
one decoder layer per family under a ``TorchDispatchMode``); this module only reads it, so planning stays
torch-free. When ``autotune trace`` reports the same counts, it can produce the file instead.

Per family and per training mode ('full': weights train; 'frozen': LoRA / QLoRA base), the file gives the
kernels of one layer's forward and backward by class (element-wise, GEMM, attention) and the element-wise bytes
per token in bf16 as a linear form in the layer's widths (h, I, n_q·d, n_kv·d, n_q, 1). (The file's ``lora_target``
count is not read: ``adapter_time`` counts a target's ops per dtype and dropout.) The optimizer step dispatches
``calls_per_step + calls_per_tensor × tensors`` calls.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from autotune.profiles.shipped_cache import load_shipped_yaml
from autotune.schemas.model import ModelSpec

FAMILY_OF_MODEL_TYPE: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "llama",
    "qwen2": "qwen2",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "phi3": "phi3",
    "mpt": "mpt",
}
"""config.json model_type → counted family; other gated-MLP models count as 'llama', LayerNorm / non-gated
blocks (Falcon, GPT-NeoX, Phi-2, BLOOM, StableLM) as 'mpt' (the GPT-style block)."""

FOREACH_TENSORS_PER_LAUNCH = 48
"""Tensors one CUDA foreach kernel launch processes (``multi_tensor_apply``'s depth-limited tensor lists:
110/64/48/36 tensors for 1–4 lists; AdamW's 4–5 lists → ~48). torch/csrc/.../MultiTensorApply.cuh."""


@dataclass(frozen=True)
class LayerOps:
    """One decoder layer's pass: kernel launches by class and element-wise bytes per token (bf16)."""

    forward_gemm_kernels: int
    forward_attention_kernels: int
    forward_elementwise_kernels: int
    backward_gemm_kernels: int
    backward_attention_kernels: int
    backward_elementwise_kernels: int
    forward_bytes_per_token: float
    backward_bytes_per_token: float

    @property
    def forward_kernels(self) -> int:
        """Every kernel of the forward pass."""
        return self.forward_gemm_kernels + self.forward_attention_kernels + self.forward_elementwise_kernels

    @property
    def backward_kernels(self) -> int:
        """Every kernel of the backward pass."""
        return self.backward_gemm_kernels + self.backward_attention_kernels + self.backward_elementwise_kernels


@cache
def op_counts() -> dict[str, Any]:
    """The parsed ``profiles/op_counts.yaml`` (cached per process)."""
    text = resources.files("autotune.profiles").joinpath("op_counts.yaml").read_text(encoding="utf-8")
    data = load_shipped_yaml("op-counts", "op_counts.yaml", text)  # parsed once, then from the JSON cache
    if not isinstance(data, dict) or "families" not in data:
        raise ValueError("profiles/op_counts.yaml: not an op-count file (regenerate: python tools/count_ops.py)")
    return data


def family_of(model: ModelSpec) -> str:
    """The counted family whose layer code ``model`` runs (``FAMILY_OF_MODEL_TYPE``)."""
    family = FAMILY_OF_MODEL_TYPE.get(model.model_type)
    if family is not None:
        return family
    return "llama" if model.mlp_gated else "mpt"


def _bytes(form: dict[str, float], model: ModelSpec) -> float:
    widths = {
        "hidden": model.hidden_size,
        "intermediate": model.intermediate_size * model.num_experts_per_token,
        "q": model.q_dim,
        "kv": model.kv_dim,
        "heads": model.num_attention_heads,
        "constant": 1.0,
    }
    return max(0.0, sum(form.get(name, 0.0) * value for name, value in widths.items()))


@functools.lru_cache(maxsize=256)
def layer_ops(model: ModelSpec, trainable: bool) -> LayerOps:
    """Kernels and element-wise bytes per token of one decoder layer (bf16 basis; see the module docstring).

    Cached: every candidate of a search asks for the same model.
    """
    entry = op_counts()["families"][family_of(model)]["full" if trainable else "frozen"]
    forward = entry["forward_kernels"]
    backward = entry["backward_kernels"]
    return LayerOps(
        forward_gemm_kernels=int(forward.get("gemm", 0)),
        forward_attention_kernels=int(forward.get("attention", 0)),
        forward_elementwise_kernels=int(sum(v for k, v in forward.items() if k not in ("gemm", "attention"))),
        backward_gemm_kernels=int(backward.get("gemm", 0)),
        backward_attention_kernels=int(backward.get("attention", 0)),
        backward_elementwise_kernels=int(sum(v for k, v in backward.items() if k not in ("gemm", "attention"))),
        forward_bytes_per_token=_bytes(entry["forward_elementwise_bytes_per_token"], model),
        backward_bytes_per_token=_bytes(entry["backward_elementwise_bytes_per_token"], model),
    )


@dataclass(frozen=True)
class EagerAttention:
    """What the math (eager) attention path adds to a layer over SDPA: kernels, and bytes per score element.

    The bytes are element-wise bytes per score element (one head, one query, one key: the s² softmax / mask / cast
    traffic).
    """

    forward_kernels: int
    backward_kernels: int
    forward_bytes_per_score: float
    backward_bytes_per_score: float


def eager_attention() -> EagerAttention:
    """The counted eager-attention extras (``tools/count_ops.py``, Llama layer, eager vs SDPA)."""
    entry = op_counts()["eager_attention"]
    return EagerAttention(
        forward_kernels=int(entry["forward_extra_kernels"]),
        backward_kernels=int(entry["backward_extra_kernels"]),
        forward_bytes_per_score=float(entry["forward_bytes_per_score"]),
        backward_bytes_per_score=float(entry["backward_bytes_per_score"]),
    )


LEGACY_CLAMP = EagerAttention(
    forward_kernels=1, backward_kernels=5, forward_bytes_per_score=4.0, backward_bytes_per_score=22.0
)
"""What ``eager-legacy`` attention adds to ``eager_attention()``: transformers 4.28–4.29 LlamaAttention clamps the
masked scores with ``torch.max(attn_weights, finfo.min)`` (4.28.1 ``modeling_llama.py`` line 226) — forward one
``maximum`` (read 2 + write 2 bytes per bf16 score); backward ``eq`` / ``where`` / ``lt`` / ``masked_fill_`` and a
second ``div`` (22 bytes per score). Counted with a TorchDispatchMode over the copied 4.28 code against today's
eager path (``tests/unit/costmodel/test_activations_legacy_attention.py``); bf16 basis, like ``eager_attention()``."""


def optimizer_launches(tensors: int, foreach: bool, clip: bool = True) -> tuple[float, float]:
    """(CPU dispatch calls, GPU kernel launches) of one AdamW step over ``tensors`` tensors.

    Plus foreach gradient-norm clipping (HF Trainer's default ``max_grad_norm`` 1.0) unless ``clip`` is False (the
    optimizer stepped inside the backward clips nothing).
    """
    data = op_counts()["optimizer"]
    entry = data["adamw_foreach" if foreach else "adamw_per_tensor"]
    calls = entry["calls_per_step"] + entry["calls_per_tensor"] * tensors
    clip_calls = data["clip_grad_norm_foreach_calls"] if clip else 0
    chunks = math.ceil(tensors / FOREACH_TENSORS_PER_LAUNCH)
    launches = (calls * chunks if foreach else calls) + clip_calls * chunks
    return calls + clip_calls, launches
