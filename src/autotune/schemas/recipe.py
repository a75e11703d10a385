"""Training hyperparameters by method: learning rate, schedule, warm-up, weight decay, gradient clipping.

The plan file records them (:attr:`autotune.schemas.plan.PlanFile.training`), ``autotune launch`` prints them and
the training core runs them; ``launch --learning-rate`` / ``--warmup-ratio`` override a value for one run. They do
not change memory or speed, so the planner does not search them: each method gets the field's recipe.

Sources of the defaults (the recipes practitioners run):

- Full fine-tuning, learning rate 2e-5: torchtune ``recipes/configs/llama3_1/8B_full.yaml`` (``optimizer.lr:
  2e-5``) and axolotl ``examples/llama-3/fft-8b.yaml`` (``learning_rate: 2e-5``). A LoRA-sized rate (2e-4) makes the
  loss of a full fine-tune jump (autotune's own H100 run at 5e9464c: 12.585 → 19.015 after one step).
- LoRA / QLoRA, learning rate 2e-4: axolotl ``examples/llama-3/lora-8b.yaml`` / ``qlora.yml`` (``learning_rate:
  0.0002``) and Unsloth's Llama-3 notebooks (``learning_rate = 2e-4``); torchtune's LoRA configs use 3e-4. The QLoRA
  paper (Dettmers et al. 2023, Appendix B) uses 2e-4 for 7B–13B models.
- Cosine decay after a linear warm-up over 3 % of the steps: axolotl's examples (``lr_scheduler: cosine``) and the
  QLoRA paper's constant-after-warm-up ratio 0.03 (``warmup_ratio 0.03`` in its ``qlora.py``).
- Weight decay 0.0 for full fine-tuning (axolotl ``fft-8b.yaml``: ``weight_decay: 0.0``) and 0.01 for adapters
  (torchtune's LoRA configs ``weight_decay: 0.01``; Unsloth's notebooks 0.01).
- Gradient clipping at norm 1.0: transformers' ``TrainingArguments.max_grad_norm`` default, torchtune's
  ``clip_grad_norm: 1.0`` in the LoRA configs.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from autotune.schemas._base import FrozenModel

LrScheduler = Literal["cosine", "linear", "constant_with_warmup"]

FULL_LEARNING_RATE: Final = 2e-5
"""Peak learning rate of full fine-tuning (torchtune ``llama3_1/8B_full.yaml``; axolotl ``fft-8b.yaml``)."""
ADAPTER_LEARNING_RATE: Final = 2e-4
"""Peak learning rate of LoRA and QLoRA (axolotl ``lora-8b.yaml``; Unsloth; QLoRA paper Appendix B)."""
WARMUP_RATIO: Final = 0.03
"""Share of the optimizer steps spent in the linear warm-up (QLoRA's ``qlora.py``; axolotl's examples)."""


class TrainingRecipe(FrozenModel):
    """The optimisation hyperparameters a run trains with (none of them changes memory or step time)."""

    learning_rate: float = Field(gt=0, le=1, description="Peak learning rate.")
    lr_scheduler: LrScheduler = Field(
        default="cosine", description="Learning-rate schedule after the warm-up (transformers lr_scheduler_type)."
    )
    warmup_ratio: float = Field(
        default=WARMUP_RATIO, ge=0, lt=1, description="Fraction of the optimizer steps spent warming up (linear)."
    )
    weight_decay: float = Field(default=0.0, ge=0, le=1, description="Decoupled weight decay (AdamW).")
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient clipping norm.")
    source: str = Field(default="", description="The recipe the values follow (for the reader; not used).")

    def overridden(self, learning_rate: float | None, warmup_ratio: float | None) -> TrainingRecipe:
        """The recipe a run trains with: ``--learning-rate`` / ``--warmup-ratio`` replace the plan's values.

        None = not given. One rule for the training core and the line ``autotune launch`` prints.
        """
        given = {"learning_rate": learning_rate, "warmup_ratio": warmup_ratio}
        return self.model_copy(update={name: value for name, value in given.items() if value is not None})


def default_recipe(method: str) -> TrainingRecipe:
    """The recipe a ``method`` (full / lora / qlora) trains with unless the user names other values.

    Values and their sources are in this module's docstring.
    """
    if method == "full":
        return TrainingRecipe(
            learning_rate=FULL_LEARNING_RATE,
            weight_decay=0.0,
            source="full fine-tuning: torchtune llama3_1/8B_full.yaml lr 2e-5; axolotl fft-8b.yaml",
        )
    return TrainingRecipe(
        learning_rate=ADAPTER_LEARNING_RATE,
        weight_decay=0.01,
        source="LoRA/QLoRA: axolotl lora-8b.yaml / Unsloth lr 2e-4; torchtune LoRA configs weight decay 0.01",
    )
