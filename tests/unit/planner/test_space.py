"""The planner plans an attention implementation the training core can run for the model."""

from __future__ import annotations

from autotune.planner.request import PlanRequest
from autotune.planner.search import search
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import Workload


def _chosen_attention(model_key: str) -> str:
    model = resolve_model_profile(model_key)
    cluster = ClusterSpec(gpu=resolve_gpu("h100")[0])
    workload = Workload(seq_len=1024, global_batch_size=8)
    result = search(PlanRequest(model=model, model_source="catalog", cluster=cluster, workload=workload))
    assert result.best is not None
    return result.best.setting.attention_impl


def test_softcapped_attention_is_planned_eager() -> None:
    # transformers refuses SDPA for Gemma 2 (its logits are soft-capped): a plan saying sdpa could not launch.
    assert _chosen_attention("gemma2-2b") == "eager"


def test_other_models_keep_sdpa() -> None:
    assert _chosen_attention("llama3.2-1b") == "sdpa"
