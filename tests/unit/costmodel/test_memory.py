"""autotune.costmodel.memory: 8-bit Adam's 32-bit embedding states and the compiled backward's gradients."""

from __future__ import annotations

import pytest

from autotune.costmodel.memory import predict_memory
from autotune.costmodel.params import count_params
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

PRIORS = CostCoefficients()


LLAMA = resolve_model_profile("llama3-8b")


def _cluster(gpu: str, gpus: int = 1, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus, num_nodes=nodes, host_memory_gib_per_node=512)


def test_the_hf_trainer_keeps_the_embeddings_8_bit_adam_states_in_32_bits() -> None:
    """The core's compiled full run (adamw-8bit) measured 65.50 GiB; the embedding's fp32 moments are 2.9 GiB of the
    5.1 GiB the model missed (transformers' create_optimizer overrides nn.Embedding to optim_bits 32)."""
    cluster = _cluster("h100")
    workload = Workload(seq_len=2048, global_batch_size=1)

    def states(optimizer: str, method: str = "full") -> float:
        setting = TrainingSetting(method=method, optimizer=optimizer)  # type: ignore[arg-type]
        return predict_memory(LLAMA, setting, cluster, workload, PRIORS).breakdown_bytes.get("optimizer states", 0)

    embedding = LLAMA.vocab_size * LLAMA.hidden_size
    eight_bit = 2 * (1 + 4 / 256)
    total = count_params(LLAMA).total_params
    assert states("adamw-8bit") == pytest.approx((total - embedding) * eight_bit + embedding * 8.0)
    assert states("paged-adamw-8bit") < states("adamw-8bit")  # paged states: not in the allocated peak


def test_a_compiled_backward_holds_every_new_gradient_and_the_fp32_embedding_buffer() -> None:
    """AOTAutograd returns all gradients of the compiled backward before AccumulateGrad adds them; inductor's
    embedding backward accumulates in fp32. The core's compiled full run (mbs 1, 32 micro-steps) measured 65.50 GiB."""
    cluster = _cluster("h100")
    workload = Workload(seq_len=2048, global_batch_size=32)
    base = dict(method="full", micro_batch_size=1, grad_accum=32, grad_ckpt=False, optimizer="adamw-8bit")

    def memory(**changes: object) -> tuple[float, str, dict[str, float]]:
        setting = TrainingSetting(**{**base, **changes})  # type: ignore[arg-type]
        m = predict_memory(LLAMA, setting, cluster, workload, PRIORS)
        return m.peak_allocated_bytes, m.peak_phase, m.breakdown_bytes

    peak, phase, parts = memory(compile=True)
    gradients = count_params(LLAMA).total_params * 2.0
    assert phase == "end of compiled backward"
    assert parts["compiled backward gradients"] == parts["gradients"] == gradients
    assert parts["embedding gradient buffer"] == LLAMA.vocab_size * LLAMA.hidden_size * 4.0
    assert peak / 2**30 == pytest.approx(65.50, rel=0.03)
    eager_peak, eager_phase, eager_parts = memory(compile=False)
    assert eager_phase != "end of compiled backward" and "compiled backward gradients" not in eager_parts
    assert eager_peak < peak
    # LoRA: the embedding is frozen (no buffer) and the new gradients are the adapters' only
    _, _, lora_parts = memory(compile=True, method="lora", grad_ckpt=True)
    assert "embedding gradient buffer" not in lora_parts
    # DDP splits the compiled graph at its buckets: the phase is the single-GPU one only
    ddp = TrainingSetting(**{**base, "compile": True, "sharding": "ddp"})  # type: ignore[arg-type]
    two = _cluster("h100", gpus=2)
    assert predict_memory(LLAMA, ddp, two, workload, PRIORS).peak_phase != "end of compiled backward"
