"""What a run's training depends on in a plan (its fingerprint), and the fields two fingerprints differ in.

One rule for "is this the same plan?", shared by the launcher (``--resume`` refused before anything is printed or
written) and the training core (the checkpoint's manifest compared once more at start-up). Pure: no torch.
"""

from __future__ import annotations

from typing import Any, Final

from autotune.schemas.plan import PlanFile

MAX_CHANGES_SHOWN: Final[int] = 4
"""How many changed fields a refusal names before ``and N more``."""


def plan_fingerprint(plan: PlanFile) -> dict[str, Any]:
    """What a checkpoint's training depends on: the setting, sequence length, global batch, model shape, source.

    Returns:
        A JSON-ready dict (written into each checkpoint's manifest under ``plan``).
    """
    model = plan.model
    return {
        "setting": plan.setting.model_dump(mode="json"),
        "seq_len": plan.workload.seq_len,
        "global_batch_size": plan.workload.global_batch_size,
        "model": {
            "model_type": model.model_type,
            "hidden_size": model.hidden_size,
            "num_hidden_layers": model.num_hidden_layers,
            "vocab_size": model.vocab_size,
        },
        "model_source": plan.model_source,
    }


def plan_changes(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``['setting.lora_rank 16 → 8', ...]``: the leaves that differ between two fingerprints, sorted by path."""
    changes: list[str] = []

    def walk(old: Any, new: Any, where: str) -> None:
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new)):
                walk(old.get(key), new.get(key), f"{where}.{key}" if where else str(key))
        elif old != new:
            changes.append(f"{where} {old} → {new}")

    walk(recorded, current, "")
    return changes


def resume_plan_error(recorded: dict[str, Any], plan: PlanFile, trained_by: str) -> str | None:
    """The one-line refusal of ``--resume`` with a plan that differs from ``recorded``, or None when they agree.

    Args:
        recorded: the fingerprint the run was trained with (a checkpoint manifest's ``plan``, or
            :func:`plan_fingerprint` of the run directory's ``plan.yaml``).
        plan: the plan this launch would run.
        trained_by: what ``recorded`` comes from, for the message (``checkpoint-8``, ``plan.yaml``).
    """
    changes = plan_changes(recorded, plan_fingerprint(plan))
    if not changes:
        return None
    shown = "; ".join(changes[:MAX_CHANGES_SHOWN])
    more = f" and {len(changes) - MAX_CHANGES_SHOWN} more" if len(changes) > MAX_CHANGES_SHOWN else ""
    return (
        f"--resume: the plan differs from the one {trained_by} was trained with ({shown}{more}): "
        "restore that plan, or start a new run with another --output-dir"
    )
