"""Activation offloading to host memory (``activation_offloading``): each decoder layer's saved tensors on the host.

PyTorch's saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``; tutorial "Hooks for saved tensors"): a
pack hook runs when autograd saves a tensor for the backward and an unpack hook when the backward needs it. The pair
here is ``torch.autograd.graph.save_on_cpu(pin_memory=True)``'s (torch 2.13 ``autograd/graph.py``: a pinned host
buffer, ``copy_(non_blocking=True)`` out, ``.to(device, non_blocking=True)`` back) with torchtune's rule for what
stays (``torchtune.training._activation_offload.OffloadActivations``: parameters, and tensors under
``MIN_OFFLOAD_BYTES``, are not copied: a weight saved by a linear would otherwise cross the link every micro-step).
torchtune's ``enable_activation_offloading`` (recipe option) wraps the whole model and keeps its output layer's
tensors (``NoOpManager``); here the hooks are pushed around each decoder layer's forward (a forward pre-hook enters
them, a forward hook leaves them, ``always_call``), so the embedding, the final norm and the loss keep their tensors
on the GPU as torchtune's output layer does. The copies run on the current (compute) stream. On the CPU the copy is a
plain host copy: the same values, so the same loss as without the lever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from autotune.errors import ConfigError

MIN_OFFLOAD_BYTES = 1024
"""Saved tensors smaller than this stay on the GPU (torchtune ``OffloadActivations(min_offload_size=1024)``)."""

Packed = Any
"""What a pack hook returns: the tensor itself (kept) or ``(its device, its host copy)``."""


def kept_on_device(tensor: torch.Tensor) -> bool:
    """True for the saved tensors the offload leaves where they are: parameters and tensors under 1 KiB."""
    return isinstance(tensor, torch.nn.Parameter) or tensor.numel() * tensor.element_size() < MIN_OFFLOAD_BYTES


def pack_to_host(tensor: torch.Tensor) -> Packed:
    """``save_on_cpu(pin_memory=True)``'s pack: a (pinned, from CUDA) host copy and the device to return to."""
    if kept_on_device(tensor):
        return tensor
    pinned = tensor.is_cuda
    packed = torch.empty(tensor.size(), dtype=tensor.dtype, layout=tensor.layout, pin_memory=pinned)
    packed.copy_(tensor, non_blocking=pinned)
    return tensor.device, packed


def unpack_from_host(packed: Packed) -> torch.Tensor:
    """``save_on_cpu``'s unpack: the host copy back on its device (non-blocking from pinned memory)."""
    if isinstance(packed, torch.Tensor):
        return packed
    device, tensor = packed
    moved: torch.Tensor = tensor.to(device, non_blocking=tensor.is_pinned())
    return moved


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's decoder layers: transformers' ``GradientCheckpointingLayer`` modules (5.x decoder layers)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [module for module in model.modules() if isinstance(module, GradientCheckpointingLayer)]


def offload_layer_activations(
    model: torch.nn.Module,
    pack: Callable[[torch.Tensor], Packed] = pack_to_host,
    unpack: Callable[[Packed], torch.Tensor] = unpack_from_host,
) -> list[RemovableHandle]:
    """Push ``pack`` / ``unpack`` as saved-tensor hooks around every decoder layer's forward (module docstring).

    ``pack`` / ``unpack``: the host copy and its return (default); ``autotune trace`` passes its fake-tensor pair.

    Returns:
        The forward hook handles (remove them to stop offloading).

    Raises:
        ConfigError: the model has no transformers decoder layer to hook.
    """
    layers = decoder_layers(model)
    if not layers:
        raise ConfigError(
            "activation_offloading found no decoder layer in the model: --set activation_offloading=false"
        )
    handles: list[RemovableHandle] = []
    for layer in layers:
        hooks = torch.autograd.graph.saved_tensors_hooks(pack, unpack)

        def enter(module: torch.nn.Module, args: Any, hooks: Any = hooks) -> None:
            hooks.__enter__()

        def leave(module: torch.nn.Module, args: Any, output: Any, hooks: Any = hooks) -> None:
            hooks.__exit__(None, None, None)

        handles.append(layer.register_forward_pre_hook(enter))
        handles.append(layer.register_forward_hook(leave, always_call=True))
    return handles
