"""The core's activation offloading (``trainer/activation_offload.py``): what moves, what stays, the same gradients."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from autotune.errors import ConfigError
from autotune.trainer.activation_offload import (
    MIN_OFFLOAD_BYTES,
    kept_on_device,
    offload_layer_activations,
    pack_to_host,
    unpack_from_host,
)


def test_parameters_and_small_tensors_stay() -> None:
    import torch

    assert kept_on_device(torch.nn.Parameter(torch.zeros(1024)))
    assert kept_on_device(torch.zeros(MIN_OFFLOAD_BYTES // 4 - 1))
    assert not kept_on_device(torch.zeros(MIN_OFFLOAD_BYTES // 4))


def test_pack_copies_and_unpack_returns_the_values() -> None:
    import torch

    tensor = torch.randn(64, 64)
    packed = pack_to_host(tensor)
    device, copy = packed
    assert device == tensor.device and copy.data_ptr() != tensor.data_ptr()
    assert torch.equal(unpack_from_host(packed), tensor)
    weight = torch.nn.Parameter(torch.randn(64, 64))
    assert pack_to_host(weight) is weight and unpack_from_host(weight) is weight


def test_a_model_without_decoder_layers_is_refused() -> None:
    import torch

    with pytest.raises(ConfigError, match="no decoder layer"):
        offload_layer_activations(torch.nn.Linear(4, 4))


def test_each_decoder_layer_saves_through_the_hooks_and_the_gradients_match() -> None:
    """A tiny Llama: the hooks see every layer's large saved tensors (not the weights), gradients are unchanged."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    ids = torch.randint(0, 128, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    plain = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    packed: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> object:
        result = pack_to_host(tensor)
        if not isinstance(result, torch.Tensor):
            packed.append(tensor)
        return result

    handles = offload_layer_activations(model, pack, unpack_from_host)
    model(input_ids=ids, labels=ids).loss.backward()
    for handle in handles:
        handle.remove()
    assert packed and not any(isinstance(t, torch.nn.Parameter) for t in packed)
    for name, p in model.named_parameters():
        assert torch.equal(p.grad, plain[name]), name
