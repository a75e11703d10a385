"""Which setting fields of a row move its prediction beyond what ``TrainingSetting.short()`` shows (issue 43).

``calibrate``'s row lines show ``short()`` (method, rank, micro batch × accumulation, checkpointing, compile,
sharding, optimizer, precision, chunked loss). A row's other fields — ``lora_dropout``, ``adapter_dtype``, the
attention implementation, the LoRA targets, ... — can move the outcome a lot; :func:`moving_fields` names each one
whose value is not the default and whose default would change the row's predicted time or peak memory.
"""

from __future__ import annotations

from pydantic import ValidationError

from autotune.calibration.cases import Case
from autotune.costmodel.estimate import estimate_setting
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.setting import TrainingSetting

SHOWN_BY_SHORT = frozenset(
    {"method", "lora_rank", "micro_batch_size", "grad_accum", "grad_ckpt", "compile", "sharding", "grad_sync"}
    | {"optimizer", "precision"}
)
"""Fields ``TrainingSetting.short()`` always writes (``loss_impl`` only when chunked, so it is tested here)."""


def _text(value: object) -> str:
    if isinstance(value, tuple | list):
        return ";".join(str(part) for part in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def moving_fields(case: Case, coefficients: CostCoefficients) -> list[str]:
    """'field value' for each non-default field outside :data:`SHOWN_BY_SHORT` that moves the prediction.

    A field moves it when the setting with that field at its default predicts another micro-step time or peak
    memory, or is not a valid setting at all (the field is then part of what makes the row what it is).
    """
    setting = case.measurement.setting
    workload = case.measurement.workload
    base = estimate_setting(case.model, case.cluster, workload, setting, coefficients)
    named = []
    for name, info in TrainingSetting.model_fields.items():
        value = getattr(setting, name)
        default = info.get_default(call_default_factory=True)
        if name in SHOWN_BY_SHORT or value == default:
            continue
        try:
            other = TrainingSetting.model_validate({**setting.model_dump(), name: default})
        except ValidationError:
            named.append(f"{name} {_text(value)}")
            continue
        moved = estimate_setting(case.model, case.cluster, workload, other, coefficients)
        if (moved.micro_step_time_s, moved.peak_memory_gib) != (base.micro_step_time_s, base.peak_memory_gib):
            named.append(f"{name} {_text(value)}")
    return named
