"""Run one training step of one micro batch on the fake model, under the live-bytes tracker.

The step is the Trainer's (``transformers.Trainer.training_step`` → ``compute_loss`` → ``backward``, then
``optimizer.step``): forward with labels (transformers' ``ForCausalLMLoss``: logits upcast to fp32),
or the chunked loss of :mod:`autotune.trainer.chunked_loss` through the same head-input capture as
``ChunkedLossTrainer``, or the ``native`` loss (cross-entropy in the logits dtype on a shifted
contiguous copy, seed 001's trainer). Mixed precision runs under autocast in the compute dtype.

Optimizer: ``adamw`` is ``torch.optim.AdamW`` as ``Trainer.create_optimizer`` builds it (two parameter
groups, weight decay off for biases and norms) with ``foreach=True``, the default PyTorch picks when every
parameter is on a CUDA device (``torch/optim/optimizer.py`` ``_default_to_fused_or_foreach``); on the CPU it
would pick the for-loop. The bitsandbytes 8-bit optimizers cannot run on fake tensors: their state is
allocated as ``Optimizer8bit.init_state`` does (``bitsandbytes/optim/optimizer.py``: parameters with fewer
than ``min_8bit_size`` = 4096 elements keep two fp32 moments; others two uint8 moments, one fp32 absmax per
256-element block each, and the shared 256-entry fp32 quantization map), and the update kernel
(``optimizer_update_8bit_blockwise``) works in place. The paged variant allocates its two moments with
``F.get_paged`` (``cudaMallocManaged``): unified memory outside PyTorch's caching allocator, so
``torch.cuda.max_memory_allocated`` does not count it (parameters of at least 100,000 elements; smaller
ones stay on the allocator); the trace reports those bytes as ``paged_optimizer_bytes``, outside the
allocated peak. torchao's stochastically rounded AdamW (``bf16_stochastic_rounding``) compiles its step, which fake
tensors cannot run: its state is allocated as ``_AdamBase._new_buffer`` makes it (``zeros_like`` of the parameter for
each moment: no block quantization at ``block_size`` inf) and its fused kernel updates in place, with no temporary.

Activation offloading (``activation_offloading``) pushes the core's hooks around each decoder layer
(``trainer.activation_offload.offload_layer_activations``, the same rule for what stays): the pack hook moves a saved
tensor to the meta device, which the tracker does not count (it left the GPU), and the unpack hook makes a new one of
the same shape in the backward (it came back).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F

from autotune.schemas.setting import TrainingSetting
from autotune.trace.tracker import LiveBytesTracker
from autotune.trainer.chunked_loss import IGNORE_INDEX, capture_head_input, chunked_loss_sum, final_logit_softcap

MIN_8BIT_SIZE = 4096
"""Parameters with fewer elements keep 32-bit state in bitsandbytes' 8-bit optimizers (``min_8bit_size``)."""
EIGHT_BIT_BLOCK = 256
"""Elements per absmax block of bitsandbytes' block-wise 8-bit optimizer state."""
PAGED_MIN_NUMEL = 100_000
"""Paged optimizers page only state buffers of parameters with at least this many elements (``get_state_buffer``)."""


def traced_chunked_loss(
    hidden_states: torch.Tensor, head: torch.nn.Linear, labels: torch.Tensor, softcap: float | None
) -> torch.Tensor:
    """``chunked_causal_lm_loss`` without its data-dependent row selection, for fake tensors.

    The trace batch is filled, so every position but the last of each sequence has a target: the selected
    rows are b·(s − 1), gathered into a new (rows, h) tensor as the boolean indexing of the real function
    does; then the same chunked, checkpointed sum (:func:`chunked_loss_sum`).
    """
    batch, seq_len, hidden_size = hidden_states.shape
    rows = batch * (seq_len - 1)
    shift_labels = F.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:].reshape(-1)
    index = torch.arange(rows)
    hidden = hidden_states.reshape(-1, hidden_size).index_select(0, index)
    total = chunked_loss_sum(hidden, head.weight, head.bias, shift_labels.index_select(0, index), softcap=softcap)
    return total / rows


def native_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy in the logits' dtype on a shifted contiguous copy (no fp32 upcast)."""
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    return F.cross_entropy(
        shift_logits.view(-1, shift_logits.shape[-1]), shift_labels.view(-1), ignore_index=IGNORE_INDEX
    )


