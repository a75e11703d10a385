"""Packed and padded attention as the core runs it (issue 26): the masked SDPA path and flattened packed rows."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from autotune.costmodel.activations import layer_activation_bytes_per_token, mask_bytes
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.context import masked_attention_share, setting_context
from autotune.costmodel.device import device_context
from autotune.costmodel.dispatch import layer_ops
from autotune.costmodel.gemm import attention_time_s
from autotune.costmodel.layer_time import attention_term
from autotune.costmodel.memory import predict_memory
from autotune.costmodel.priors import GPU_KERNEL_MIN_S, MEM_EFFICIENT_ATTENTION_TIME_RATIO
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.dataset_stats import (
    DatasetFingerprint,
    ExampleLengths,
    dataset_batches,
    packed_batches,
    summarize,
)
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import AttentionImpl, TrainingSetting
from autotune.schemas.workload import FilledBatches, PackedBatches, PaddedBatches, PaddedLengths, Workload

LLAMA = resolve_model_profile("llama3-8b")  # 32 query heads, 8 key/value heads: grouped
H100 = ClusterSpec(gpu=resolve_gpu("h100-80gb")[0], num_gpus_per_node=1)
SEQ = 2048
SYNTHETIC = Workload(seq_len=SEQ, global_batch_size=8)


def _packed(multi_share: float, span: float = 600.0) -> Workload:
    batches = PackedBatches(attention_span_tokens=span, multi_example_block_share=multi_share)
    return Workload(seq_len=SEQ, global_batch_size=8, num_samples=100, batches=batches)


def _padded(quantiles: tuple[int, ...]) -> Workload:
    lengths = PaddedLengths(quantiles=quantiles, longest_tokens=quantiles[-1])
    batches = PaddedBatches(tokens_per_sample=sum(quantiles) / len(quantiles), lengths=lengths)
    return Workload(seq_len=SEQ, global_batch_size=8, num_samples=100, batches=batches)


def _setting(impl: AttentionImpl = "sdpa", micro_batch: int = 2, grad_ckpt: bool = False) -> TrainingSetting:
    return TrainingSetting(
        method="lora", micro_batch_size=micro_batch, grad_accum=2, attention_impl=impl, grad_ckpt=grad_ckpt
    )


def test_the_masked_path_is_on_only_where_transformers_builds_a_mask_for_sdpa() -> None:
    gpu = H100.gpu
    # packed rows of several examples: a micro batch is mask-free only when every block holds one example
    assert masked_attention_share(_setting(), gpu, _packed(0.9)) == pytest.approx(1 - 0.1**2)
    assert masked_attention_share(_setting(micro_batch=1), gpu, _packed(0.5)) == pytest.approx(0.5)
    assert masked_attention_share(_setting(), gpu, _packed(0.0)) == 0.0
    # padded rows of different lengths: masked unless the micro batch's rows are equally long
    assert masked_attention_share(_setting(micro_batch=2), gpu, _padded((100, 200))) == pytest.approx(0.5)
    assert masked_attention_share(_setting(micro_batch=1), gpu, _padded((100, 200))) == 0.0
    assert masked_attention_share(_setting(micro_batch=4), gpu, _padded((300, 300))) == 0.0
    # the synthetic workload (every sequence full, one per row) keeps the flash path
    assert masked_attention_share(_setting(micro_batch=8), gpu, SYNTHETIC) == 0.0
    # flash-attention-2 (flattened, varlen), eager (already the math path), SDPA without a flash kernel (math)
    assert masked_attention_share(_setting("flash_attention_2"), gpu, _packed(1.0)) == 0.0
    assert masked_attention_share(_setting("eager"), gpu, _packed(1.0)) == 0.0
    xtx = resolve_gpu("rx-7900-xtx")[0]
    assert masked_attention_share(_setting(), xtx, _padded((100, 200))) == 0.0
    assert setting_context(LLAMA, _setting(), H100, _packed(1.0)).masked_attention


@pytest.mark.parametrize("grad_ckpt", [False, True])
def test_masked_attention_takes_the_kernel_ratio_times_two(grad_ckpt: bool) -> None:
    """All s² scores (no causal skipping) at the memory-efficient kernel's speed: 2 × the ratio, forward and back."""
    coefficients = default_coefficients()
    setting = _setting(grad_ckpt=grad_ckpt)
    flash = predict_time(LLAMA, setting, H100, SYNTHETIC, coefficients).breakdown_s
    masked = predict_time(LLAMA, setting, H100, _packed(1.0), coefficients).breakdown_s
    ops = layer_ops(LLAMA, trainable=False)
    per_layer = (1 + grad_ckpt) * ops.forward_attention_kernels + ops.backward_attention_kernels
    tails = setting.grad_accum * LLAMA.num_hidden_layers * per_layer * GPU_KERNEL_MIN_S
    assert masked["attention"] - tails == pytest.approx(
        2 * MEM_EFFICIENT_ATTENTION_TIME_RATIO * (flash["attention"] - tails), rel=1e-9
    )
    # the mask's conversion and the k / v repeats are element-wise traffic; the GEMMs do not change
    assert masked["element-wise"] > flash["element-wise"]
    assert masked["gemm"] == pytest.approx(flash["gemm"])


