"""The optimizer step inside the backward (``trainer/in_backward.py``), in-process on a tiny ``nn.Module``.

The contract (the module docstring): a post-accumulate-grad hook steps each trainable parameter with its own optimizer
of the TrainingArguments' kind, at the learning rate the Trainer's schedule set on the facade, with the weight-decay
split, and frees the gradient; the facade's state dict carries the per-parameter states so a resume continues. The
reference is a plain ``torch.optim.AdamW`` step over a copy of the module, with the same two parameter groups:
the same per-tensor arithmetic, so the two agree to fp32 rounding.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch
from transformers import TrainingArguments

from autotune.trainer.in_backward import InBackwardMixin, InBackwardOptimizer, in_backward_optimizer

DECAY = {"0.weight", "2.weight"}
"""The weights take weight decay, the biases do not (the Trainer's split)."""


def _model() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _param(model: torch.nn.Module, name: str) -> torch.nn.Parameter:
    return dict(model.named_parameters())[name]


def _args(tmp_path: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path), optim="adamw_torch", learning_rate=1e-2, weight_decay=0.1, use_cpu=True
    )


def _loss(model: torch.nn.Module, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(5, 4, generator=generator)
    return model(inputs).pow(2).mean()


def _reference(model: torch.nn.Module, args: TrainingArguments) -> torch.optim.AdamW:
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if n in DECAY], "weight_decay": args.weight_decay},
        {"params": [p for n, p in named if n not in DECAY], "weight_decay": 0.0},
    ]
    betas = (args.adam_beta1, args.adam_beta2)
    return torch.optim.AdamW(groups, lr=args.learning_rate, betas=betas, eps=args.adam_epsilon, foreach=False)


def _assert_same_weights(left: torch.nn.Module, right: torch.nn.Module) -> None:
    for (name, a), (_, b) in zip(left.named_parameters(), right.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


def test_the_backward_steps_every_parameter_as_adamw_does_at_the_scheduled_rate_and_frees_its_grad(
    tmp_path: Path,
) -> None:
    args = _args(tmp_path)
    model, reference = _model(), _model()
    facade = in_backward_optimizer(model, args, DECAY)
    plain = _reference(reference, args)
    before = copy.deepcopy(model.state_dict())
    for step, lr in enumerate([1e-2, 3e-3, 5e-4]):  # the Trainer's schedule sets the facade's rate each step
        facade.param_groups[0]["lr"] = lr
        for group in plain.param_groups:
            group["lr"] = lr
        _loss(model, step).backward()
        assert all(p.grad is None for p in model.parameters())  # stepped and freed inside the backward
        facade.step()  # the Trainer's step and zero_grad: no-ops
        facade.zero_grad()
        _loss(reference, step).backward()
        plain.step()
        plain.zero_grad(set_to_none=True)
    _assert_same_weights(model, reference)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained


def test_a_frozen_parameter_gets_no_optimizer_and_stays(tmp_path: Path) -> None:
    model = _model()
    weight = _param(model, "0.weight")
    weight.requires_grad_(False)
    frozen = weight.detach().clone()
    facade = in_backward_optimizer(model, _args(tmp_path), DECAY)
    assert weight not in facade.optimizer_dict
    assert len(facade.optimizer_dict) == 3
    _loss(model, 0).backward()
    assert torch.equal(weight, frozen)


def test_a_resume_from_the_state_dict_continues_the_uninterrupted_run(tmp_path: Path) -> None:
    """Two steps, save, load into a fresh model and optimizer, a third step: equal to three steps without a stop
    (AdamW's moments and step counts are in the per-parameter states; without them the third step differs)."""
    args = _args(tmp_path)
    model = _model()
    facade = in_backward_optimizer(model, args, DECAY)
    for step in range(2):
        _loss(model, step).backward()
    saved_weights, saved_state = copy.deepcopy(model.state_dict()), copy.deepcopy(facade.state_dict())
    _loss(model, 2).backward()

    resumed = _model()
    resumed.load_state_dict(saved_weights)
    fresh = in_backward_optimizer(resumed, args, DECAY)
    fresh.load_state_dict(saved_state)
    _loss(resumed, 2).backward()
    _assert_same_weights(resumed, model)

    restarted = _model()
    restarted.load_state_dict(saved_weights)
    in_backward_optimizer(restarted, args, DECAY)  # no state loaded: AdamW starts over
    _loss(restarted, 2).backward()
    assert not torch.allclose(_param(restarted, "0.weight"), _param(model, "0.weight"))


def test_the_mixin_builds_the_optimizer_once_with_the_trainers_decay_names(tmp_path: Path) -> None:
    asked: list[torch.nn.Module] = []
    model = _model()

    class FakeTrainer(InBackwardMixin):
        def __init__(self) -> None:
            self.args, self.model, self.optimizer = _args(tmp_path), model, None
            self.optimizer_cls_and_kwargs = None  # the Trainer's own attribute: None unless an optimizer class is given

        def get_decay_parameter_names(self, target: torch.nn.Module) -> list[str]:
            asked.append(target)
            return ["0.weight"]

    trainer = FakeTrainer()
    first = trainer.create_optimizer()
    assert isinstance(first, InBackwardOptimizer)
    assert trainer.create_optimizer() is first and asked == [model]
    decays = {name: first.optimizer_dict[p].param_groups[0]["weight_decay"] for name, p in model.named_parameters()}
    assert decays == {"0.weight": 0.1, "0.bias": 0.0, "2.weight": 0.0, "2.bias": 0.0}
    assert first.param_groups[0]["lr"] == pytest.approx(1e-2)  # the schedule starts from the arguments' rate
