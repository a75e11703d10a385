"""The memory levers (optimizer in backward, paged 8-bit states, chunked loss for full fine-tuning): analytic vs trace.

Each cell traces one training step of a tiny Llama-3 (``test_agreement.tiny`` widths, 2 layers) on fake tensors and
compares ``predict_memory``'s peak allocated bytes with the traced CUDA peak, within 3 % of the traced activations
and states (the rule of ``test_agreement.py``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from autotune.costmodel.memory import predict_memory
from autotune.profiles.catalog import resolve_gpu
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload
from autotune.trace import trace_training_step

from .test_agreement import SEQ_LEN, tiny


def _spec() -> ModelSpec:
    return tiny("llama3-8b")


def _cluster() -> ClusterSpec:
    gpu, _ = resolve_gpu("rtx-4090")
    return ClusterSpec(gpu=gpu, host_memory_gib_per_node=48)


LEVER_CELLS = [
    {"optimizer": "adamw", "optimizer_in_backward": True, "loss_impl": "chunked"},
    {"optimizer": "adamw", "optimizer_in_backward": True, "loss_impl": "fp32-upcast", "grad_ckpt": False},
    {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": True, "loss_impl": "chunked"},
    {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": False, "loss_impl": "chunked"},
    {"optimizer": "adamw-8bit", "optimizer_in_backward": True, "loss_impl": "fp32-upcast"},
    {"optimizer": "adamw", "bf16_stochastic_rounding": True, "loss_impl": "chunked"},
    {"optimizer": "adamw", "bf16_stochastic_rounding": True, "loss_impl": "fp32-upcast", "grad_ckpt": False},
    {"optimizer": "adamw", "bf16_stochastic_rounding": True, "optimizer_in_backward": True, "loss_impl": "chunked"},
    {"optimizer": "adamw", "activation_offloading": True, "loss_impl": "chunked", "grad_ckpt": False},
    {"optimizer": "adamw", "activation_offloading": True, "loss_impl": "fp32-upcast", "grad_ckpt": False},
    {"optimizer": "adamw-8bit", "activation_offloading": True, "optimizer_in_backward": True, "grad_ckpt": False},
]


@pytest.mark.parametrize("fields", LEVER_CELLS, ids=lambda f: "-".join(str(v) for v in f.values()))
def test_levers_agree_with_the_trace(fields: dict[str, object]) -> None:
    """Full fine-tuning, pure bf16, micro batch 2: the analytic peak is the traced one within 3 %."""
    spec, cluster = _spec(), _cluster()
    setting = TrainingSetting(method="full", micro_batch_size=2, **{"grad_ckpt": True, **fields})
    traced = trace_training_step(spec, setting, SEQ_LEN, cluster)
    predicted = predict_memory(
        spec, setting, cluster, Workload(seq_len=SEQ_LEN, global_batch_size=2), CostCoefficients()
    )
    states_and_activations = traced.cuda_peak_allocated_bytes - traced.cuda_workspace_bytes
    error = (predicted.peak_allocated_bytes - traced.cuda_peak_allocated_bytes) / states_and_activations
    assert abs(error) <= 0.03, (
        f"analytic {predicted.peak_allocated_bytes:.0f} B ({predicted.peak_phase}) vs traced "
        f"{traced.cuda_peak_allocated_bytes} B ({traced.peak_phase}): {error:+.2%}"
    )
    assert predicted.paged_optimizer_bytes == pytest.approx(traced.paged_optimizer_bytes, rel=0.03)


def test_in_backward_holds_no_gradient_buffer() -> None:
    """The traced backward with the lever never holds every gradient: its backward peak is below the standard one's.

    The standard backward ends with every parameter's bf16 gradient alive (2 bytes × trainable parameters); the
    lever's frees each as it steps it (keeping at most the largest tensor's gradient and AdamW temporary).
    """
    spec, cluster = _spec().model_copy(update={"vocab_size": 2048}), _cluster()  # the gradients, not the logits, peak
    standard = TrainingSetting(method="full", micro_batch_size=2, loss_impl="chunked")
    lever = standard.model_copy(update={"optimizer_in_backward": True})
    plain = trace_training_step(spec, standard, 16, cluster)  # 16 tokens: the gradients outweigh the activations
    in_backward = trace_training_step(spec, lever, 16, cluster)
    gradients = 2 * plain.trainable_params  # bf16 gradients of every parameter
    assert plain.phases[1].name == in_backward.phases[1].name == "backward"
    # the lever still holds the largest tensor's gradient and its AdamW temporary (the embedding: a quarter here)
    assert in_backward.phases[1].peak_cuda_bytes < plain.phases[1].peak_cuda_bytes - gradients / 4
