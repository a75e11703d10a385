"""The traced training step (fake tensors) and the analytic memory model's agreement with it, on tiny configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run

pytest.importorskip("torch")
pytest.importorskip("peft")

from autotune.costmodel.memory import predict_memory
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload
from autotune.trace import build_traced_model, trace_training_step

FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "configs"
TINY = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 32064,
}
SEQ_LEN = 256


def tiny(key: str, **extra: object) -> ModelSpec:
    """A catalog model's architecture at tiny widths (same family, class and structure)."""
    return resolve_model_profile(key).model_copy(update={**TINY, **extra})


@pytest.fixture(scope="module")
def cluster() -> ClusterSpec:
    gpu, _ = resolve_gpu("h100")
    return ClusterSpec(gpu=gpu, host_memory_gib_per_node=160)


def test_categories_add_up_and_weights_are_the_parameters(cluster: ClusterSpec) -> None:
    spec = tiny("llama3-8b")
    report = trace_training_step(spec, TrainingSetting(method="full", grad_ckpt=False), SEQ_LEN, cluster)
    for phase in report.phases:
        assert sum(phase.categories_bytes.values()) == phase.peak_cuda_bytes
    # pure bf16 full fine-tuning: 2 bytes per parameter (each parameter its own 512 B-rounded storage)
    weights = report.phases[0].categories_bytes["weights"]
    assert 2 * report.total_params <= weights < 2 * report.total_params + 512 * 64
    step = report.phases[2]
    assert step.categories_bytes["gradients"] >= 2 * report.total_params
    assert step.categories_bytes["optimizer states"] >= 4 * report.total_params  # two bf16 moments
    assert report.phases[0].ops["matmul"].flops > 0
    assert report.phases[1].ops["matmul"].flops > report.phases[0].ops["matmul"].flops


def test_checkpointing_saves_less_and_recomputes(cluster: ClusterSpec) -> None:
    spec = tiny("llama3-8b")
    plain = trace_training_step(spec, TrainingSetting(grad_ckpt=False), SEQ_LEN, cluster)
    ckpt = trace_training_step(spec, TrainingSetting(grad_ckpt=True), SEQ_LEN, cluster)
    saved_plain = plain.phases[0].categories_bytes["saved activations"]
    saved_ckpt = ckpt.phases[0].categories_bytes["saved activations"]
    assert saved_ckpt < saved_plain / 3
    # backward re-runs each layer's forward matmuls
    assert ckpt.phases[1].ops["matmul"].count > plain.phases[1].ops["matmul"].count


def test_qlora_stand_in_stores_nf4_with_double_quant(cluster: ClusterSpec) -> None:
    spec = tiny("llama3-8b")
    lora = trace_training_step(spec, TrainingSetting(method="lora"), SEQ_LEN, cluster)
    qlora = trace_training_step(spec, TrainingSetting(method="qlora"), SEQ_LEN, cluster)
    linear_params = 2 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512)  # q, o, k, v, gate, up, down × 2 layers
    saved = lora.phases[0].categories_bytes["weights"] - qlora.phases[0].categories_bytes["weights"]
    # bf16 (2 B) → NF4 (0.5 B + constants ≈ 1/64 B): ~1.48 B saved per quantized parameter, up to 512 B rounding
    assert abs(saved - 1.48 * linear_params) < 0.03 * linear_params
    assert qlora.trainable_params == lora.trainable_params


def test_paged_optimizer_state_is_outside_the_allocated_peak(cluster: ClusterSpec) -> None:
    spec = tiny("llama3-8b", hidden_size=512, num_attention_heads=8, intermediate_size=1024)
    plain = trace_training_step(spec, TrainingSetting(method="full", optimizer="adamw-8bit"), SEQ_LEN, cluster)
    paged = trace_training_step(spec, TrainingSetting(method="full", optimizer="paged-adamw-8bit"), SEQ_LEN, cluster)
    assert plain.paged_optimizer_bytes == 0
    assert paged.paged_optimizer_bytes > 0
    moved = plain.phases[2].categories_bytes["optimizer states"] - paged.phases[2].categories_bytes["optimizer states"]
    assert moved == pytest.approx(paged.paged_optimizer_bytes, rel=0.01)


