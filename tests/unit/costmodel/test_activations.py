"""The MLP activation's saved tensors: the cost model's table against torch's own accounting of transformers'
``ACT2FN``, and a composed activation (Phi-2's ``gelu_new``) in the analytic peak against the traced step."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from autotune.costmodel.activations import COMPOSED_ACTIVATION_SAVED_TENSORS  # noqa: E402
from autotune.costmodel.memory import predict_memory  # noqa: E402
from autotune.profiles.catalog import resolve_gpu  # noqa: E402
from autotune.profiles.hf_config import model_spec_from_config  # noqa: E402
from autotune.schemas.calibration import CostCoefficients  # noqa: E402
from autotune.schemas.hardware import ClusterSpec  # noqa: E402
from autotune.schemas.setting import TrainingSetting  # noqa: E402
from autotune.schemas.workload import Workload  # noqa: E402
from autotune.trace import trace_training_step  # noqa: E402

PHI2 = Path(__file__).parent.parent.parent / "fixtures" / "configs" / "phi-2"


def _saved_tensors(name: str) -> float:
    """Bytes ACT2FN[name] saves for backward, in units of its (non-leaf, bf16) input."""
    from transformers.activations import ACT2FN

    x = torch.randn(64, 512, dtype=torch.bfloat16, requires_grad=True) * 1.0
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        ACT2FN[name](x)
    return sum(saved.values()) / (x.numel() * x.element_size())


@pytest.mark.parametrize("name", ["silu", "gelu", "gelu_pytorch_tanh", "relu", *COMPOSED_ACTIVATION_SAVED_TENSORS])
def test_the_table_counts_what_autograd_saves(name: str) -> None:
    assert _saved_tensors(name) == COMPOSED_ACTIVATION_SAVED_TENSORS.get(name, 1)


def test_phi2_gelu_new_activations_agree_with_the_trace() -> None:
    """Phi-2 (LayerNorm, parallel attention + MLP, gelu_new, residual dropout 0.1) at tiny widths, pure bf16, no
    checkpointing: its MLP saves four I-wide tensors for the activation, not one (31 % under the trace at full size
    before). At full size (head_dim 80) the trace holds 2 bytes per token per hidden unit and layer more than the model
    (−3.6 %), a copy of the attention output for the dense projection that CPU SDPA makes (not explained for CUDA)."""
    tiny = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 2, "vocab_size": 256}
    tiny |= {"num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 64}
    spec = model_spec_from_config(PHI2).model_copy(update=tiny)
    cluster = ClusterSpec(gpu=resolve_gpu("h100")[0])
    setting = TrainingSetting(method="full", precision="bf16", micro_batch_size=8, grad_ckpt=False)
    traced = trace_training_step(spec, setting, 256, cluster)
    predicted = predict_memory(spec, setting, cluster, Workload(seq_len=256, global_batch_size=8), CostCoefficients())
    assert predicted.peak_phase == "forward/backward"
    error = (predicted.peak_allocated_bytes - traced.cuda_peak_allocated_bytes) / traced.cuda_peak_allocated_bytes
    assert abs(error) <= 0.03, (
        f"analytic {predicted.peak_allocated_bytes:.0f} B vs traced {traced.cuda_peak_allocated_bytes} B"
    )


class _LPLayerNorm(torch.nn.LayerNorm):
    """llm-foundry's ``LPLayerNorm`` (``llmfoundry/models/layers/norm.py``, v0.3.0): input, weight and bias cast to the
    autocast dtype, then ``F.layer_norm`` with autocast disabled (the device's autocast dtype on the CPU here)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = torch.get_autocast_dtype(x.device.type)

        def down(t: torch.Tensor | None) -> torch.Tensor | None:
            return t.to(dtype) if t is not None and torch.is_autocast_enabled(x.device.type) else t

        downcast_x, downcast_weight, downcast_bias = down(x), down(self.weight), down(self.bias)  # before disabling
        with torch.autocast(device_type=x.device.type, enabled=False):
            return torch.nn.functional.layer_norm(downcast_x, self.normalized_shape, downcast_weight, downcast_bias)


@pytest.mark.parametrize("residual", [torch.bfloat16, torch.float32], ids=["bf16-residual", "fp32-residual"])
def test_low_precision_layernorm_saves_what_the_model_counts(residual: torch.dtype) -> None:
    """An LPLayerNorm feeding a trained projection under bf16 autocast: what autograd saves of (tokens, h)-sized
    tensors, per element, is ``norm_saved_bytes`` (input and output in bf16, no autocast cast for the projection)."""
    from autotune.costmodel.activations import autocast_input_casts, norm_saved_bytes
    from autotune.costmodel.precision import DtypeBytes

    hidden, tokens = 256, 128
    spec = model_spec_from_config(PHI2).model_copy(update={"norm_type": "low_precision_layernorm", "fused_qkv": True})
    residual_bytes = 2.0 if residual == torch.bfloat16 else 4.0
    dtypes = DtypeBytes(4.0, 4.0, 8.0, 4.0, 2.0, residual_bytes, "bf16", True, 4.0)
    norm, projection = _LPLayerNorm(hidden), torch.nn.Linear(hidden, 3 * hidden)
    x = torch.randn(tokens, hidden, dtype=residual, requires_grad=True) * 1.0  # a non-leaf, like a residual sum
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.numel() == tokens * hidden:
            saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        projection(norm(x)).sum()
    assert autocast_input_casts(spec, dtypes) == 0
    assert sum(saved.values()) / (tokens * hidden) == norm_saved_bytes(
        spec, dtypes, frozen=False, cast_for_projections=False
    )
