"""eager-legacy attention (transformers <= 4.29 LlamaAttention): the cost model's per-score bytes and extra
traffic against torch's own accounting of the copied 4.28 code, and the training core refusing it."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

import autotune.cli.app as cli_app  # noqa: E402
from autotune.costmodel.activations import layer_activation_bytes_per_token  # noqa: E402
from autotune.costmodel.calibration import default_coefficients  # noqa: E402
from autotune.costmodel.memory import predict_memory  # noqa: E402
from autotune.costmodel.params import lora_layout  # noqa: E402
from autotune.costmodel.precision import dtype_bytes  # noqa: E402
from autotune.planner.request import PlanRequest  # noqa: E402
from autotune.planner.space import candidates  # noqa: E402
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile  # noqa: E402
from autotune.schemas.hardware import ClusterSpec  # noqa: E402
from autotune.schemas.setting import (  # noqa: E402
    MEASUREMENT_ONLY_ATTENTION_IMPLS,
    TrainingSetting,
    attention_run_error,
)
from autotune.schemas.workload import Workload  # noqa: E402
from autotune.trace.tracker import LiveBytesTracker  # noqa: E402

Attention = Callable[..., "torch.Tensor"]


def legacy_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """transformers 4.28.1 ``models/llama/modeling_llama.py`` ``LlamaAttention.forward``, lines 214–232
    (shape checks dropped)."""
    attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
    attn_weights = attn_weights + mask
    attn_weights = torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min))
    attn_weights = torch.nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(attn_weights, v)


def eager_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Today's ``eager_attention_forward`` (transformers 4.5x ``modeling_llama.py``), same heads for q and k/v."""
    attn_weights = torch.matmul(q, k.transpose(2, 3)) * q.shape[-1] ** -0.5
    attn_weights = attn_weights + mask
    attn_weights = torch.nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
    attn_weights = torch.nn.functional.dropout(attn_weights, p=0.0, training=True)
    return torch.matmul(attn_weights, v)


B, HEADS, SEQ, HEAD_DIM = 2, 2, 256, 8
SCORES = B * HEADS * SEQ * SEQ


def _inputs(mask_dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(B, HEADS, SEQ, HEAD_DIM, generator=generator, dtype=torch.bfloat16).requires_grad_()
        for _ in range(3)
    )
    return q, k, v, torch.zeros(B, 1, SEQ, SEQ, dtype=mask_dtype)


def saved_score_bytes_per_score(attention: Attention, mask_dtype: torch.dtype, autocast: bool) -> float:
    """Bytes per score of the score-sized tensors autograd saves (``saved_tensors_hooks``, one count per storage)."""
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)
    with hooks, torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        attention(*_inputs(mask_dtype))
    return sum(nbytes for nbytes in saved.values() if nbytes >= SCORES) / SCORES


def model_score_bytes(attention_impl: str, precision: str, sharding: str) -> float:
    """The cost model's saved bytes per score (``attention_scores`` per token / (heads × seq))."""
    model = resolve_model_profile("llama-13b")
    setting = TrainingSetting(method="full", precision=precision, sharding=sharding, attention_impl=attention_impl)
    dtypes = dtype_bytes(setting, resolve_gpu("a100-80gb")[0])
    layer = layer_activation_bytes_per_token(
        model, setting, dtypes, float(SEQ), flash_attention=False, lora=lora_layout(model, setting)
    )
    return layer.attention_scores / (model.num_attention_heads * SEQ)


@pytest.mark.parametrize(
    ("precision", "sharding", "mask_dtype", "autocast"),
    [
        ("bf16-mixed", "zero3-offload", torch.bfloat16, False),  # seed 003: DeepSpeed's bf16 engine, no autocast
        ("bf16-mixed", "ddp", torch.float32, True),  # torch AMP with fp32 weights: an fp32 mask
    ],
)
@pytest.mark.parametrize(
    ("attention_impl", "attention"), [("eager-legacy", legacy_attention), ("eager", eager_attention)]
)
def test_saved_bytes_per_score_match_torch(
    attention_impl: str,
    attention: Attention,
    precision: str,
    sharding: str,
    mask_dtype: torch.dtype,
    autocast: bool,
) -> None:
    measured = saved_score_bytes_per_score(attention, mask_dtype, autocast)
    assert model_score_bytes(attention_impl, precision, sharding) == pytest.approx(measured)


def test_legacy_keeps_one_more_score_copy_than_eager() -> None:
    legacy = saved_score_bytes_per_score(legacy_attention, torch.bfloat16, autocast=False)
    eager = saved_score_bytes_per_score(eager_attention, torch.bfloat16, autocast=False)
    assert (legacy, eager) == (8.0, 6.0)


def _traced(attention: Attention) -> LiveBytesTracker:
    tracker = LiveBytesTracker()
    q, k, v, mask = _inputs(torch.bfloat16)
    with tracker:
        tracker.start_phase("forward")
        out = attention(q, k, v, mask)
        grad = torch.ones_like(out)
        tracker.start_phase("backward")
        out.backward(grad)
    return tracker


