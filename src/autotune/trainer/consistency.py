"""The plan agrees with what is trained: the loaded model's architecture, and the plan a checkpoint was trained with.

Both checks run before training starts, so a plan computed for another model (hidden size 4096
planned, 64 loaded) or a plan edited inside a run directory (LoRA rank, sequence length) is refused
with one line instead of training and reporting success, or failing late inside the Trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.errors import ConfigError
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_changes import resume_plan_error
from autotune.trainer.checkpoints import read_manifest

ARCHITECTURE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
"""ModelSpec fields compared with the loaded ``model.config`` (the ones every cost-model term scales with)."""


def check_model_matches_plan(config: Any, plan: PlanFile) -> None:
    """Refuse a loaded model whose config differs from the architecture the plan was computed for.

    ``config`` is the loaded model's ``transformers.PretrainedConfig``; for multimodal configs the
    text part (``text_config``) is compared. A field the config does not have is not compared.

    Raises:
        ConfigError: one line listing the differing fields (plan → loaded).
    """
    config = getattr(config, "text_config", None) or config
    differences = []
    for name in ARCHITECTURE_FIELDS:
        loaded = getattr(config, name, None)
        planned = getattr(plan.model, name)
        if isinstance(loaded, int) and loaded != planned:
            differences.append(f"{name} {planned} planned, {loaded} loaded")
    if differences:
        raise ConfigError(
            f"the model loaded from {plan.model_source} is not the one the plan was computed for "
            f"({'; '.join(differences)}): plan it again with `autotune plan {plan.model_source}`"
        )


def check_resume_plan(checkpoint: Path, plan: PlanFile) -> None:
    """Refuse to resume ``checkpoint`` with a plan that differs from the one that trained it.

    Raises:
        ConfigError: one line listing the changed fields (checkpoint → plan now).
    """
    recorded = read_manifest(checkpoint).get("plan")
    if not isinstance(recorded, dict):
        return
    error = resume_plan_error(recorded, plan, checkpoint.name)
    if error:
        raise ConfigError(error)
