"""Plans built from literal values for the launcher tests (prediction numbers are fixture values)."""

from __future__ import annotations

from typing import Any

from autotune.schemas.estimate import Estimate
from autotune.schemas.model import ModelSpec
from autotune.schemas.plan import ClusterChoice, PlanFile
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

LLAMA_8B = ModelSpec(
    key="llama3-8b",
    hf_repo_id="meta-llama/Meta-Llama-3-8B",
    model_type="llama",
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=128256,
    max_position_embeddings=8192,
    decoder_layer_class="LlamaDecoderLayer",
    source="test fixture (shapes of meta-llama/Meta-Llama-3-8B config.json)",
)


def estimate(*, fits: bool = True, peak_gib: float = 20.0, gpu_gib: float = 24.0, **extra: Any) -> Estimate:
    """A fixture prediction (not a cost-model result)."""
    values: dict[str, Any] = {
        "peak_memory_gib": peak_gib,
        "peak_reserved_gib": peak_gib + 1.0,
        "memory_breakdown_gib": {"weights": peak_gib / 2, "activations": peak_gib / 2},
        "peak_phase": "forward/backward",
        "cuda_context_gib": 0.5,
        "memory_uncertainty_gib": 1.0,
        "gpu_memory_gib": gpu_gib,
        "fits": fits,
        "micro_step_time_s": 0.5,
        "optimizer_time_s": 0.1,
        "step_time_s": 4.1,
        "tokens_per_s": 4000.0,
        "mfu": 0.4,
        "time_uncertainty_fraction": 0.2,
    }
    values.update(extra)
    return Estimate(**values)


def make_plan(
    *,
    sharding: str = "none",
    gpus: int = 1,
    nodes: int = 1,
    gpu: str = "rtx-4090",
    model: ModelSpec = LLAMA_8B,
    workload: dict[str, Any] | None = None,
    **setting: Any,
) -> PlanFile:
    """A plan with ``sharding`` on ``nodes`` × ``gpus``; the global batch is micro × accum × world size."""
    values: dict[str, Any] = {"method": "lora", "micro_batch_size": 2, "grad_accum": 4, "sharding": sharding}
    values.update(setting)
    training = TrainingSetting(**values)
    world_size = gpus * nodes
    workload_values: dict[str, Any] = {
        "seq_len": 2048,
        "global_batch_size": training.micro_batch_size * training.grad_accum * world_size,
    }
    workload_values.update(workload or {})
    return PlanFile(
        autotune_version="0.1.0",
        model=model,
        model_source="meta-llama/Meta-Llama-3-8B",
        cluster=ClusterChoice(gpu=gpu, num_gpus_per_node=gpus, num_nodes=nodes),
        workload=Workload(**workload_values),
        setting=training,
        prediction=estimate(),
    )
