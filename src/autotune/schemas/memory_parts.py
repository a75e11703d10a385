"""One vocabulary of memory part names, shared by the memory model, the headroom band, planner, plots and trace.

``Estimate.memory_breakdown_gib`` and the trace's ``categories_bytes`` are keyed by these words; a part renamed in
one place and not another would silently drop out of the headroom band or a sum, so every user names the parts
through this module (``tests/unit/schemas/test_memory_parts.py`` checks the memory model against it).
"""

from __future__ import annotations

from typing import Literal, get_args

from autotune.schemas.trace import TraceCategory

MemoryPart = Literal[
    "weights",
    "gathered weights",
    "autocast weight copies",
    "lora adapters",
    "gradients",
    "compiled backward gradients",
    "ddp buckets",
    "optimizer states",
    "optimizer step buffers",
    "activations",
    "logits + loss",
    "embedding gradient buffer",
    "cuBLAS workspaces",
]
"""A named part of the peak allocated memory (``costmodel.memory.predict_memory``'s ``breakdown_bytes`` keys)."""

MEMORY_PARTS: tuple[MemoryPart, ...] = get_args(MemoryPart)
"""Every memory part, in the plots' stacking order (bottom to top)."""

MODELLED_PARTS: frozenset[MemoryPart] = frozenset({"activations", "logits + loss", "embedding gradient buffer"})
"""Parts that are modelled (activation and loss tensors, a compiled backward's fp32 embedding-gradient buffer), the
part the headroom and error bands scale. Every other part — weights, adapters, gradients (a compiled backward's new
ones too), optimizer states and its step buffers, gathered units, DDP buckets, autocast copies, cuBLAS workspaces —
is a parameter count times bytes per parameter (or a library's fixed workspace), exact for a given implementation."""

MODEL_STATE_PARTS: tuple[MemoryPart, ...] = ("weights", "lora adapters", "gradients", "optimizer states")
"""The model states: what a planner's infeasibility message sums as "states"."""

TRACE_CATEGORY_PARTS: dict[TraceCategory, MemoryPart] = {
    "weights": "weights",
    "adapters": "lora adapters",
    "gradients": "gradients",
    "optimizer states": "optimizer states",
    "saved activations": "activations",
    "recomputed activations": "activations",
    "temporaries": "activations",
    "logits + loss": "logits + loss",
}
"""The trace's category (``schemas.trace.CATEGORIES``) → the memory part it is counted in: the trace splits
activations into saved, recomputed and temporary tensors and says "adapters" for the LoRA weights."""


def memory_part(trace_category: TraceCategory) -> MemoryPart:
    """The memory part a trace category is counted in (``TRACE_CATEGORY_PARTS``)."""
    return TRACE_CATEGORY_PARTS[trace_category]
