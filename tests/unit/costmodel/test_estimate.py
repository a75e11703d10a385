"""Cost-model behaviour: hand-derived values and invariants (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.costmodel.activations import autocast_input_casts, logits_peak_bytes
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.precision import dtype_bytes
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas import ClusterSpec, CostCoefficients, TrainingSetting, Workload
from autotune.units import GIB, nf4_bytes_per_param

PRIOR = CostCoefficients()
LLAMA3_8B = resolve_model_profile("llama3-8b")
H100, _ = resolve_gpu("h100-80gb")
RTX4090, _ = resolve_gpu("rtx-4090")


def estimate(setting: TrainingSetting, seq_len: int = 2048, gpus: int = 1, gpu=H100, model=LLAMA3_8B):
    cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=gpus)
    workload = Workload(seq_len=seq_len, global_batch_size=setting.micro_batch_size * setting.grad_accum * gpus)
    return estimate_setting(model, cluster, workload, setting, PRIOR)


def test_full_finetune_model_states_are_8_bytes_per_param_in_pure_bf16():
    # 8,030,261,248 params × (2 weights + 2 grads + 4 AdamW) bytes = 59.83 GiB (the example figure)
    e = estimate(TrainingSetting(method="full", micro_batch_size=1, grad_accum=2))
    states = sum(e.memory_breakdown_gib[k] for k in ("weights", "gradients", "optimizer states"))
    assert states == pytest.approx(8_030_261_248 * 8 / GIB, rel=1e-3)
    assert states == pytest.approx(59.83, abs=0.01)


def test_full_finetune_peaks_at_optimizer_step_with_foreach_temporary():
    e = estimate(TrainingSetting(method="full", micro_batch_size=1, grad_accum=1))
    assert e.peak_phase == "optimizer step"
    assert e.memory_breakdown_gib["optimizer step buffers"] == pytest.approx(8_030_261_248 * 2 / GIB, rel=1e-3)


def test_qlora_weights_use_nf4_for_decoder_linears_only():
    e = estimate(TrainingSetting(method="qlora", micro_batch_size=1))
    from autotune.costmodel.params import count_params

    counts = count_params(LLAMA3_8B)
    expected = counts.decoder_linear_params * nf4_bytes_per_param(True) + counts.non_linear_params * 2
    assert e.memory_breakdown_gib["weights"] == pytest.approx(expected / GIB, rel=1e-3)
    lora = estimate(TrainingSetting(method="lora", micro_batch_size=1))
    assert e.memory_breakdown_gib["weights"] < lora.memory_breakdown_gib["weights"] / 2


def test_logits_peak_matches_hand_count_for_fp32_upcast_loss():
    # E = 2 × 8192 × 128256 logits; transformers' loss holds 12 bytes per logit at the start of backward.
    setting = TrainingSetting(method="lora", micro_batch_size=2)
    dtypes = dtype_bytes(setting, H100)
    tokens = 2 * 8192
    assert logits_peak_bytes(LLAMA3_8B, setting, dtypes, tokens) == 12 * tokens * 128256


def test_seed_001_llama3_lora_peak_is_within_ten_percent_with_priors():
    # seed 001, H100 table, Llama 3 8B LoRA: 36 GiB reserved (r 8, all linears, 2 × 8192, native CE).
    setting = TrainingSetting(
        method="lora", micro_batch_size=2, grad_accum=32, lora_rank=8, lora_alpha=16, loss_impl="native"
    )
    e = estimate(setting, seq_len=8192)
    assert e.peak_reserved_gib == pytest.approx(36, rel=0.10)


def test_compile_shortens_steps():
    base = TrainingSetting(method="lora", micro_batch_size=1, grad_accum=4)
    compiled = base.model_copy(update={"compile": True})
    assert estimate(compiled).step_time_s < estimate(base).step_time_s
    assert estimate(compiled).compile_time_s > 0


def test_offload_moves_states_to_host():
    on_gpu = estimate(TrainingSetting(method="full", micro_batch_size=1, grad_accum=2))
    offloaded = estimate(TrainingSetting(method="full", micro_batch_size=1, grad_accum=2, sharding="zero3-offload"))
    assert offloaded.peak_memory_gib < on_gpu.peak_memory_gib / 4
    assert offloaded.host_memory_gib > 59  # fp32 master + grads + Adam states live in host RAM
    assert on_gpu.host_memory_gib == 0


methods = st.sampled_from(["full", "lora", "qlora"])
seq_lens = st.sampled_from([256, 512, 1024, 2048, 4096, 8192])
micro = st.sampled_from([1, 2, 4, 8])


@settings(max_examples=60, deadline=None)
@given(method=methods, seq_len=seq_lens, mbs=micro, ckpt=st.booleans())
def test_memory_grows_with_seq_len_and_micro_batch(method, seq_len, mbs, ckpt):
    setting = TrainingSetting(method=method, micro_batch_size=mbs, grad_accum=2, grad_ckpt=ckpt)
    base = estimate(setting, seq_len=seq_len).peak_memory_gib
    assert estimate(setting, seq_len=seq_len * 2).peak_memory_gib >= base
    bigger = setting.model_copy(update={"micro_batch_size": mbs * 2})
    assert estimate(bigger, seq_len=seq_len).peak_memory_gib >= base


@settings(max_examples=60, deadline=None)
@given(method=methods, seq_len=seq_lens, mbs=micro)
def test_checkpointing_never_raises_activation_memory(method, seq_len, mbs):
    without = TrainingSetting(method=method, micro_batch_size=mbs, grad_accum=2, grad_ckpt=False)
    with_ckpt = without.model_copy(update={"grad_ckpt": True})
    a = estimate(without, seq_len=seq_len).memory_breakdown_gib.get("activations", 0.0)
    b = estimate(with_ckpt, seq_len=seq_len).memory_breakdown_gib.get("activations", 0.0)
    assert b <= a + 1e-9
    assert estimate(with_ckpt, seq_len=seq_len).peak_memory_gib <= estimate(without, seq_len=seq_len).peak_memory_gib


@settings(max_examples=40, deadline=None)
@given(method=methods, sharding=st.sampled_from(["fsdp", "zero3"]), gpus=st.sampled_from([2, 4]))
def test_sharded_memory_shrinks_with_more_gpus(method, sharding, gpus):
    setting = TrainingSetting(method=method, micro_batch_size=1, grad_accum=4, sharding=sharding)
    assert estimate(setting, gpus=gpus * 2).peak_memory_gib < estimate(setting, gpus=gpus).peak_memory_gib


@settings(max_examples=40, deadline=None)
@given(method=methods, seq_len=seq_lens)
def test_time_grows_with_tokens_and_faster_gpu_is_faster(method, seq_len):
    # Short micro-steps are CPU-dispatch-bound (time flat in tokens and GPU); longer ones are GPU-bound.
    setting = TrainingSetting(method=method, micro_batch_size=1, grad_accum=2)
    short, long_ = estimate(setting, seq_len=seq_len), estimate(setting, seq_len=seq_len * 2)
    on_4090 = estimate(setting, seq_len=seq_len, gpu=RTX4090)
    assert long_.micro_step_time_s >= short.micro_step_time_s
    assert short.micro_step_time_s <= on_4090.micro_step_time_s
    if seq_len >= 2048:
        assert long_.micro_step_time_s > short.micro_step_time_s
        assert short.micro_step_time_s < on_4090.micro_step_time_s


def test_reserved_is_at_least_allocated_and_breakdown_sums_to_peak():
    for method in ("full", "lora", "qlora"):
        e = estimate(TrainingSetting(method=method, micro_batch_size=2, grad_accum=2))
        assert e.peak_reserved_gib >= e.peak_memory_gib
        assert sum(e.memory_breakdown_gib.values()) == pytest.approx(e.peak_memory_gib, abs=0.01)


def test_reserved_is_capped_at_the_card_when_the_setting_fits():
    # Allocated fits on a 24 GiB card but allocated × (1 + allocator overhead) would not: the caching
    # allocator frees its cache and retries before OOM, so reserved stops at GPU memory − CUDA context.
    # Shipped calibration (its allocator overhead and headroom bands), as `autotune plan` uses it.
    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=16, loss_impl="fp32-upcast")

    def shipped(setting: TrainingSetting, gpu):
        cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=1)
        return estimate_setting(LLAMA3_8B, cluster, Workload(seq_len=2048, global_batch_size=32), setting)

    e = shipped(setting, RTX4090)
    assert e.fits
    assert e.peak_reserved_gib == pytest.approx(e.gpu_memory_gib - e.cuda_context_gib, abs=1e-3)
    assert e.reserved_at_capacity
    assert e.peak_reserved_gib >= e.peak_memory_gib
    roomy = shipped(setting, H100)
    assert not roomy.reserved_at_capacity
    assert roomy.peak_reserved_gib > roomy.peak_memory_gib
    too_big = shipped(TrainingSetting(method="full", micro_batch_size=8, grad_accum=4), RTX4090)
    assert not too_big.fits and not too_big.reserved_at_capacity
    assert too_big.peak_reserved_gib > too_big.gpu_memory_gib  # demand is shown uncapped when it cannot fit


def test_fsdp_no_sync_accumulation_keeps_the_unsharded_gradients_on_every_gpu():
    # FSDP under no_sync (grad_sync last-micro-step, the HF Trainer's default) holds the full bf16 gradients of
    # all 8.03 B parameters on each GPU during accumulation: 8,030,261,248 × 2 bytes = 14.96 GiB, on 2 GPUs as on
    # 8; reducing every micro-step (or accumulating nothing) holds only the fp32 shards (4 bytes / GPUs).
    full = {"method": "full", "micro_batch_size": 1, "sharding": "fsdp", "precision": "bf16-mixed"}
    for gpus in (2, 8):
        no_sync = estimate(TrainingSetting(**full, grad_accum=4), gpus=gpus).memory_breakdown_gib["gradients"]
        synced = TrainingSetting(**full, grad_accum=4, grad_sync="every-micro-step")
        sharded = estimate(synced, gpus=gpus).memory_breakdown_gib["gradients"]
        one_step = estimate(TrainingSetting(**full, grad_accum=1), gpus=gpus).memory_breakdown_gib.get("gradients")
        unsharded, shard = 8_030_261_248 * 2 / GIB, 8_030_261_248 * 4 / gpus / GIB
        assert sharded == pytest.approx(shard, rel=1e-3)
        # the peak phase holds the unsharded gradients, plus the fp32 shards in the last micro-step's backward
        assert no_sync in (pytest.approx(unsharded, rel=1e-3), pytest.approx(unsharded + shard, rel=1e-3))
        assert one_step is None or one_step <= sharded


def test_fsdp_no_sync_reduce_scatters_only_in_the_last_micro_step():
    # Over PCIe (RTX 4090: no NVLink) the gradient reduce-scatter is not hidden; under no_sync it runs once a step.
    full = {"method": "full", "micro_batch_size": 1, "grad_accum": 8, "sharding": "fsdp", "precision": "bf16-mixed"}
    no_sync = estimate(TrainingSetting(**full), gpus=4, gpu=RTX4090, model=resolve_model_profile("llama3.2-1b"))
    every = estimate(
        TrainingSetting(**full, grad_sync="every-micro-step"),
        gpus=4,
        gpu=RTX4090,
        model=resolve_model_profile("llama3.2-1b"),
    )
    assert no_sync.time_breakdown_s["exposed communication"] < every.time_breakdown_s["exposed communication"]


@pytest.mark.parametrize(
    ("model", "precision", "sharding", "casts"),
    [
        ("llama3-8b", "bf16-mixed", "none", 5),  # q, k, v, gate, up each cast the fp32 norm output
        ("phi3-mini", "bf16-mixed", "none", 2),  # fused qkv_proj and gate_up_proj
        ("llama3-8b", "bf16-mixed", "fsdp", 0),  # FSDP mixed precision: the residual stream is already bf16
        ("llama3-8b", "bf16", "none", 0),  # no autocast
    ],
)
def test_autocast_casts_only_a_residual_stream_of_another_dtype(model, precision, sharding, casts):
    setting = TrainingSetting(method="full", precision=precision, sharding=sharding)
    dtypes = dtype_bytes(setting, resolve_gpu("h100")[0])
    assert autocast_input_casts(resolve_model_profile(model), dtypes) == casts
