"""Packing examples whole into blocks of ``seq_len`` tokens: the bins, their efficiency, the batch layout.

Pure and torch-free: the training core packs with it and the planner can price the same blocks.

- :func:`best_fit_decreasing` puts every example into one bin (never split across two);
- :func:`packing_efficiency` is real tokens / block capacity;
- :func:`packed_layout` is the one rule for how a packed micro batch reaches the attention implementation.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from typing import Final, Literal

PackedLayout = Literal["flattened", "row-per-block"]

PACKED_LAYOUTS: Final[dict[str, PackedLayout]] = {
    "flash_attention_2": "flattened",
    "sdpa": "row-per-block",
    "eager": "row-per-block",
}
"""Attention implementation → how a packed micro batch is laid out so that attention stays inside each example.

Both layouts carry ``position_ids`` restarting at 0 for every example and no ``attention_mask``; transformers reads
the restarts only when the model runs without a KV cache (``config.use_cache=False``, as the training core loads
it: with a cache, ``masking_utils._preprocess_mask_arguments`` skips the packed-sequence detection):

- ``flattened``: the micro batch is one row (transformers' ``DataCollatorWithFlattening``); flash-attn's varlen
  kernel reads the boundaries from ``position_ids`` (``modeling_flash_attention_utils._is_packed_sequence``, which
  needs batch size 1), so attention costs Σ lᵢ² over the examples.
- ``row-per-block``: one row per block, padded to the longest block of the micro batch; ``masking_utils.
  find_packed_sequence_indices`` turns the restarts into a block-diagonal causal mask (sdpa, eager), so attention
  costs b × s² like padded batches, not (b·s)² as one flattened row would.

Checked in transformers 5.23 by tests/integration/test_packing_attention.py (a packed forward equals the separate
forwards, loss and gradients, for sdpa and eager on the tiny Llama).
"""


def packed_layout(attention_impl: str) -> PackedLayout | None:
    """How packed micro batches are laid out for ``attention_impl``, or None where it cannot keep examples apart.

    None (an implementation outside :data:`PACKED_LAYOUTS`) means the training core falls back to padded batches.
    """
    return PACKED_LAYOUTS.get(attention_impl)


def best_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Pack items of ``lengths`` into bins of ``capacity`` by best-fit decreasing; return each bin's item indices.

    Best-fit decreasing (Johnson 1973, "Near-optimal bin packing algorithms", MIT thesis; at most 11/9 OPT + 4
    bins, Johnson et al. 1974, SIAM J. Comput. 3(4)): take the items longest first and put each into the open bin
    whose free space is smallest but still fits it, or into a new bin. The same strategy as
    multipack (axolotl) and TRL's ``bfd`` packing.

    Deterministic: equal lengths are taken in index order, and among bins with the same free space the one opened
    first is chosen, so the same lengths always give the same bins (a resumed run sees the same blocks).

    Cost: O(n log n) for the sort, and per item a binary search over the distinct free-space values (at most
    ``capacity + 1`` of them) plus a heap operation: O(n log n + n log capacity) comparisons, and list inserts that
    move at most ``capacity`` machine words each.

    Args:
        lengths: tokens of each item (n items), each in 1..capacity.
        capacity: tokens per bin (``seq_len``), at least 1.

    Returns:
        Bins in the order they were opened; each is the item indices it holds, ascending. Every index appears in
        exactly one bin and each bin's lengths sum to at most ``capacity``.

    Raises:
        ValueError: ``capacity`` < 1, or a length outside 1..capacity (truncate long items first).
    """
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1, got {capacity}")
    for index, length in enumerate(lengths):
        if not 1 <= length <= capacity:
            raise ValueError(f"item {index} has length {length}, outside 1..{capacity}")
    bins: list[list[int]] = []
    by_free: dict[int, list[int]] = {}  # free tokens → heap of the bins with that much free space
    free_values: list[int] = []  # sorted distinct keys of by_free
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        length = lengths[index]
        position = bisect.bisect_left(free_values, length)
        if position == len(free_values):
            chosen, free = len(bins), capacity
            bins.append([])
        else:
            free = free_values[position]
            chosen = heapq.heappop(by_free[free])
            if not by_free[free]:
                del by_free[free]
                free_values.pop(position)
        bins[chosen].append(index)
        left = free - length
        if left not in by_free:
            by_free[left] = []
            bisect.insort(free_values, left)
        heapq.heappush(by_free[left], chosen)
    return [sorted(members) for members in bins]


def packing_efficiency(lengths: Sequence[int], bins: Sequence[Sequence[int]], capacity: int) -> float:
    """Real tokens / block capacity: Σ lengths / (number of bins × ``capacity``), in 0..1 (1.0 for no bins).

    Args:
        lengths: tokens of each item.
        bins: item indices per bin (from :func:`best_fit_decreasing`).
        capacity: tokens per bin.
    """
    if not bins:
        return 1.0
    return sum(lengths[i] for members in bins for i in members) / (len(bins) * capacity)
