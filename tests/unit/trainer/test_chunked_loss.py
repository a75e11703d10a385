"""The chunked cross-entropy as a function of tensors (``trainer/chunked_loss.py``), without a model.

The contract (:func:`chunked_causal_lm_loss`): equal, value and gradients, to the next-token cross-entropy of the
full logits ``hidden @ weight.T + bias`` in fp32 (labels shifted by one, -100 ignored, the mean over the kept targets
or the sum over ``num_items_in_batch``), whatever the chunk size; Gemma 2's soft-capping applied to the logits.
The reference is that definition written with ``F.cross_entropy`` on the whole (b·s, V) logits. The equality on real
models and the Trainer's reduction are tests/integration/test_chunked_loss_fn.py's (in-process, on the tiny Llama).
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch
import torch.nn.functional as F

from autotune.trainer.chunked_loss import chunked_causal_lm_loss

B, S, H, V = 2, 7, 5, 11


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, S, H, generator=generator, requires_grad=True)
    weight = torch.randn(V, H, generator=generator, requires_grad=True)
    bias = torch.randn(V, generator=generator, requires_grad=True)
    labels = torch.randint(0, V, (B, S), generator=generator)
    labels[0, :3] = -100  # a prompt
    labels[1, -2:] = -100  # padding
    return hidden, weight, bias, labels


def _reference(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, labels: torch.Tensor, softcap: float | None = None
) -> torch.Tensor:
    logits = (hidden @ weight.T + bias).float()[:, :-1]  # position t predicts t + 1; the last predicts nothing
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    return F.cross_entropy(logits.reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)


def _grads(loss: torch.Tensor, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad(loss, tensors)


@pytest.mark.parametrize("chunk", [1, 3, 8, 1024])
@pytest.mark.parametrize("softcap", [None, 2.0])
def test_value_and_gradients_equal_the_full_logits_loss_whatever_the_chunk(chunk: int, softcap: float | None) -> None:
    hidden, weight, bias, labels = _inputs()
    loss = chunked_causal_lm_loss(hidden, weight, labels, chunk_tokens=chunk, softcap=softcap, lm_head_bias=bias)
    expected = _reference(hidden, weight, bias, labels, softcap)
    torch.testing.assert_close(loss, expected)
    for got, want in zip(_grads(loss, (hidden, weight, bias)), _grads(expected, (hidden, weight, bias)), strict=True):
        torch.testing.assert_close(got, want)


def test_num_items_in_batch_divides_the_sum_instead_of_the_mean() -> None:
    hidden, weight, bias, labels = _inputs(1)
    targets = int((labels[:, 1:] != -100).sum())
    mean = chunked_causal_lm_loss(hidden, weight, labels, chunk_tokens=4, lm_head_bias=bias)
    summed = chunked_causal_lm_loss(hidden, weight, labels, 4, num_items_in_batch=torch.tensor(40), lm_head_bias=bias)
    torch.testing.assert_close(summed, mean * targets / 40)


def test_a_batch_with_nothing_to_learn_gives_zero_loss_and_zero_gradients_not_nan() -> None:
    hidden, weight, _, labels = _inputs(2)
    loss = chunked_causal_lm_loss(hidden, weight, torch.full_like(labels, -100), num_items_in_batch=1)
    assert loss.item() == 0.0
    hidden_grad, weight_grad = _grads(loss, (hidden, weight))
    assert not hidden_grad.any() and not weight_grad.any()


@pytest.mark.parametrize(("chunk", "labels_shape"), [(0, (B, S)), (4, (B, S - 1))])
def test_bad_arguments_are_refused(chunk: int, labels_shape: tuple[int, int]) -> None:
    hidden, weight, _, _ = _inputs()
    with pytest.raises(ValueError):
        chunked_causal_lm_loss(hidden, weight, torch.zeros(labels_shape, dtype=torch.long), chunk_tokens=chunk)