CASES = [
    ("llama3-8b", {}, "sdpa"),
    ("qwen2.5-7b", {}, "sdpa"),
    ("phi3-mini", {"num_key_value_heads": 4}, "sdpa"),
    ("gemma2-9b", {}, "eager"),
]


FAST_CELLS = [
    (CASES[0], "lora", True, "fp32-upcast"),
    (CASES[1], "full", False, "chunked"),
    (CASES[2], "qlora", False, "native"),
    (CASES[3], "full", False, "chunked"),
]
"""One cell per family in the inner loop, each method in at least one (with :data:`STAGE_CELLS`: Gemma 2 LoRA, Phi-3
QLoRA); the whole tiny matrix is ``slow`` (in-process torch traces, ~1.5 s each: ``pytest --all`` runs them)."""
STAGE_CELLS = [
    (CASES[-1], "lora", True, "chunked"),  # Gemma 2 eager: the attention core's backward stage is the peak
    (CASES[-2], "qlora", True, "chunked"),  # Phi-3 fused gate_up: its adapter output during recomputation
]
"""Cells whose peak sits inside one layer's recomputation / backward (chunked loss keeps the logits small)."""
ALL_CELLS = [
    pytest.param(case, method, grad_ckpt, loss_impl, marks=pytest.mark.slow)
    for case in CASES
    for method in ("full", "lora", "qlora")
    for grad_ckpt in (True, False)
    for loss_impl in ("fp32-upcast", "native", "chunked")
    if (case, method, grad_ckpt, loss_impl) not in FAST_CELLS + STAGE_CELLS
]


@pytest.mark.parametrize(("case", "method", "grad_ckpt", "loss_impl"), FAST_CELLS + STAGE_CELLS + ALL_CELLS)
def test_analytic_model_agrees_with_the_trace(
    cluster: ClusterSpec, case: tuple[str, dict[str, int], str], method: str, grad_ckpt: bool, loss_impl: str
) -> None:
    key, extra, attention = case
    spec = tiny(key, **extra)
    setting = TrainingSetting(
        method=method, micro_batch_size=2, grad_ckpt=grad_ckpt, loss_impl=loss_impl, attention_impl=attention
    )
    traced = trace_training_step(spec, setting, SEQ_LEN, cluster)
    workload = Workload(seq_len=SEQ_LEN, global_batch_size=2)
    predicted = predict_memory(spec, setting, cluster, workload, CostCoefficients())
    activations_and_states = traced.cuda_peak_allocated_bytes - traced.cuda_workspace_bytes
    error = (predicted.peak_allocated_bytes - traced.cuda_peak_allocated_bytes) / activations_and_states
    message = f"analytic {predicted.peak_allocated_bytes:.0f} B vs traced {traced.cuda_peak_allocated_bytes} B"
    assert abs(error) <= 0.03, message


@pytest.mark.parametrize(
    ("key", "method", "grad_ckpt", "dropout"),
    [
        ("llama3-8b", "lora", True, 0.0),
        ("llama3-8b", "lora", False, 0.05),
        ("phi3-mini", "qlora", True, 0.05),
        ("qwen2.5-7b", "qlora", False, 0.0),
    ],
)
def test_compute_dtype_adapters_agree_with_the_trace(
    cluster: ClusterSpec, key: str, method: str, grad_ckpt: bool, dropout: float
) -> None:
    """adapter_dtype compute (peft ``autocast_adapter_dtype=False``): bf16 adapters, gradients and AdamW moments, and
    no fp32 copy of the adapters' input: lora_A saves x itself, once per input tensor (the frozen base saves none),
    unless dropout makes a new one (``tests/unit/costmodel/test_activations_adapter_inputs.py``)."""
    spec = tiny(key)
    setting = TrainingSetting(
        method=method, micro_batch_size=2, grad_ckpt=grad_ckpt, adapter_dtype="compute", lora_dropout=dropout
    )
    traced = trace_training_step(spec, setting, SEQ_LEN, cluster)
    workload = Workload(seq_len=SEQ_LEN, global_batch_size=2)
    predicted = predict_memory(spec, setting, cluster, workload, CostCoefficients())
    fp32 = predict_memory(
        spec, setting.model_copy(update={"adapter_dtype": "fp32"}), cluster, workload, CostCoefficients()
    )
    error = (predicted.peak_allocated_bytes - traced.cuda_peak_allocated_bytes) / (
        traced.cuda_peak_allocated_bytes - traced.cuda_workspace_bytes
    )
    assert abs(error) <= 0.03, (
        f"analytic {predicted.peak_allocated_bytes:.0f} B vs traced {traced.cuda_peak_allocated_bytes} B"
    )
    assert predicted.breakdown_bytes["lora adapters"] == pytest.approx(fp32.breakdown_bytes["lora adapters"] / 2)


