"""Where a CPU fake-tensor run would take a different code path than the CUDA run, take the CUDA one.

Two switches, each active only inside :func:`cuda_code_paths`:

* Dropout — ``at::dropout`` uses the fused ``native_dropout`` kernel only for CUDA / XPU tensors
  (``aten/src/ATen/native/Dropout.cpp``, ``is_fused_kernel_acceptable``): it saves a 1-byte bool mask. On the
  CPU it builds the noise in the input's dtype (``_dropout_impl``: ``empty_like(input).bernoulli_()``), and
  autograd saves that 4-byte fp32 noise for LoRA's fp32 dropout. ``F.dropout`` is routed to
  ``torch.native_dropout`` so the trace saves what CUDA saves.
* Attention masks — with no padding, transformers drops the materialised causal mask and calls SDPA with
  ``is_causal=True`` (``masking_utils._ignore_causal_mask_sdpa``), which also lets grouped-query attention run
  with ``enable_gqa`` instead of ``repeat_kv`` (``integrations/sdpa_attention.py``, ``use_gqa_in_sdpa``). It
  refuses to skip when ``is_tracing`` says a tensor is fake, so a fake run would materialise an s×s mask and
  save k and v repeated to every query head. The trace batch is filled (no padding, position ids 0..s-1 in
  every row), so ``is_tracing`` is answered as for real tensors and ``find_packed_sequence_indices`` returns
  what it returns for such position ids (None: no packed sub-sequences).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F


def _native_dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
    """``F.dropout`` as CUDA runs it: ``native_dropout`` (bool mask saved), identity when not training."""
    if not training or p == 0.0:
        return input
    output: torch.Tensor = torch.native_dropout(input, p, training)[0]
    return output


@contextmanager
def cuda_code_paths() -> Iterator[None]:
    """Within the block, dropout and transformers' mask skipping follow their CUDA paths (module docstring)."""
    from transformers import masking_utils

    names = ("is_tracing", "find_packed_sequence_indices")
    saved: dict[str, Any] = {name: getattr(masking_utils, name) for name in names}
    dropout = F.dropout
    setattr(F, "dropout", _native_dropout)  # noqa: B010  (patched for the trace only, restored below)
    setattr(masking_utils, "is_tracing", lambda tensor=None: False)  # noqa: B010
    # position ids 0..s-1 in every row: no packed sub-sequences (what the real function finds for them).
    setattr(masking_utils, "find_packed_sequence_indices", lambda position_ids: None)  # noqa: B010
    try:
        yield
    finally:
        setattr(F, "dropout", dropout)  # noqa: B010
        for name, value in saved.items():
            setattr(masking_utils, name, value)
