"""The time model's terms: GEMM shape effects, dispatch, attention, collectives, the rank validation, the MPT
development data and the planner's tolerance tie-break."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.calibration.ranking import ranks, spearman
from autotune.costmodel import gemm
from autotune.costmodel.collectives import collective_time_s
from autotune.costmodel.dispatch import layer_ops, optimizer_launches
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.params import count_params
from autotune.costmodel.priors import GEMM_K_HALF_ELEMENTS
from autotune.costmodel.step_time import predict_time
from autotune.planner.search import TIE_TOLERANCE, Scored, choose
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.profiles.measurements import all_measurements, measurement_models
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting, Workload

DEVICE = gemm.GemmDevice(flops_per_s=100e12, sm_count=100, bytes_per_s=1e12)


def test_wave_quantization_one_tile_too_many_costs_a_whole_wave() -> None:
    full = gemm.quantization_efficiency(128 * 10, 128 * 10, sm_count=100)
    one_more = gemm.quantization_efficiency(128 * 10, 128 * 10 + 1, sm_count=100)
    assert full == pytest.approx(1.0)
    assert one_more < 0.6  # 110 tiles need 2 waves of 100


def test_tile_quantization_of_a_partial_tile() -> None:
    assert gemm.quantization_efficiency(129, 128 * 100, sm_count=200) == pytest.approx(129 / 256)


def test_skinny_gemm_uses_a_narrow_tile_and_is_bandwidth_bound() -> None:
    assert gemm.tile_edge(16) == 16
    assert gemm.tile_edge(1000) == gemm.TILE
    # LoRA's rank-16 output: 2·M·N·K FLOPs are few, the bytes of the M×K input dominate.
    m, n, k = 4096, 16, 4096
    seconds = gemm.gemm_time_s(m, n, k, 2, DEVICE)
    slices = gemm.split_k_slices(m, n, k, DEVICE.sm_count)  # K split over the idle SMs: fp32 partials written + read
    partials = 2 * gemm.FP32_PARTIAL_BYTES * slices * m * n
    assert slices > 1
    assert seconds == pytest.approx((2 * (m * k + k * n + m * n) + partials) / DEVICE.bytes_per_s)


def test_gemm_efficiency_saturates_with_size() -> None:
    def achieved(tokens: int) -> float:
        return 2 * tokens * 4096 * 4096 / gemm.gemm_time_s(tokens, 4096, 4096, 2, DEVICE)

    rates = [achieved(t) for t in (16, 128, 1024, 8192, 65536)]
    # split-K lets a grid of fewer tiles than SMs (M = 128: 32 tiles on 100 SMs) beat a wave-quantized one (M = 1024:
    # 2.56 waves run as 3), so the rate need not rise monotonically at small M; it saturates at large M
    assert rates[0] < rates[1] and rates[2] < rates[3] < rates[4]
    assert all(rate <= DEVICE.flops_per_s for rate in rates)
    assert rates[-1] > 0.95 * DEVICE.flops_per_s * 4096 / (4096 + GEMM_K_HALF_ELEMENTS)
    assert rates[0] < 0.2 * DEVICE.flops_per_s  # M = 16: bandwidth-bound


def test_causal_saving_only_where_the_kernel_takes_it() -> None:
    flash = gemm.attention_flops_forward(1024, 1024, 8, 64, causal_skipped=True)
    math_path = gemm.attention_flops_forward(1024, 1024, 8, 64, causal_skipped=False)
    assert math_path == pytest.approx(2 * flash) == pytest.approx(4 * 1024 * 1024 * 8 * 64)


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


def test_many_small_collectives_are_latency_bound() -> None:
    gpu, _ = resolve_gpu("h100-80gb")
    cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=8)
    coefficients = CostCoefficients()
    one_big = collective_time_s("all-gather", 1e9, cluster, coefficients)
    many_small = collective_time_s("all-gather", 1e9 / 1000, cluster, coefficients, count=1000)
    assert many_small > one_big + 900 * coefficients.collective_latency_s
    assert collective_time_s("all-gather", 1e9, ClusterSpec(gpu=gpu), coefficients) == 0.0


def _tokens_per_s(micro: int, seq_len: int, gpu: str = "4090", compile_: bool = False) -> float:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu(gpu)[0])
    setting = TrainingSetting(method="lora", micro_batch_size=micro, grad_accum=64 // micro, compile=compile_)
    return estimate_setting(model, cluster, Workload(seq_len=seq_len, global_batch_size=64), setting).tokens_per_s


def test_tokens_per_s_rises_with_micro_batch_where_kernels_are_small() -> None:
    rates = [_tokens_per_s(m, 128) for m in (1, 2, 4, 8, 16)]
    assert rates == sorted(rates)
    assert rates[-1] > 1.5 * rates[0]  # dispatch and per-micro-step costs shared by more tokens


def test_compile_removes_elementwise_traffic_and_launches() -> None:
    assert _tokens_per_s(1, 128, compile_=True) > _tokens_per_s(1, 128)


def test_offload_traffic_is_hidden_only_behind_existing_compute() -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("4090")[0])
    coefficients = CostCoefficients()
    setting = TrainingSetting(method="full", sharding="fsdp-offload", precision="bf16", micro_batch_size=1)
    short = predict_time(model, setting, cluster, Workload(seq_len=64, global_batch_size=1), coefficients)
    long = predict_time(model, setting, cluster, Workload(seq_len=4096, global_batch_size=1), coefficients)
    assert short.breakdown_s["exposed offload"] > 0.5  # 16 GB each way over PCIe, almost no compute to hide it
    assert long.breakdown_s["exposed offload"] < short.breakdown_s["exposed offload"]


def test_breakdown_adds_up_to_the_step() -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("a100-80gb")[0], num_gpus_per_node=4)
    setting = TrainingSetting(method="full", sharding="fsdp", micro_batch_size=2, grad_accum=4, precision="bf16-mixed")
    timing = predict_time(model, setting, cluster, Workload(seq_len=2048, global_batch_size=32), CostCoefficients())
    assert sum(timing.breakdown_s.values()) == pytest.approx(timing.step_time_s, rel=1e-6)


def test_spearman_known_values_and_ties() -> None:
    assert ranks([10.0, 30.0, 20.0, 20.0]) == [1.0, 4.0, 2.5, 2.5]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_mpt_development_data_loads_with_its_models() -> None:
    rows = [m for m in all_measurements() if m.source.startswith("llm-foundry-mpt.jsonl")]
    assert len(rows) == 95
    models = measurement_models()
    for row in rows:
        assert row.setting.sharding == "fsdp" and row.setting.method == "full" and row.step_time_s
        model = models[row.model]
        # README: N(S) = V·d + S·d + L·(12·d² + 13·d) + 2·d; the S·d learned position table is not counted.
        d, layers, vocab = model.hidden_size, model.num_hidden_layers, model.vocab_size
        assert count_params(model).total_params == vocab * d + layers * (12 * d * d + 13 * d) + 2 * d


def _scored(run_s: float, peak_gib: float, **setting: object) -> Scored:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("a100-80gb")[0])
    s = TrainingSetting(**setting)  # type: ignore[arg-type]
    estimate = estimate_setting(model, cluster, Workload(), s).model_copy(update={"peak_memory_gib": peak_gib})
    return Scored(s, estimate, run_s)


def test_choose_breaks_ties_only_within_the_tolerance() -> None:
    plain = _scored(100.0, 20.0, method="lora")
    eight_bit = _scored(100.0 * (1 - TIE_TOLERANCE / 2), 19.0, method="lora", optimizer="adamw-8bit")
    assert choose([plain, eight_bit], "speed") is plain  # within the tolerance: fewer moving parts
    faster = _scored(100.0 * (1 - 2 * TIE_TOLERANCE), 19.0, method="lora", optimizer="adamw-8bit")
    assert choose([plain, faster], "speed") is faster  # outside it: the predicted-fastest
    with pytest.raises(ValueError):
        choose([], "speed")


def test_mpt_config_json_loads_through_the_config_path(tmp_path: Path) -> None:
    import json

    from autotune.profiles.hf_config import model_spec_from_config

    config = {
        "model_type": "mpt",
        "d_model": 2048,
        "n_heads": 16,
        "n_layers": 24,
        "expansion_ratio": 4,
        "max_seq_len": 2048,
        "vocab_size": 50368,
        "no_bias": False,
        "learned_pos_emb": True,
        "attn_config": {"attn_type": "multihead_attention", "alibi": False},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = model_spec_from_config(path)
    assert (model.hidden_size, model.intermediate_size, model.num_key_value_heads) == (2048, 8192, 16)
    assert model.fused_qkv and not model.mlp_gated and model.norm_has_bias and model.tie_word_embeddings
    # README of the development data: mpt-1b N(2048) = 1,315,950,592 including the 2048 × 2048 position table.
    assert count_params(model).total_params == 1_315_950_592 - 2048 * 2048
    assert any("position table" in note for note in model.approximations)
    config["no_bias"] = True
    config["attn_config"] = {"attn_type": "grouped_query_attention", "kv_n_heads": 4}
    path.write_text(json.dumps(config))
    gqa = model_spec_from_config(path)
    assert gqa.num_key_value_heads == 4 and not gqa.attention_bias and not gqa.norm_has_bias


def test_the_same_setting_costs_the_same_in_plan_and_estimate() -> None:
    from autotune.planner.request import PlanRequest
    from autotune.planner.search import search

    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("4090")[0])
    workload = Workload(seq_len=2048, global_batch_size=32)
    result = search(PlanRequest(model=model, model_source="catalog", cluster=cluster, workload=workload))
    again = estimate_setting(model, cluster, workload, result.best.setting)
    assert again.step_time_s == result.best.estimate.step_time_s
    assert again.time_breakdown_s == result.best.estimate.time_breakdown_s


def test_choose_takes_the_larger_micro_batch_only_on_an_exact_tie() -> None:
    # The per-micro-step costs a larger micro batch shares (kernel launch tails, micro-step overhead) are in the
    # predicted time now, so among settings with the same moving parts the predicted-faster wins; the larger
    # micro batch breaks only an exact tie (planner.search.choice_key; issue 19: one rule, a total order).
    small = _scored(100.0, 18.0, method="lora", micro_batch_size=1, grad_accum=8)
    large = _scored(100.5, 22.0, method="lora", micro_batch_size=4, grad_accum=2)
    assert choose([small, large], "quality") is small
    tied = _scored(100.0, 22.0, method="lora", micro_batch_size=4, grad_accum=2)
    assert choose([small, tied], "quality") is tied


def test_validate_cv_by_source_prints_rank_correlation_per_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import yaml
    from cli_runner import run

    from autotune.schemas.calibration import MeasurementSet

    rows = [m for m in all_measurements() if m.id.startswith("001-a100-80gb-phi3-mini")]
    rows += [m for m in all_measurements() if m.model == "mpt-1b-foundry" and m.gpu == "h100-80gb"][:4]
    path = tmp_path / "set.yaml"
    data = MeasurementSet(name="set", source="test", conditions="test", measurements=rows).model_dump(mode="json")
    path.write_text(yaml.safe_dump(data))
    code, out, err = run(capsys, "validate", "--cv", "--cv-by", "source", "--measurements", str(path), "--json")
    assert code == 0, err
    by_source = json.loads(out)["time_by_source"]["leave-one-source-out"]
    assert {s["source"] for s in by_source} == {"001_351ee1f9e626a6ae.txt", "llm-foundry-mpt.jsonl"}
    for source in by_source:
        assert source["sweeps"] == 1 and source["rho_median"] is not None
