"""autotune.costmodel.optimizer_step: the host optimizer step under FSDP offload."""

from __future__ import annotations

from autotune.costmodel.precision import dtype_bytes
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.setting import TrainingSetting

PRIORS = CostCoefficients()


def test_fsdp_offload_cpu_adamw_is_never_faster_than_dispatching_its_ops() -> None:
    # FSDP's CPU offload runs torch.optim.AdamW on the host: for a small model its step is bound by dispatching
    # the same foreach ops as the GPU optimizer, which its step cannot undercut.
    from autotune.costmodel.optimizer_step import optimizer_launches, optimizer_step_s, trainable_tensors
    from autotune.costmodel.params import linear_modules, lora_layout

    model = resolve_model_profile("qwen2.5-0.5b")
    gpu = resolve_gpu("4090")[0]
    offload = TrainingSetting(method="lora", micro_batch_size=4, sharding="fsdp-offload")
    tensors = trainable_tensors(model, offload, modules=linear_modules(model), lora=lora_layout(model, offload))
    calls, _ = optimizer_launches(tensors, foreach=True)
    trainable = 1e5  # tiny: the host's arithmetic is negligible
    offload_s = optimizer_step_s(model, offload, gpu, dtype_bytes(offload, gpu), trainable, PRIORS, tensors=tensors)
    assert offload_s >= calls * PRIORS.kernel_launch_s > 0