@contextmanager
def _recompute_marker(tracker: LiveBytesTracker) -> Iterator[None]:
    """While active, births inside any module forward during backward count as recomputation."""
    depth = [0]

    def pre(module: torch.nn.Module, args: Any) -> None:
        depth[0] += 1
        tracker.recomputing = tracker.current_phase == "backward"

    def post(module: torch.nn.Module, args: Any, output: Any) -> None:
        depth[0] -= 1
        tracker.recomputing = tracker.current_phase == "backward" and depth[0] > 0

    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(pre),
        # always_call: a non-reentrant checkpoint stops its recomputation by raising inside the module forward
        # once the last saved tensor is recomputed; the post hook must still close the module.
        torch.nn.modules.module.register_module_forward_hook(post, always_call=True),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        tracker.recomputing = False


def forward_loss(
    model: torch.nn.Module, setting: TrainingSetting, tracker: LiveBytesTracker, input_ids: torch.Tensor
) -> torch.Tensor:
    """Forward of one micro batch and its loss.

    Births from the output head on are tagged 'loss', and the first backward births until the head's input receives its
    gradient too.
    """
    wrapper: Any = model
    inner: Any = wrapper.get_base_model() if hasattr(wrapper, "get_base_model") else wrapper
    head = inner.get_output_embeddings()

    def enter_loss(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        tracker.current_region = "loss"
        hidden = args[0]
        if hidden.requires_grad:
            hidden.register_hook(_leave_loss(tracker))

    handle = head.register_forward_pre_hook(enter_loss)
    try:
        if setting.loss_impl == "chunked":
            with capture_head_input(head) as capture:
                model(input_ids=input_ids)
            assert capture.hidden_states is not None
            return traced_chunked_loss(capture.hidden_states, head, input_ids, final_logit_softcap(inner))
        if setting.loss_impl == "native":
            return native_loss(model(input_ids=input_ids).logits, input_ids)
        loss: torch.Tensor = model(input_ids=input_ids, labels=input_ids).loss
        return loss
    finally:
        handle.remove()


def _leave_loss(tracker: LiveBytesTracker) -> Any:
    def hook(grad: torch.Tensor) -> None:
        tracker.current_region = "model"

    return hook


def build_optimizer(model: torch.nn.Module, setting: TrainingSetting) -> torch.optim.Optimizer | None:
    """``torch.optim.AdamW`` with the Trainer's two parameter groups (``foreach=True`` as on CUDA).

    Or None for the bitsandbytes 8-bit optimizers (their state is allocated by :func:`allocate_8bit_state`).
    """
    if setting.optimizer != "adamw":
        return None
    from transformers.trainer_pt_utils import get_parameter_names

    decay = set(get_parameter_names(model, [torch.nn.LayerNorm], ["bias", "layernorm", "rmsnorm"]))
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for name, p in named if name in decay and "bias" not in name], "weight_decay": 0.0},
        {"params": [p for name, p in named if not (name in decay and "bias" not in name)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=1e-4, foreach=True)


def allocate_8bit_state(model: torch.nn.Module, paged: bool) -> tuple[list[torch.Tensor], int]:
    """The bitsandbytes 8-bit AdamW state for every trainable parameter (``Optimizer8bit.init_state``).

    Returns the state tensors allocated through PyTorch and the bytes the paged variant puts in unified
    memory instead (``get_state_buffer``: paged only for parameters of at least ``PAGED_MIN_NUMEL`` elements).
    """
    state = [torch.empty(256, dtype=torch.float32) for _ in range(2)]  # the shared dynamic / udynamic maps
    paged_bytes = 0
    # the Trainer (and the core's optimizer in backward) keep the embeddings' states in 32 bits
    # (``GlobalOptimManager.register_module_override(module, "weight", {"optim_bits": 32})``)
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    for param in model.parameters():
        if not param.requires_grad:
            continue
        small = param.numel() < MIN_8BIT_SIZE or id(param) in embeddings
        dtype = torch.float32 if small else torch.uint8
        if paged and param.numel() >= PAGED_MIN_NUMEL:
            paged_bytes += 2 * param.numel() * torch.empty((), dtype=dtype).element_size()
        else:
            state += [torch.zeros_like(param, dtype=dtype) for _ in range(2)]
        if dtype == torch.uint8:
            blocks = -(-param.numel() // EIGHT_BIT_BLOCK)
            state += [torch.zeros(blocks, dtype=torch.float32) for _ in range(2)]
    return state, paged_bytes


def rounded_state(model: torch.nn.Module) -> list[torch.Tensor]:
    """The moments of torchao's ``_AdamW``: two ``zeros_like`` of every trainable parameter (module docstring)."""
    return [torch.zeros_like(p) for p in model.parameters() if p.requires_grad for _ in range(2)]


def _traced_pack(tensor: torch.Tensor) -> Any:
    from autotune.trainer.activation_offload import kept_on_device

    return tensor if kept_on_device(tensor) else tensor.to("meta")


def _traced_unpack(packed: torch.Tensor) -> torch.Tensor:
    if packed.device.type != "meta":
        return packed
    return torch.empty(packed.shape, dtype=packed.dtype, device="cpu")


def run_step(
    model: torch.nn.Module,
    setting: TrainingSetting,
    tracker: LiveBytesTracker,
    input_ids: torch.Tensor,
    autocast_dtype: torch.dtype | None,
) -> dict[str, Any]:
    """Forward, backward and one optimizer step under ``tracker``; returns the state needed to label storages.

    With ``setting.grad_accum > 1`` the traced micro-step is one after the first of its accumulation window:
    the gradients of the earlier micro-steps are alive from its start.

    Returns a dict with ``saved`` (storage indices alive at the end of forward), ``gradients`` and
    ``optimizer states`` (indices of each).
    """
    in_backward = setting.optimizer_in_backward
    rounding = setting.bf16_stochastic_rounding
    optimizer = None if in_backward or rounding else build_optimizer(model, setting)
    autocast = torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype is not None else nullcontext()
    if in_backward:  # the states exist from the start (steady state) and each hook steps one parameter
        states, paged_bytes, handles = in_backward_steps(model, setting)
        optimizer_states = {tracker.register(t, "optimizer states") for t in states}
    if setting.grad_accum > 1:
        # A micro-step after the first of an accumulation window starts with every trainable parameter's
        # gradient alive; autograd's AccumulateGrad then adds each new gradient into it in place and frees the
        # new one (torch/csrc/autograd/functions/accumulate_grad.h, ``accumulateGrad``). Trace that steady state.
        for param in model.parameters():
            if param.requires_grad:
                param.grad = torch.zeros_like(param)
                tracker.register(param.grad, "gradients")
    offload = []
    if setting.activation_offloading:
        from autotune.trainer.activation_offload import offload_layer_activations

        offload = offload_layer_activations(model, _traced_pack, _traced_unpack)
    with _recompute_marker(tracker):
        tracker.start_phase("forward")
        with autocast:
            loss = forward_loss(model, setting, tracker, input_ids)
        tracker.register(loss)
        saved = tracker.live_indices()
        tracker.start_phase("backward")
        tracker.current_region = "loss"
        loss.backward()
        del loss
        tracker.current_region = "model"
    for handle in offload:
        handle.remove()
    gradients = {tracker.register(p.grad, "gradients") for p in model.parameters() if p.grad is not None}
    tracker.start_phase("optimizer step")
    if in_backward:
        for handle in handles:
            handle.remove()
    elif rounding:
        states, paged_bytes = rounded_state(model), 0
    elif optimizer is not None:
        paged_bytes = 0
        optimizer.step()
        states = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    else:
        states, paged_bytes = allocate_8bit_state(model, paged=setting.optimizer.startswith("paged"))
    if not in_backward:
        optimizer_states = {tracker.register(t, "optimizer states") for t in states}
    traced = {
        "saved": saved,
        "gradients": gradients,
        "optimizer states": optimizer_states,
        "paged_optimizer_bytes": paged_bytes,
        "keep": states,
    }
    return {**traced, "states_in_steady_phases": True} if in_backward else traced


def in_backward_steps(model: torch.nn.Module, setting: TrainingSetting) -> tuple[list[torch.Tensor], int, list[Any]]:
    """The optimizer in backward (``trainer.in_backward``): states made up front, one step per parameter in a hook.

    ``adamw``: one ``torch.optim.AdamW`` per parameter (the for-loop kernel, as one tensor takes), its moments
    created before the forward as a later step finds them; the hook steps it and frees the gradient. 8-bit: the state
    of :func:`allocate_8bit_state` (updated in place by the real kernel, no temporary); the hook frees the gradient.

    Returns:
        (state tensors, bytes the paged variant keeps in unified memory, the hook handles to remove).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    optimizers: dict[torch.Tensor, torch.optim.Optimizer] = {}
    if setting.bf16_stochastic_rounding:  # updated in place by torchao's fused kernel
        states, paged_bytes = rounded_state(model), 0
    elif setting.optimizer != "adamw":
        states, paged_bytes = allocate_8bit_state(model, paged=setting.optimizer.startswith("paged"))
    else:
        states, paged_bytes = [], 0
        for param in params:
            optimizer = torch.optim.AdamW([param], lr=1e-4, foreach=False)
            moments = {"exp_avg": torch.zeros_like(param), "exp_avg_sq": torch.zeros_like(param)}
            optimizer.state[param] = {"step": torch.tensor(0.0), **moments}
            states += list(moments.values())
            optimizers[param] = optimizer

    def step(param: torch.Tensor) -> None:
        if param in optimizers:
            optimizers[param].step()
        param.grad = None

    return states, paged_bytes, [param.register_post_accumulate_grad_hook(step) for param in params]