@pytest.mark.parametrize("key", ["llama3-8b", "phi3-mini"])
def test_mixed_precision_activations_agree_with_the_trace(cluster: ClusterSpec, key: str) -> None:
    """bf16-mixed full fine-tuning (fp32 residual stream under autocast): each projection saves its own 16-bit cast of
    the norm output, which is not saved itself; Phi-3's fused qkv / gate_up projections make two casts, not five
    (``activations.autocast_input_casts``). Micro batch 8 without checkpointing and a small vocabulary (wide layers
    for Phi-3) put the peak in forward/backward, made mostly of activations."""
    # Phi-3's config pads with token 32000, so its vocabulary stays; wider layers outweigh its logits instead
    wide = {"hidden_size": 1024, "intermediate_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 16}
    spec = tiny(key, **wide) if key == "phi3-mini" else tiny(key, vocab_size=256)
    setting = TrainingSetting(method="full", precision="bf16-mixed", micro_batch_size=8, grad_ckpt=False)
    traced = trace_training_step(spec, setting, SEQ_LEN, cluster)
    workload = Workload(seq_len=SEQ_LEN, global_batch_size=8)
    predicted = predict_memory(spec, setting, cluster, workload, CostCoefficients())
    assert predicted.peak_phase == "forward/backward"
    activations_and_states = traced.cuda_peak_allocated_bytes - traced.cuda_workspace_bytes
    error = (predicted.peak_allocated_bytes - traced.cuda_peak_allocated_bytes) / activations_and_states
    message = f"analytic {predicted.peak_allocated_bytes:.0f} B vs traced {traced.cuda_peak_allocated_bytes} B"
    assert abs(error) <= 0.03, message


def test_layernorm_activations_agree_with_the_trace(cluster: ClusterSpec) -> None:
    """GPT-NeoX (Pythia: LayerNorm, fused query_key_value, parallel residual) in pure bf16: a LayerNorm saves its
    16-bit input, not an fp32 upcast and a normalized copy as an RMSNorm does (``activations.norm_saved_bytes``)."""
    from autotune.profiles.hf_config import model_spec_from_config

    spec = model_spec_from_config(FIXTURES / "pythia-160m").model_copy(
        update={"num_hidden_layers": 2, "vocab_size": 256}
    )
    assert spec.norm_type == "layernorm"
    setting = TrainingSetting(method="full", precision="bf16", micro_batch_size=8, grad_ckpt=False)
    traced = trace_training_step(spec, setting, SEQ_LEN, cluster)
    workload = Workload(seq_len=SEQ_LEN, global_batch_size=8)
    predicted = predict_memory(spec, setting, cluster, workload, CostCoefficients())
    error = (predicted.peak_allocated_bytes - traced.cuda_peak_allocated_bytes) / traced.cuda_peak_allocated_bytes
    assert abs(error) <= 0.03, (
        f"analytic {predicted.peak_allocated_bytes:.0f} B vs traced {traced.cuda_peak_allocated_bytes} B"
    )


def test_a_reused_build_traces_what_a_fresh_build_traces(cluster: ClusterSpec) -> None:
    spec = tiny("llama3-8b")
    base = TrainingSetting(method="qlora", grad_ckpt=True)
    built = build_traced_model(spec, base)
    for loss_impl, micro_batch in (("chunked", 2), ("fp32-upcast", 1), ("native", 2)):
        setting = base.model_copy(update={"loss_impl": loss_impl, "micro_batch_size": micro_batch})
        reused = trace_training_step(spec, setting, SEQ_LEN, cluster, built=built)
        fresh = trace_training_step(spec, setting, SEQ_LEN, cluster)
        assert reused.model_dump(exclude={"elapsed_s"}) == fresh.model_dump(exclude={"elapsed_s"})
    with pytest.raises(ValueError, match="another model or setting"):
        trace_training_step(spec, base.model_copy(update={"grad_ckpt": False}), SEQ_LEN, cluster, built=built)


def test_checkpointed_backward_has_temporaries_besides_recomputation(cluster: ClusterSpec) -> None:
    setting = TrainingSetting(method="lora", grad_ckpt=True, loss_impl="chunked", attention_impl="eager")
    backward = trace_training_step(tiny("gemma2-9b", vocab_size=256), setting, SEQ_LEN, cluster).phases[1]
    # at the softmax backward the recomputed scores and the gradient buffers (temporaries) are both alive
    assert backward.categories_bytes["recomputed activations"] > 0
    assert backward.categories_bytes["temporaries"] > 0


def test_mixtral_lora_on_all_linear_layers_adapts_the_experts_without_dropout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from transformers import AutoModelForCausalLM, MixtralConfig

    from autotune.trainer.model import apply_method

    config = MixtralConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    model = apply_method(AutoModelForCausalLM.from_config(config), TrainingSetting(method="lora", lora_dropout=0.05))
    trained = [name for name, p in model.named_parameters() if p.requires_grad]
    assert any("experts" in name and "lora_A" in name for name in trained)
    assert any("q_proj.lora_A" in name for name in trained)
    assert model.peft_config["default"].lora_dropout == 0.0
    assert "lora_dropout 0.05 -> 0" in caplog.text
    config.save_pretrained(tmp_path)
    spec = ModelSpec.model_validate(
        {**tiny("llama3-8b").model_dump(), "key": "tiny-mixtral", "model_type": "mixtral", "num_experts": 4}
    )
    report = trace_training_step(spec, TrainingSetting(method="lora"), 64, source=str(tmp_path))
    assert report.trainable_params > 0
    assert report.peak_bytes > 0


def test_trace_command_json_from_a_config_file(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(FIXTURES / "qwen2.5-0.5b" / "config.json")
    code, out, err = run(capsys, "trace", config, "--seq-len", "64", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [phase["name"] for phase in data["phases"]] == ["forward", "backward", "optimizer step"]
    assert data["cuda_peak_allocated_bytes"] >= data["peak_bytes"]
    assert data["phases"][0]["ops"]["matmul"]["count"] > 0


def test_trace_command_without_torch_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    code, out, err = run(capsys, "trace", "llama3-8b")
    assert code == 2
    assert "autotune[train]" in err
    assert len(err.strip().splitlines()) == 1
    assert out == ""


@pytest.mark.parametrize("method", ["full", "lora"])
def test_accumulation_traces_a_later_micro_step_with_the_gradients_alive(cluster: ClusterSpec, method: str) -> None:
    # With gradient accumulation > 1 every micro-step after the first starts with the earlier micro-steps'
    # gradients alive (autograd adds into them in place), so the traced peak grows by the trainable gradients and
    # still agrees with the analytic model, which holds them from the start of backward.
    spec = tiny("qwen2.5-7b")
    one = TrainingSetting(method=method, micro_batch_size=2, grad_accum=1, grad_ckpt=False)
    four = one.model_copy(update={"grad_accum": 4})
    traced_one = trace_training_step(spec, one, SEQ_LEN, cluster)
    traced_four = trace_training_step(spec, four, SEQ_LEN, cluster)
    gradient_bytes = traced_four.phases[2].categories_bytes["gradients"]
    assert traced_one.phases[0].categories_bytes.get("gradients", 0) == 0
    assert traced_four.phases[0].categories_bytes["gradients"] == gradient_bytes > 0
    assert traced_four.cuda_peak_allocated_bytes - traced_one.cuda_peak_allocated_bytes == pytest.approx(
        gradient_bytes, rel=0.05
    )
    predicted = predict_memory(spec, four, cluster, Workload(seq_len=SEQ_LEN, global_batch_size=8), CostCoefficients())
    activations_and_states = traced_four.cuda_peak_allocated_bytes - traced_four.cuda_workspace_bytes
    error = (predicted.peak_allocated_bytes - traced_four.cuda_peak_allocated_bytes) / activations_and_states
    assert abs(error) <= 0.03