def test_backward_peak_is_the_saved_set_plus_the_softmax_workspace() -> None:
    """Backward peaks at the softmax stage: the saved scores less the bf16 probabilities, plus the fp32 gradient in
    and out (``backward_workspace_bytes_per_token``: 2·4 − 2 bytes per score), i.e. 14 bytes per score for legacy and
    12 for eager; q/k/v-sized tensors add under 0.5 byte per score at these shapes."""
    for impl, attention in (("eager-legacy", legacy_attention), ("eager", eager_attention)):
        peak = _traced(attention).peaks["backward"].bytes / SCORES
        expected = model_score_bytes(impl, "bf16-mixed", "zero3") + 2 * 4.0 - 2.0
        assert expected <= peak <= expected + 0.5, (impl, peak, expected)


def test_legacy_raises_the_seed_003_activation_peak() -> None:
    model = resolve_model_profile("llama-13b")
    cluster = ClusterSpec(gpu=resolve_gpu("a100-80gb")[0], num_gpus_per_node=4)
    workload = Workload(seq_len=2048, global_batch_size=64)
    peaks = {}
    for impl in ("eager", "eager-legacy"):
        setting = TrainingSetting(
            method="full", micro_batch_size=8, grad_accum=2, sharding="zero3-offload", precision="bf16-mixed",
            attention_impl=impl,
        )  # fmt: skip
        peaks[impl] = predict_memory(model, setting, cluster, workload, default_coefficients()).peak_allocated_bytes
    # 2 more bytes per score at the backward peak: heads × s² per sequence, 8 sequences
    assert peaks["eager-legacy"] - peaks["eager"] == pytest.approx(2 * 8 * model.num_attention_heads * 2048**2)


def test_run_error_names_only_the_legacy_value() -> None:
    assert attention_run_error("eager") is None and attention_run_error("sdpa") is None
    error = attention_run_error("eager-legacy")
    assert error is not None and "sdpa or eager" in error


@pytest.mark.parametrize("impl", list(MEASUREMENT_ONLY_ATTENTION_IMPLS))
def test_trace_refuses_it_in_one_line(capsys: pytest.CaptureFixture[str], impl: str) -> None:
    """Every measurement-only implementation (eager-legacy, flash-triton) is refused in one line."""
    with pytest.raises(SystemExit) as exit_:
        cli_app.main(["trace", "llama-13b", "--method", "full", "--attention-impl", impl])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"attention_impl={impl}" in err


def test_the_planner_never_offers_it() -> None:
    request = PlanRequest(
        model=resolve_model_profile("llama-13b"),
        model_source="catalog",
        cluster=ClusterSpec(gpu=resolve_gpu("a100-80gb")[0], num_gpus_per_node=4),
        workload=Workload(seq_len=2048, global_batch_size=64),
    )
    offered = {setting.attention_impl for setting in candidates(request)}
    assert offered and not offered & set(MEASUREMENT_ONLY_ATTENTION_IMPLS)


class _ScoreTraffic:
    """Kernels and bytes per score of the ops that read or write a score-sized tensor (views excluded)."""

    VIEWS = frozenset({"aten::view", "aten::t", "aten::transpose", "aten::expand", "aten::_unsafe_view",
                       "aten::detach", "aten::alias", "aten::lift_fresh", "aten::unsqueeze", "aten::squeeze",
                       "aten::permute", "aten::slice", "aten::as_strided"})  # fmt: skip

    def __init__(self) -> None:
        self.kernels = 0
        self.bytes = 0

    def mode(self):  # type: ignore[no-untyped-def]
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                out = func(*args, **(kwargs or {}))
                if func._schema.name in counter.VIEWS:
                    return out
                tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
                touched = sum(t.numel() * t.element_size() for t in tensors if t.numel() >= SCORES)
                if touched:
                    counter.kernels += 1
                    counter.bytes += touched
                return out

        return Mode()


def _traffic(attention: Attention) -> tuple[_ScoreTraffic, _ScoreTraffic]:
    forward, backward = _ScoreTraffic(), _ScoreTraffic()
    with forward.mode():
        out = attention(*_inputs(torch.bfloat16))
    with backward.mode():
        out.sum().backward()
    return forward, backward


def test_the_clamps_time_terms_are_the_traffic_of_the_copied_code() -> None:
    from autotune.costmodel.dispatch import LEGACY_CLAMP

    (legacy_fwd, legacy_bwd), (eager_fwd, eager_bwd) = _traffic(legacy_attention), _traffic(eager_attention)
    assert legacy_fwd.kernels - eager_fwd.kernels == LEGACY_CLAMP.forward_kernels
    assert legacy_bwd.kernels - eager_bwd.kernels == LEGACY_CLAMP.backward_kernels
    assert (legacy_fwd.bytes - eager_fwd.bytes) / SCORES == LEGACY_CLAMP.forward_bytes_per_score
    assert (legacy_bwd.bytes - eager_bwd.bytes) / SCORES == LEGACY_CLAMP.backward_bytes_per_score
