"""The optimizer step inside the backward (``optimizer_in_backward``): one optimizer per parameter, stepped by a hook.

PyTorch's documented pattern (tutorial "How to save memory by fusing the optimizer step into the backward pass"):
``Tensor.register_post_accumulate_grad_hook`` runs once a parameter's gradient is accumulated; the hook steps that
parameter's own optimizer and frees the gradient (``zero_grad(set_to_none=True)``), so no gradient buffer of the
whole model exists. torchtune's ``optimizer_in_bwd`` does the same (``OptimizerInBackwardWrapper``).

The Trainer keeps its loop: it is handed a no-op optimizer (:class:`InBackwardOptimizer`, the pattern of
transformers' ``LayerWiseDummyOptimizer`` for the GaLore layer-wise optimizers, ``trainer_pt_utils.py``) whose
learning rate the Trainer's schedule sets, and each hook applies that rate. The per-parameter optimizers are the
plan's (``Trainer.get_optimizer_cls_and_kwargs`` of the TrainingArguments' ``optim``) with the Trainer's weight-decay
split, and under a bitsandbytes 8-bit optimizer the embeddings keep 32-bit states as ``Trainer.create_optimizer``
registers them. Gradient clipping is off (no step ever sees every gradient: ``hf_args`` sets ``max_grad_norm`` 0);
gradient accumulation is refused by the setting (``optimizer_in_backward_error``). The per-parameter optimizers'
states are saved in the Trainer's checkpoints (:meth:`InBackwardOptimizer.state_dict`), so ``--resume`` continues.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer, TrainingArguments


class InBackwardOptimizer(torch.optim.Optimizer):
    """The Trainer's optimizer under the lever: its step and zero_grad do nothing, the hooks step the parameters.

    It holds one parameter group whose learning rate the Trainer's schedule sets each step (``get_scheduler`` on it
    builds the usual ``LambdaLR``, so the logged learning rate is the one applied); each hook copies that rate into
    the parameter's own optimizer before stepping it (the per-parameter schedules of transformers' layer-wise path do
    not run under torch 2.13: ``LayerWiseDummyScheduler.get_lr`` returns one rate per parameter for its one group).

    Attributes:
        optimizer_dict: each trainable parameter's optimizer.
    """

    def __init__(self, optimizer_dict: dict[torch.Tensor, torch.optim.Optimizer], lr: float) -> None:
        """Hold ``optimizer_dict``; one placeholder parameter carries the scheduled learning rate ``lr``."""
        self.optimizer_dict = optimizer_dict
        super().__init__([torch.zeros(1)], {"lr": lr})

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing: each hook frees its parameter's gradient after the step."""

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        """Nothing: the parameters were stepped in the backward."""

    def state_dict(self) -> dict[str, Any]:
        """The per-parameter optimizers' states in parameter order (and this optimizer's own group)."""
        return {**super().state_dict(), "in_backward": [o.state_dict() for o in self.optimizer_dict.values()]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s states into the per-parameter optimizers."""
        inner = state_dict.get("in_backward", [])
        for optimizer, state in zip(self.optimizer_dict.values(), inner, strict=True):
            optimizer.load_state_dict(state)
        super().load_state_dict({key: value for key, value in state_dict.items() if key != "in_backward"})


def in_backward_optimizer(
    model: torch.nn.Module,
    args: TrainingArguments,
    decay_names: set[str],
    cls_and_kwargs: tuple[Any, dict[str, Any]] | None = None,
) -> InBackwardOptimizer:
    """Per-parameter optimizers stepped by post-accumulate-grad hooks, behind :class:`InBackwardOptimizer`.

    Args:
        model: the model the Trainer trains (its trainable parameters get an optimizer and a hook each).
        args: the TrainingArguments (``optim``, learning rate, betas, weight decay).
        decay_names: parameter names that take weight decay (``Trainer.get_decay_parameter_names``).
        cls_and_kwargs: the Trainer's ``optimizer_cls_and_kwargs`` (torchao's rounding AdamW,
            :mod:`autotune.trainer.rounding`), or None for the TrainingArguments' ``optim``.

    Returns:
        The Trainer-facing optimizer; its ``optimizer_dict`` maps each trainable parameter to its optimizer.
    """
    optimizer_cls, kwargs = cls_and_kwargs or Trainer.get_optimizer_cls_and_kwargs(args, model)  # type: ignore[arg-type]
    kwargs = {key: value for key, value in kwargs.items() if key not in ("params", "model", "optimizer_dict")}
    _register_embedding_overrides(model, optimizer_cls, kwargs)
    optimizers: dict[torch.Tensor, torch.optim.Optimizer] = {}
    for name, trained in model.named_parameters():
        if not trained.requires_grad:
            continue
        decay = args.weight_decay if name in decay_names else 0.0
        optimizers[trained] = optimizer_cls([{"params": [trained], "weight_decay": decay}], **kwargs)
    facade = InBackwardOptimizer(optimizers, lr=args.learning_rate)

    def step(param: torch.Tensor) -> None:
        if param.grad is None:
            return
        optimizer = optimizers[param]
        lr = facade.param_groups[0]["lr"]  # the Trainer's schedule, as of this step
        for group in optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):  # torchao keeps it a tensor (trainer/rounding.py)
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for tensor in optimizers:
        tensor.register_post_accumulate_grad_hook(step)
    return facade


def _register_embedding_overrides(model: torch.nn.Module, optimizer_cls: Any, kwargs: dict[str, Any]) -> None:
    """32-bit states for the embeddings under a bitsandbytes 8-bit optimizer, as ``Trainer.create_optimizer`` does."""
    if "bitsandbytes" not in str(optimizer_cls) or kwargs.get("optim_bits") != 8:
        return
    import bitsandbytes

    manager = bitsandbytes.optim.GlobalOptimManager.get_instance()
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            manager.register_module_override(module, "weight", {"optim_bits": 32})


class InBackwardMixin:
    """A Trainer mixin whose ``create_optimizer`` builds :func:`in_backward_optimizer` (used by the core)."""

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        """The in-backward optimizer of the Trainer's model, built once."""
        trainer: Any = self
        if trainer.optimizer is None:
            target = model if model is not None else trainer.model
            decay = set(trainer.get_decay_parameter_names(target))
            trainer.optimizer = in_backward_optimizer(target, trainer.args, decay, trainer.optimizer_cls_and_kwargs)
        return trainer.optimizer


def in_backward_trainer_class(base: type[Trainer]) -> type[Trainer]:
    """``base`` with :class:`InBackwardMixin` in front (its ``create_optimizer`` wins)."""
    return type(f"InBackward{base.__name__}", (InBackwardMixin, base), {})
