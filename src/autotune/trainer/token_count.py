"""Tokens seen, padding left out, for packed batches too (the run's logged and reported tokens/s).

transformers' ``Trainer`` counts ``state.num_input_tokens_seen`` with ``include_num_input_tokens_seen="non_padding"``
(``trainer.hf_args``) as ``attention_mask.sum()``, or, without a mask, the ``input_ids`` that are not the pad token
(``Trainer._track_num_input_tokens``, transformers 5.x). Packed batches carry no mask (the attention reads
``position_ids``), so where the pad token is the eos token every example's eos was left out of the count. The mixin
asks the packed collator instead (:meth:`autotune.trainer.packed.PackedCollator.real_tokens`); padded batches keep
the Trainer's count (their ``attention_mask`` marks every real token).
"""

from __future__ import annotations

from typing import Any

import torch

from autotune.trainer.packed import PackedCollator


class RealTokenCountMixin:
    """Put before a ``Trainer`` class: ``class T(RealTokenCountMixin, Trainer)``.

    Overrides ``_track_num_input_tokens(inputs)`` (called once per micro batch after its backward, on the batch as
    the data loader gave it) for the core's packed collator; gathers the count over ranks as the Trainer does.
    """

    def _track_num_input_tokens(self, inputs: dict[str, torch.Tensor]) -> None:
        trainer: Any = self
        collator = trainer.data_collator
        if not isinstance(collator, PackedCollator) or trainer.args.include_num_input_tokens_seen != "non_padding":
            super()._track_num_input_tokens(inputs)  # type: ignore[misc]
            return
        count = collator.real_tokens(inputs).to(device=trainer.args.device, dtype=torch.int64)
        trainer.state.num_input_tokens_seen += trainer.accelerator.gather(count).sum().item()
