"""The cost model's prediction for one setting (what ``autotune estimate --json`` prints)."""

from __future__ import annotations

from pydantic import Field

from autotune.schemas._base import FrozenModel


class Estimate(FrozenModel):
    """Predicted memory per GPU and time for one setting on one cluster.

    Memory is per GPU. ``peak_memory_gib`` is the peak allocated by tensors (what
    ``torch.cuda.max_memory_allocated`` reports); ``peak_reserved_gib`` is what the caching allocator
    holds at that peak (``torch.cuda.max_memory_reserved``), which plus the CUDA context is roughly what
    nvidia-smi shows. ``fits`` compares :attr:`gpu_memory_need_gib` (allocated + context + the headroom
    kept for under-prediction) with the GPU memory; the ± uncertainty band is reported, not added.
    """

    peak_memory_gib: float = Field(description="Peak allocated memory per GPU, GiB.")
    peak_reserved_gib: float = Field(
        description="Memory reserved by the caching allocator at the peak, GiB (at most GPU memory minus the "
        "CUDA context when the setting fits)."
    )
    memory_breakdown_gib: dict[str, float] = Field(
        description="Named parts of the peak allocated memory, GiB (they sum to peak_memory_gib)."
    )
    peak_phase: str = Field(
        description="When the peak happens: 'forward/backward' (start of backward: stored activations, logits + "
        "loss), 'early backward', 'late backward', 'optimizer step', 'end of compiled backward' (torch.compile: "
        "every new gradient beside the accumulated ones) or 'eval forward' (an eval loss's micro batch: the full "
        "logits under Liger, whose fused loss runs in training only)."
    )
    cuda_context_gib: float = Field(description="CUDA/ROCm context and kernels, outside the allocator, GiB.")
    memory_uncertainty_gib: float = Field(
        description="± band on peak memory from measured residuals, GiB: applied to each phase's modelled part, "
        "the largest banded phase minus the peak."
    )
    memory_headroom_gib: float = Field(
        default=0.0,
        description="Headroom kept for under-prediction (90th percentile of past residuals), GiB: applied to each "
        "phase's modelled part, the largest banded phase minus the peak.",
    )
    gpu_memory_gib: float = Field(description="Memory of one GPU, GiB.")
    fits: bool = Field(description="allocated + context + headroom <= GPU memory (and host RAM holds offload).")
    host_memory_gib: float = Field(default=0.0, description="Host RAM per node needed by CPU offload, GiB.")
    micro_step_time_s: float = Field(description="One forward+backward of one micro batch, seconds.")
    optimizer_time_s: float = Field(description="Optimizer step (and its communication), seconds.")
    step_time_s: float = Field(description="One optimizer step = grad_accum micro-steps + optimizer, seconds.")
    tokens_per_s: float = Field(description="Training tokens per second over all GPUs.")
    mfu: float = Field(
        description="Model FLOPs utilisation: (c·N + 12·layers·heads·head_dim·seq_len) FLOPs per token × tokens/s "
        "per GPU over one GPU's dense bf16 (fp16 without bf16) peak; c = 6 for full fine-tuning (forward, input and "
        "weight gradients), 4 for LoRA / QLoRA (the frozen base has no weight gradient); N = weights a token's "
        "forward multiplies by (decoder linears with the active experts, the output projection); attention as PaLM "
        "appendix B counts it (Megatron-LM, Narayanan et al. 2021 §5.1, counts model FLOPs the same way). "
        "Recomputation under activation "
        "checkpointing is not counted (that is HFU), nor the adapters' own FLOPs (~0.5 % of N at r 16)."
    )
    time_uncertainty_fraction: float = Field(
        description="± relative band on times: the family's measured residuals, widened when no timed run backs the "
        "GPU × method × sharding (evidence 'extrapolated') and for offload beyond its one measured row."
    )
    evidence: str | None = Field(
        default=None,
        description="What backs the time: 'core' (measured with our core), 'public' (measured by a public stack) or "
        "'extrapolated' (from the datasheet); None in files written before the label existed.",
    )
    evidence_note: str = Field(default="", description="The runs behind the label (or their absence), in words.")
    mfu_cap: float | None = Field(
        default=None,
        description="The MFU the prediction is held at: the best public MFU of the GPU's generation plus a 5 % "
        "margin (profiles/evidence.yaml); None when our core ran the card.",
    )
    mfu_cap_source: str = Field(default="", description="The public run behind mfu_cap.")
    mfu_uncapped: float | None = Field(
        default=None, description="The model's MFU before it was held at mfu_cap; None when not held."
    )
    compile_time_s: float = Field(default=0.0, description="One-off torch.compile time, seconds.")
    total_time_s: float | None = Field(
        default=None, description="Whole run (dataset × epochs), seconds: the steps, compilation and eval_time_s."
    )
    num_optimizer_steps: int | None = Field(default=None, description="Optimizer steps in the whole run.")
    eval_time_s: float | None = Field(
        default=None,
        description="Of total_time_s, the eval losses (--eval-fraction / --eval-dataset): num_evals forward-only "
        "passes over the held-out set, seconds. None = no eval.",
    )
    num_evals: int | None = Field(
        default=None, description="Eval losses in the whole run: every --eval-steps and at the end. None = no eval."
    )
    time_breakdown_s: dict[str, float] = Field(
        default_factory=dict,
        description="The time terms of one optimizer step on one GPU, s (costmodel.step_time.TimeTerms: gemm, "
        "attention, element-wise, lora adapters, qlora dequant, lm_head + loss, exposed cpu dispatch, exposed "
        "communication, zero-3 module hooks, pcie weight streaming, pcie gradient streaming, optimizer step, fixed "
        "overheads): each is grad_accum × its micro-step part plus its per-step part (optimizer step, step "
        "communication, step overhead); they add "
        "up to step_time_s.",
    )

    @property
    def reserved_at_capacity(self) -> bool:
        """True when the allocator's cache would outgrow the card and is capped there.

        It frees cached blocks and retries before reporting out-of-memory, at some cost in speed.
        """
        return self.fits and self.peak_reserved_gib >= self.gpu_memory_gib - self.cuda_context_gib - 0.001

    @property
    def gpu_memory_need_gib(self) -> float:
        """What must fit in one GPU: peak allocated + CUDA context + headroom, GiB (what ``fits`` compares)."""
        return self.peak_memory_gib + self.cuda_context_gib + self.memory_headroom_gib
