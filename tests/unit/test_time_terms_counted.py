"""Issue 18: time as named terms that sum to the step time, one attention rule for memory and time, LoRA / QLoRA
time from counted work, and the project's own H100 runs as the first calibration source."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml
from cli_runner import run

from autotune.calibration.cases import prepare_cases
from autotune.calibration.results import evaluate
from autotune.costmodel import adapter_time, gemm
from autotune.costmodel.calibration import default_coefficients, load_coefficients
from autotune.costmodel.context import setting_context
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.memory import predict_memory
from autotune.costmodel.params import count_params
from autotune.costmodel.step_time import TERM_LABELS, predict_time
from autotune.errors import ConfigError
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.profiles.measurements import CORE_SOURCE, list_measurement_sets
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting, Workload

ROOT = Path(__file__).resolve().parents[2]
PRIORS = CostCoefficients()
LLAMA = resolve_model_profile("llama3-8b")


def _cluster(gpu: str, gpus: int = 1, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus, num_nodes=nodes, host_memory_gib_per_node=512)


SETTINGS = [
    ("h100", 1, TrainingSetting(method="full", compile=True, optimizer="adamw-8bit", grad_accum=4)),
    ("h100", 1, TrainingSetting(method="lora", micro_batch_size=2, grad_accum=3, lora_dropout=0.05)),
    ("4090", 1, TrainingSetting(method="qlora", grad_ckpt=False, adapter_dtype="compute")),
    ("a100", 8, TrainingSetting(method="full", sharding="fsdp", precision="bf16-mixed", grad_accum=2)),
    ("a100", 4, TrainingSetting(method="full", sharding="zero3-offload", precision="bf16-mixed")),
    ("a100", 4, TrainingSetting(method="lora", sharding="ddp", grad_accum=2)),
    ("a100", 4, TrainingSetting(method="full", sharding="zero2", precision="bf16-mixed")),
    ("4090", 2, TrainingSetting(method="lora", sharding="fsdp-offload")),
]


@pytest.mark.parametrize(("gpu", "gpus", "setting"), SETTINGS)
def test_the_terms_sum_to_the_step_time(gpu: str, gpus: int, setting: TrainingSetting) -> None:
    cluster = _cluster(gpu, gpus)
    workload = Workload(seq_len=2048, global_batch_size=setting.micro_batch_size * setting.grad_accum * gpus)
    timing = predict_time(LLAMA, setting, cluster, workload, default_coefficients())
    assert list(timing.breakdown_s) == list(TERM_LABELS.values())
    assert all(value >= 0 for value in timing.breakdown_s.values())
    assert sum(timing.breakdown_s.values()) == pytest.approx(timing.step_time_s, rel=1e-12)
    assert timing.step_time_s == pytest.approx(
        setting.grad_accum * timing.micro_step_time_s + timing.optimizer_time_s, rel=1e-12
    )
    estimate = estimate_setting(LLAMA, cluster, workload, setting)
    assert sum(estimate.time_breakdown_s.values()) == pytest.approx(estimate.step_time_s, rel=1e-4)


def test_a_gpu_without_flash_attention_runs_math_attention_in_memory_and_time_alike() -> None:
    """RX 7900 XTX (``supports_flash_attention: false``): SDPA falls back to the math path, so the scores are
    materialised (memory grows faster than linearly in seq_len) and every score is computed (attention time grows
    4× per doubling); the same GPU with a flash kernel gets neither, from the same one rule."""
    xtx = resolve_gpu("rx-7900-xtx")[0]
    as_if_flash = xtx.model_copy(update={"supports_flash_attention": True})
    setting = TrainingSetting(method="lora", grad_ckpt=True)

    def run(gpu: object, seq: int) -> tuple[bool, float, float]:
        cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=1)  # type: ignore[arg-type]
        workload = Workload(seq_len=seq, global_batch_size=1)
        flash = setting_context(LLAMA, setting, cluster, workload).flash_attention
        memory = predict_memory(LLAMA, setting, cluster, workload, PRIORS)
        activations = memory.breakdown_bytes.get("activations", 0.0) + memory.breakdown_bytes.get("logits + loss", 0)
        attention = predict_time(LLAMA, setting, cluster, workload, PRIORS).breakdown_s["attention"]
        return flash, activations, attention

    math_runs = [run(xtx, seq) for seq in (2048, 4096, 8192)]
    flash_runs = [run(as_if_flash, seq) for seq in (2048, 4096, 8192)]
    assert [flash for flash, _, _ in math_runs] == [False] * 3
    assert [flash for flash, _, _ in flash_runs] == [True] * 3
    # time: all s² scores computed (×4 per doubling once the kernel is saturated), twice the causal half flash computes
    assert math_runs[2][2] / math_runs[1][2] == pytest.approx(4, rel=0.02)
    assert math_runs[2][2] > 1.6 * flash_runs[2][2]  # 2× the FLOPs; backward 2× (math) vs 2.5× (flash)
    # memory: the scores make the activations grow faster than linearly, and only on the math path
    math_growth = (math_runs[2][1] - math_runs[1][1]) / (math_runs[1][1] - math_runs[0][1])
    flash_growth = (flash_runs[2][1] - flash_runs[1][1]) / (flash_runs[1][1] - flash_runs[0][1])
    assert math_growth > 2.5 > flash_growth
    assert all(m[1] > f[1] for m, f in zip(math_runs, flash_runs, strict=True))


def test_lora_element_wise_work_is_counted_from_what_peft_runs() -> None:
    fp32_dropout_fwd, fp32_dropout_bwd = adapter_time.lora_ops(4.0, 2.0, dropout=True)
    # cast (2 + 4) + dropout (4 + 4 + 1 mask) per input feature; scale 8 + add 10 + cast back 6 per output feature
    assert (fp32_dropout_fwd.bytes_per_in_feature, fp32_dropout_fwd.bytes_per_out_feature) == (15.0, 24.0)
    assert fp32_dropout_fwd.kernels == 7
    plain_fwd, plain_bwd = adapter_time.lora_ops(2.0, 2.0, dropout=False)
    # compute-dtype adapters without dropout: no cast, no mask; scale 4 + add 6 per output feature, nothing in
    assert (plain_fwd.bytes_per_in_feature, plain_fwd.bytes_per_out_feature, plain_fwd.kernels) == (0.0, 10.0, 4)
    assert plain_bwd.bytes_per_in_feature == 6.0  # only x's gradient accumulation (3 × 2 bytes)
    assert plain_bwd.kernels == fp32_dropout_bwd.kernels - 4  # two grad casts, the dropout and the input cast

    cluster = _cluster("h100")
    workload = Workload(seq_len=2048, global_batch_size=4)

    def lora_s(**fields: object) -> float:
        setting = TrainingSetting(method="lora", micro_batch_size=4, **fields)  # type: ignore[arg-type]
        return predict_time(LLAMA, setting, cluster, workload, PRIORS).breakdown_s["lora adapters"]

    compute_s = lora_s(lora_dropout=0.0, adapter_dtype="compute")
    assert compute_s < lora_s(lora_dropout=0.0, adapter_dtype="fp32") < lora_s(lora_dropout=0.1, adapter_dtype="fp32")


def test_qlora_dequantizes_every_linear_in_every_pass() -> None:
    cluster = _cluster("h100")
    workload = Workload(seq_len=2048, global_batch_size=1)

    def dequant_s(grad_ckpt: bool) -> float:
        setting = TrainingSetting(method="qlora", grad_ckpt=grad_ckpt)
        return predict_time(LLAMA, setting, cluster, workload, PRIORS).breakdown_s["qlora dequant"]

    # forward, recompute, backward (3 passes) vs forward, backward (2)
    assert dequant_s(True) / dequant_s(False) == pytest.approx(1.5, rel=1e-9)
    assert (
        predict_time(LLAMA, TrainingSetting(method="lora"), cluster, workload, PRIORS).breakdown_s["qlora dequant"] == 0
    )


def test_skinny_gemms_split_k_over_idle_sms() -> None:
    device = gemm.GemmDevice(flops_per_s=50e12, sm_count=132, bytes_per_s=3e12)
    # LoRA's x·Aᵀ: 2048 tokens × rank 16 outputs = 16 tiles on 132 SMs; K = 4096 splits 8 ways (256-long slices)
    assert gemm.split_k_slices(2048, 16, 4096, 132) == 8
    assert gemm.split_k_slices(4096, 4096, 4096, 132) == 1  # a full wave needs no split
    unsplit = gemm.quantization_efficiency(2048, 16, 132)
    split = gemm.quantization_efficiency(2048, 16, 132, slices=8)
    assert split == pytest.approx(8 * unsplit)
    assert gemm.gemm_time_s(2048, 16, 4096, 4, device) < 2 * 2048 * 16 * 4096 / (50e12 * unsplit)


def test_micro_batch_1_to_4_gains_what_the_h100_measured() -> None:
    """`autotune estimate llama3-8b --gpu h100 --method lora --seq-len 2048 --grad-ckpt` at the settings the core's
    runs measured (fp32 adapters, dropout 0.05: peft's defaults then): the measured rise from micro batch 1 to 4 is
    +42 % (3,803 → 5,387 tokens/s); issue 18 asks for +32 %..+52 %. (Today's defaults, compute-dtype adapters and
    no dropout, are not measured on a GPU yet.)"""
    cluster = _cluster("h100")
    rates = [
        estimate_setting(
            LLAMA,
            cluster,
            Workload(seq_len=2048, global_batch_size=micro),
            TrainingSetting(
                method="lora", micro_batch_size=micro, grad_ckpt=True, adapter_dtype="fp32", lora_dropout=0.05
            ),
        ).tokens_per_s
        for micro in (1, 4)
    ]
    assert 0.32 <= rates[1] / rates[0] - 1 <= 0.52


def test_the_cores_runs_ship_as_their_own_source_and_lead_the_fit() -> None:
    (core,) = [s for s in list_measurement_sets() if s.name == CORE_SOURCE]
    assert len(core.measurements) == 5
    assert all(m.source.startswith(f"{CORE_SOURCE}: ") for m in core.measurements)
    assert all(m.setting.adapter_dtype == "fp32" for m in core.measurements if m.setting.uses_adapters)
    shipped = default_coefficients()
    assert shipped.stack_time_factor[CORE_SOURCE] == 1.0  # the coefficients describe the core
    results = evaluate(prepare_cases(core.measurements), shipped)
    assert all(abs(r.time_error or 0) < 0.1 for r in results), [(r.case.measurement.id, r.time_error) for r in results]


def test_the_core_measurement_set_is_what_the_run_directories_hold() -> None:
    spec = importlib.util.spec_from_file_location("ingest_core_runs", ROOT / "tools" / "ingest_core_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ingest_core_runs"] = module
    spec.loader.exec_module(module)
    shipped = ROOT / "src" / "autotune" / "profiles" / "measurements" / f"{CORE_SOURCE}.yaml"
    assert module.build() == shipped.read_text(encoding="utf-8")


def test_a_calibration_with_the_retired_factors_at_one_loads_and_another_value_is_refused(tmp_path: Path) -> None:
    data = default_coefficients().model_dump(mode="json")
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({**data, "adapter_time_factor": 1.0, "qlora_time_factor": 1.0}), encoding="utf-8")
    assert load_coefficients(path).lora_target_cpu_s == data["lora_target_cpu_s"]
    path.write_text(yaml.safe_dump({**data, "adapter_time_factor": 1.7}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"adapter_time_factor 1\.7 is no longer used"):
        load_coefficients(path)


def test_estimate_takes_adapter_dtype_kernels_and_dropout_and_shows_the_terms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ("estimate", "llama3-8b", "--gpu", "h100", "--method", "lora", "--micro-batch-size", "4", "--json")
    code, out, _ = run(capsys, *base, "--adapter-dtype", "fp32")
    assert code == 0
    fp32 = json.loads(out)
    code, out, _ = run(capsys, *base, "--adapter-dtype", "compute", "--lora-dropout", "0.1", "--kernels", "liger")
    assert code == 0
    compute = json.loads(out)
    assert (compute["setting"]["adapter_dtype"], compute["setting"]["lora_dropout"]) == ("compute", 0.1)
    assert compute["setting"]["kernels"] == "liger"
    assert any("liger: priced from Liger Kernel's source" in note for note in compute["notes"])
    assert compute["memory_breakdown_gib"]["lora adapters"] < fp32["memory_breakdown_gib"]["lora adapters"]
    assert set(compute["time_breakdown_s"]) == set(TERM_LABELS.values())
    code, out, _ = run(capsys, *base[:-1])
    assert code == 0 and "of the step: lora adapters" in out and "of the step: gemm" in out
    code, _, err = run(capsys, *base, "--adapter-dtype", "bf17")
    assert code == 2 and "--adapter-dtype" in err and "Traceback" not in err


def test_plan_overrides_adapter_dtype_and_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "llama3-8b", "--gpu", "h100", "--method", "lora", "--json")
    code, out, _ = run(capsys, *args, "--adapter-dtype", "compute", "--kernels", "liger")
    assert code == 0
    plan = json.loads(out)["plan_file"]
    assert (plan["setting"]["adapter_dtype"], plan["setting"]["kernels"]) == ("compute", "liger")
    code, out, _ = run(capsys, *args)
    assert json.loads(out)["plan_file"]["setting"]["kernels"] == "none"  # liger only when forced


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


def test_the_headroom_band_is_applied_to_every_phase_not_only_the_peak() -> None:
    """A compiled full run peaks at the end of its backward (counted gradients, a small modelled part); the start of
    backward, with activations and logits, is lower as a point prediction but not once its band is added."""
    from autotune.costmodel.calibration import error_band
    from autotune.costmodel.estimate import banded_peak_bytes
    from autotune.units import GIB

    phases = {"a": {"activations": 10.0 * GIB, "weights": 50.0 * GIB}, "d": {"gradients": 62.0 * GIB}}
    assert banded_peak_bytes(phases, 0.0) == 62.0 * GIB
    assert banded_peak_bytes(phases, 0.5) == 65.0 * GIB  # phase a: 60 + 0.5 × 10
    assert banded_peak_bytes(phases, 0.1) == 62.0 * GIB

    setting = TrainingSetting(
        method="full", micro_batch_size=1, grad_accum=32, grad_ckpt=False, compile=True, optimizer="adamw-8bit"
    )
    cluster, workload = _cluster("h100"), Workload(seq_len=2048, global_batch_size=32)
    coefficients = default_coefficients()
    estimate = estimate_setting(LLAMA, cluster, workload, setting, coefficients)
    memory = predict_memory(LLAMA, setting, cluster, workload, coefficients)
    assert estimate.peak_phase == "end of compiled backward"
    start = memory.phases_bytes["forward/backward"]
    modelled = start["activations"] + start["logits + loss"]
    band = error_band(coefficients.memory_headroom_band, "full")
    assert band > 0
    need_at_start = (sum(start.values()) + band * modelled) / GIB
    assert estimate.peak_memory_gib + estimate.memory_headroom_gib == pytest.approx(need_at_start, abs=2e-3)
    assert estimate.memory_headroom_gib > band * estimate.memory_breakdown_gib["embedding gradient buffer"]