def test_flash_attention_2_on_flattened_packed_rows_costs_the_examples_own_lengths() -> None:
    """Per layer forward: 4 · Σ lᵢ² / 2 · heads · head_dim FLOPs (the causal half of each example skipped), whatever
    padding the blocks would carry (a flattened micro batch has none)."""
    lengths = [500, 250, 240, 128, 300]  # three blocks of 512: [500], [250, 240], [300, 128], 1,418 of 1,536 tokens
    example_lengths = ExampleLengths(
        format="text", rows_total=5, rows_read=5, lengths=lengths, first_learned=[1] * 5, learned=lengths
    )
    stats = summarize(example_lengths, 512, DatasetFingerprint(path="x"), "tok")
    assert stats.blocks == 3 and stats.single_example_blocks == 1
    assert stats.attention_span_tokens == pytest.approx(sum(n * n for n in lengths) / sum(lengths))
    num_samples, packed = dataset_batches(stats, "packed")
    assert isinstance(packed, PackedBatches)
    assert num_samples == 3 and packed.multi_example_block_share == pytest.approx(2 / 3)
    workload = Workload(seq_len=512, global_batch_size=3).with_dataset(num_samples, packed)
    setting = TrainingSetting(method="lora", micro_batch_size=3, grad_accum=1, attention_impl="flash_attention_2")
    context = setting_context(LLAMA, setting, H100, workload)
    assert context.tokens == 3 * 512 and context.masked_attention_share == 0.0
    device = device_context(H100.gpu, default_coefficients())
    ops = layer_ops(LLAMA, trainable=False)
    forward = attention_term(context, device, ops).forward
    flops = 4 * sum(n * n for n in lengths) / 2 * LLAMA.num_attention_heads * LLAMA.head_dim
    expected = attention_time_s(flops, packed.attention_span_tokens, device.attention_device(context.dtypes))
    assert forward.gpu_s - ops.forward_attention_kernels * GPU_KERNEL_MIN_S == pytest.approx(expected, rel=1e-12)
    # sdpa on the same blocks: one row per block, attention over the whole block (and masked)
    sdpa = setting_context(LLAMA, setting.model_copy(update={"attention_impl": "sdpa"}), H100, workload)
    assert sdpa.attention_span_tokens is None and sdpa.masked_attention_share == pytest.approx(1 - (1 / 3) ** 3)


def test_memory_gains_the_mask_and_the_repeated_keys_and_values() -> None:
    setting = _setting()
    context = setting_context(LLAMA, setting, H100, SYNTHETIC)
    dtypes, m = context.dtypes, context.dtypes.compute_bytes
    plain = layer_activation_bytes_per_token(LLAMA, setting, dtypes, SEQ, True, lora=context.lora).total
    masked = layer_activation_bytes_per_token(
        LLAMA, setting, dtypes, SEQ, True, lora=context.lora, masked_attention=True
    ).total
    # k and v repeated to the 32 query heads, and the additive mask torch converts the boolean one into (m·s)
    assert masked - plain == pytest.approx(m * (2 * (LLAMA.q_dim - LLAMA.kv_dim) + SEQ))
    assert mask_bytes(LLAMA, 2, SEQ, True) == 0.0
    assert mask_bytes(LLAMA, 2, SEQ, True, masked_attention=True) == 2 * SEQ * SEQ  # boolean (b, 1, s, s)
    peak_plain = predict_memory(LLAMA, setting, H100, SYNTHETIC, default_coefficients()).peak_allocated_bytes
    peak_masked = predict_memory(LLAMA, setting, H100, _packed(0.5), default_coefficients()).peak_allocated_bytes
    assert peak_masked > peak_plain


def test_the_workload_takes_the_packed_statistics_together_and_within_seq_len() -> None:
    with pytest.raises(ValidationError, match="multi_example_block_share"):
        Workload.model_validate({"seq_len": SEQ, "batches": {"kind": "packed", "attention_span_tokens": 100.0}})
    with pytest.raises(ValidationError, match="at most seq_len"):
        Workload(seq_len=SEQ, batches=PackedBatches(attention_span_tokens=SEQ + 1.0, multi_example_block_share=0.5))


def test_statistics_written_before_them_price_packed_blocks_as_before() -> None:
    lengths = [100, 200]
    example_lengths = ExampleLengths(
        format="text", rows_total=2, rows_read=2, lengths=lengths, first_learned=[1, 1], learned=lengths
    )
    stats = summarize(example_lengths, 512, DatasetFingerprint(path="x"), "tok")
    old = stats.model_copy(update={"attention_span_tokens": 0.0, "single_example_blocks": -1})
    assert packed_batches(old) == FilledBatches()  # full blocks of one example each, as before issue 26
    assert isinstance(packed_batches(stats), PackedBatches)


def test_before_ampere_the_mask_costs_the_causal_saving_not_a_flash_kernel() -> None:
    """T4 / V100 have no FlashAttention-2: the mask-free call already runs the memory-efficient kernel, so the masked
    micro batches cost the causal half only (2×), not also the kernel ratio."""
    from autotune.costmodel.context import has_flash_attention_2

    t4 = ClusterSpec(gpu=resolve_gpu("t4")[0])
    assert not has_flash_attention_2(t4.gpu) and has_flash_attention_2(H100.gpu)
    setting = TrainingSetting(
        method="lora", micro_batch_size=2, grad_accum=1, attention_impl="sdpa", precision="fp16-mixed"
    )
    packed = SYNTHETIC.model_copy(
        update={"batches": PackedBatches(attention_span_tokens=300.0, multi_example_block_share=1.0)}
    )
    device = device_context(t4.gpu, default_coefficients())
    ops = layer_ops(LLAMA, trainable=False)
    masked = attention_term(setting_context(LLAMA, setting, t4, packed), device, ops).forward.gpu_s
    clear = attention_term(setting_context(LLAMA, setting, t4, SYNTHETIC), device, ops).forward.gpu_s
    tails = ops.forward_attention_kernels * GPU_KERNEL_MIN_S
    assert masked - tails == pytest.approx(2 * (clear - tails), rel=1e-9)
