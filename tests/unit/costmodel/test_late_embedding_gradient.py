"""The input embedding's gradient, allocated after the first layer's working set (optimizer_memory)."""

from __future__ import annotations

import pytest

from autotune.costmodel.memory import predict_memory
from autotune.costmodel.params import count_params
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload


def _late_backward_gradients(model: str, **fields: object) -> tuple[float, float, float]:
    """(late-backward gradients, optimizer-step gradients, embedding parameters) of a full fine-tune on an H100."""
    spec = resolve_model_profile(model)
    gpu, _ = resolve_gpu("h100")
    setting = TrainingSetting(method="full", micro_batch_size=2, grad_ckpt=True, optimizer="paged-adamw-8bit", **fields)
    workload = Workload(seq_len=2048, global_batch_size=2 * setting.grad_accum)
    phases = predict_memory(spec, setting, ClusterSpec(gpu=gpu), workload, CostCoefficients()).phases_bytes
    late, step = phases["late backward"]["gradients"], phases["optimizer step"]["gradients"]
    return late, step, count_params(spec).embedding_params


def test_the_late_backward_holds_every_gradient_but_the_embeddings() -> None:
    """Llama-3-8B (untied), one micro-step: late backward = all gradients − the embedding's (2 bytes each, bf16)."""
    late, step, embedding = _late_backward_gradients("llama3-8b")
    assert step - late == pytest.approx(2 * embedding)


@pytest.mark.parametrize(("model", "fields"), [("llama3-8b", {"grad_accum": 2}), ("qwen2.5-0.5b", {})])
def test_an_embedding_gradient_already_alive_is_counted(model: str, fields: dict[str, object]) -> None:
    """Accumulation: it persists from the earlier micro-step; tied: the output head makes it, first in the backward."""
    late, step, _ = _late_backward_gradients(model, **fields)
    assert late == step
