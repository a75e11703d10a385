"""autotune.costmodel.dispatch: counted layer ops and the optimizer's dispatched calls."""

from __future__ import annotations

from autotune.costmodel.dispatch import layer_ops, optimizer_launches
from autotune.profiles.catalog import resolve_model_profile


def test_counted_layer_ops_frozen_base_skips_weight_gradient_gemms() -> None:
    model = resolve_model_profile("llama3-8b")
    full, frozen = layer_ops(model, trainable=True), layer_ops(model, trainable=False)
    assert full.forward_kernels == frozen.forward_kernels > 30
    assert full.backward_kernels > frozen.backward_kernels
    assert full.forward_bytes_per_token > 10 * model.hidden_size  # fp32 norms, RoPE, SiLU: many passes of h


def test_foreach_optimizer_dispatches_fewer_calls_than_per_tensor() -> None:
    foreach_calls, foreach_launches = optimizer_launches(448, foreach=True)
    per_tensor_calls, _ = optimizer_launches(448, foreach=False)
    assert foreach_calls < per_tensor_calls / 4  # foreach still reads each CPU step counter (.item())
    assert foreach_launches > foreach_calls  # one call launches a kernel per chunk of tensors
