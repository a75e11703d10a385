"""bf16 stochastic rounding (``bf16_stochastic_rounding``): torchao's AdamW rounds each pure-bf16 weight update.

torchao ``optim/README.md``, "Stochastic rounding for BF16 weight": ``from torchao.optim import _AdamW``;
``_AdamW(model_bf16.parameters(), bf16_stochastic_round=True)`` ("a clone of torch.optim.AdamW with extra features").
Its step (``torchao/optim/adam.py`` ``single_param_adam``, compiled per parameter) computes the AdamW update in fp32
and writes a bf16 weight rounded up with the probability of the fp32 bits bf16 drops (``quant_utils._fp32_to_bf16_sr``;
Zamirai et al. 2020, "Revisiting BFloat16 Training", arXiv:2010.06192), so updates below bf16's resolution are kept on
average instead of rounded away. Its moments keep the parameter's dtype (bf16), as torch's AdamW does.

The Trainer builds it from ``optimizer_cls_and_kwargs`` (its own parameter groups and weight decay split); the
optimizer in backward builds one per parameter from the same pair (:mod:`autotune.trainer.in_backward`). torchao keeps
the learning rate as a tensor; torch's schedulers ``fill_`` it (``lr_scheduler._update_param_group_val``). Refused
without torchao (:func:`autotune.schemas.setting.stochastic_rounding_run_error`).
"""

from __future__ import annotations

from typing import Any

from transformers import TrainingArguments

from autotune.errors import ConfigError
from autotune.schemas.setting import TrainingSetting, fp8_installed, stochastic_rounding_run_error


def check_rounding_runnable(setting: TrainingSetting) -> None:
    """Refuse planned stochastic rounding where torchao cannot be imported, before anything is written.

    Raises:
        ConfigError: one line from :func:`stochastic_rounding_run_error`.
    """
    error = stochastic_rounding_run_error(setting.bf16_stochastic_rounding, installed=fp8_installed())
    if error:
        raise ConfigError(error)


def rounded_optimizer(setting: TrainingSetting, args: TrainingArguments) -> tuple[type[Any], dict[str, Any]] | None:
    """(torchao ``_AdamW``, its keyword arguments) for the Trainer's ``optimizer_cls_and_kwargs``; None without it.

    The learning rate, betas and epsilon are the TrainingArguments' (as ``adamw_torch`` takes them); the weight decay
    comes with the Trainer's parameter groups.
    """
    if not setting.bf16_stochastic_rounding:
        return None
    from torchao.optim import _AdamW

    kwargs = {
        "lr": args.learning_rate,
        "betas": (args.adam_beta1, args.adam_beta2),
        "eps": args.adam_epsilon,
        "bf16_stochastic_round": True,
    }
    return _AdamW, kwargs
