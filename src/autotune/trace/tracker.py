"""Live tensor bytes on fake tensors: a ``TorchDispatchMode`` that sees every storage born and freed.

Every op dispatched while the mode is active is inspected: an output whose untyped storage is new is
registered with its size and the context it was born in (phase, region, whether a module forward runs
during backward = recomputation under activation checkpointing); a ``weakref.finalize`` on the storage
removes it when the last tensor that uses it dies. This is the accounting of
``torch.distributed._tools.mem_tracker.MemTracker`` (a ``WeakIdKeyDictionary`` of storages, sizes from
``untyped_storage().nbytes()``), kept in our own small form so that the categories this project
reports (saved activations vs temporaries, logits + loss, recomputed activations) can be decided after
the fact, once it is known which tensors survived the forward pass and which became ``.grad``.

Sizes: each storage counts its ``nbytes()``; the CUDA-rounded size rounds every storage up to a
multiple of 512 B, the CUDA caching allocator's ``kMinBlockSize`` (``round_size`` in
``c10/cuda/CUDACachingAllocator.cpp``; PyTorch "CUDA semantics — memory management" notes).

The same mode counts ops per op class, FLOPs per op class (``torch.utils.flop_counter`` formulas,
registered per aten overload) and bytes moved (inputs read + outputs written, each tensor's
``numel × element size``; views count their own extent) per phase.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count
from torch.utils.weak import WeakIdKeyDictionary

CUDA_BLOCK_BYTES = 512
"""The CUDA caching allocator rounds every allocation up to a multiple of this (``kMinBlockSize``)."""

PHASES = ("forward", "backward", "optimizer step")

_VIEW_OR_META = {
    "aten.view",
    "aten._unsafe_view",
    "aten.t",
    "aten.transpose",
    "aten.permute",
    "aten.expand",
    "aten.slice",
    "aten.select",
    "aten.unsqueeze",
    "aten.squeeze",
    "aten.as_strided",
    "aten.alias",
    "aten.detach",
    "aten.split",
    "aten.split_with_sizes",
    "aten.unbind",
    "aten.chunk",
    "aten.narrow",
    "aten.diagonal",
    "aten.view_as_real",
    "aten.view_as_complex",
    "aten.unfold",
    "aten.lift_fresh",
    "aten.empty_like",
    "aten.empty",
    "aten.new_empty",
    "aten.empty_strided",
    "aten.new_empty_strided",
    "aten.is_same_size",
    "aten._to_copy_meta",
}
_ATTENTION = ("scaled_dot_product", "flash_attention", "efficient_attention")
_MATMUL = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_grouped_mm", "dot", "addbmm")
_REDUCTION = (
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "norm",
    "var",
    "std",
    "softmax",
    "log_softmax",
    "_softmax",
    "_log_softmax",
    "logsumexp",
    "nll_loss",
    "cumsum",
    "argmax",
    "topk",
    "sort",
    "prod",
    "any",
    "all",
    "nonzero",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "nll_loss_backward",
    "nll_loss_forward",
    "embedding_dense_backward",
    "scatter_add",
    "index_add",
    "histc",
    "bincount",
)
_COPY = (
    "copy_",
    "_to_copy",
    "clone",
    "contiguous",
    "cat",
    "stack",
    "index_select",
    "gather",
    "embedding",
    "index",
    "index_put",
    "scatter",
    "fill_",
    "zero_",
    "zeros",
    "ones",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "arange",
    "repeat",
    "pad",
    "constant_pad_nd",
    "masked_fill",
    "where",
    "tril",
    "triu",
    "flip",
    "roll",
    "_unsafe_index",
    "slice_backward",
    "select_backward",
    "masked_select",
    "lift_fresh_copy",
    "scalar_tensor",
    "_local_scalar_dense",
)


def op_class(name: str) -> str:
    """Op class of an aten op name such as ``aten.mm.default``.

    matmul, attention, reduction, copy, view (metadata only, no kernel) or elementwise (everything else).
    """
    base = name.split(".")[1] if name.startswith("aten.") else name
    packet = ".".join(name.split(".")[:2])
    if any(part in base for part in _ATTENTION):
        return "attention"
    if packet in _VIEW_OR_META:
        return "view"
    if base in _MATMUL:
        return "matmul"
    if base in _REDUCTION or base.rstrip("_") in _REDUCTION:
        return "reduction"
    if base in _COPY or base.rstrip("_") in _COPY:
        return "copy"
    return "elementwise"


@dataclass
class StorageRecord:
    """One storage: size, where it was born, and (filled in later) what it turned out to be."""

    nbytes: int
    phase: str
    region: str
    recompute: bool
    label: str | None = None
    alive: bool = True


@dataclass
class PhasePeak:
    """The largest live total of one phase and which storages were alive then."""

    bytes: int = 0
    cuda_bytes: int = 0
    live: tuple[int, ...] = ()


@dataclass
class OpStats:
    """Per op class: ops dispatched, FLOPs (flop_counter formulas) and bytes moved (read + written)."""

    count: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    flops: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_moved: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def cuda_rounded(nbytes: int) -> int:
    """``nbytes`` rounded up as the CUDA caching allocator does (512 B blocks; 0 stays 0)."""
    return -(-nbytes // CUDA_BLOCK_BYTES) * CUDA_BLOCK_BYTES if nbytes else 0


def _tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


_CPU_FLASH_OPS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward")


def _tensors(tree: Any) -> list[torch.Tensor]:
    """The tensors in an op's arguments or outputs (nested tuples, lists and dicts), in pytree order.

    ``tree_flatten`` without building a spec (the dispatch hot path).
    """
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, (tuple, list)):
        found: list[torch.Tensor] = []
        for item in tree:
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif isinstance(item, (tuple, list, dict)):
                found.extend(_tensors(item))
        return found
    if isinstance(tree, dict):
        return _tensors(list(tree.values()))
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _flops(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """FLOPs of one op by ``torch.utils.flop_counter``'s registered formulas.

    The CPU flash-attention ops, which the registry lacks, use its SDPA formulas (``sdpa_flop_count`` /
    ``sdpa_backward_flop_count``: the full s×s product, causal masking not discounted).
    """
    formula = flop_registry.get(func.overloadpacket)
    if formula is not None:
        return int(formula(*args, **kwargs, out_val=out))
    name = str(func.overloadpacket)
    if name.endswith("_scaled_dot_product_flash_attention_for_cpu"):
        q, k, v = args[:3]
        return int(sdpa_flop_count(q.shape, k.shape, v.shape))
    if name.endswith("_scaled_dot_product_flash_attention_for_cpu_backward"):
        grad, q, k, v = args[:4]
        return int(sdpa_backward_flop_count(grad.shape, q.shape, k.shape, v.shape))
    return 0


class LiveBytesTracker(TorchDispatchMode):
    """Dispatch mode that tracks live storage bytes, per-phase peaks and per-op-class statistics.

    Use ``register(tensor, label)`` for tensors that exist before tracing (parameters, buffers),
    ``phase(name)`` and ``region(name)`` context managers to tag births, and read ``records``,
    ``peaks`` and ``ops`` afterwards.
    """

    def __init__(self) -> None:
        """Start in phase 'setup', region 'model', with nothing registered and nothing live."""
        super().__init__()
        self.records: list[StorageRecord] = []
        self._ids: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.live_bytes = 0
        self.live_cuda_bytes = 0
        self._live: set[int] = set()
        self.current_phase = "setup"
        self.current_region = "model"
        self.recomputing = False
        self.peaks: dict[str, PhasePeak] = {name: PhasePeak() for name in PHASES}
        self.ops: dict[str, OpStats] = {name: OpStats() for name in PHASES}
        self._op_infos: dict[Any, tuple[str, Any]] = {}

    # -- storage accounting -------------------------------------------------------------------------
    def register(self, tensor: torch.Tensor, label: str | None = None) -> int:
        """Record ``tensor``'s storage (once) and return its index; ``label`` fixes its category."""
        storage = tensor.untyped_storage()
        index = self._ids.get(storage)
        if index is not None:
            if label is not None and self.records[index].label is None:
                self.records[index].label = label
            return index
        index = len(self.records)
        nbytes = storage.nbytes()
        self.records.append(StorageRecord(nbytes, self.current_phase, self.current_region, self.recomputing, label))
        self._ids[storage] = index
        self._live.add(index)
        self.live_bytes += nbytes
        self.live_cuda_bytes += cuda_rounded(nbytes)
        weakref.finalize(storage, self._free, index)
        peak = self.peaks.get(self.current_phase)
        if peak is not None and self.live_bytes > peak.bytes:
            peak.bytes, peak.cuda_bytes, peak.live = self.live_bytes, self.live_cuda_bytes, tuple(self._live)
        return index

    def _free(self, index: int) -> None:
        record = self.records[index]
        if record.alive:
            record.alive = False
            self._live.discard(index)
            self.live_bytes -= record.nbytes
            self.live_cuda_bytes -= cuda_rounded(record.nbytes)

    def live_indices(self) -> set[int]:
        """Indices of the storages alive now."""
        return set(self._live)

    def start_phase(self, name: str) -> None:
        """Enter phase ``name``; its peak starts from what is alive now."""
        self.current_phase = name
        self.current_region = "model"
        self.peaks[name] = PhasePeak(self.live_bytes, self.live_cuda_bytes, tuple(self._live))

    @contextmanager
    def region(self, name: str) -> Iterator[None]:
        """Tag births inside the block with ``name`` (e.g. 'loss')."""
        previous, self.current_region = self.current_region, name
        try:
            yield
        finally:
            self.current_region = previous

    # -- dispatch -----------------------------------------------------------------------------------
    def _op_info(self, func: Any) -> tuple[str, Any]:
        """(op class, FLOP formula or None) of an aten overload, computed once per overload."""
        info = self._op_infos.get(func)
        if info is None:
            name = str(func.overloadpacket) if hasattr(func, "overloadpacket") else str(func)
            full_name = f"{name}.{func._overloadname}" if hasattr(func, "_overloadname") else name
            counted = func.overloadpacket in flop_registry or name.endswith(_CPU_FLASH_OPS)
            info = (op_class(full_name), _flops if counted else None)
            self._op_infos[func] = info
        return info

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Run the op, add its count, FLOPs and bytes moved to the current phase, and register its outputs."""
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        kind, formula = self._op_info(func)
        stats = self.ops.get(self.current_phase)
        outputs = _tensors(out)
        if stats is not None and kind != "view":
            stats.count[kind] += 1
            if formula is not None:
                stats.flops[kind] += formula(func, args, kwargs, out)
            moved = sum(_tensor_bytes(t) for t in _tensors(args)) + sum(_tensor_bytes(t) for t in outputs)
            if kwargs:
                moved += sum(_tensor_bytes(t) for t in _tensors(kwargs))
            stats.bytes_moved[kind] += moved
        for tensor in outputs:
            if tensor.device.type != "meta":
                self.register(tensor)
        return out
