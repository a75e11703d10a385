"""The cost model: peak GPU memory and step time of one setting (pure Python, never imports torch).

Both are derived from shapes and datasheets, with a few fitted coefficients. docs/cost-model.md has the formulas.

It only predicts: fitting the coefficients, validating and cross-validating predictions live in
:mod:`autotune.calibration`, which imports this package (never the reverse).

Modules:
  optimizer_memory  the optimizer states' bytes: paged 8-bit states outside the allocated peak, 32-bit embeddings
  time_correction  a calibration's local time correction at a setting, and the band it carries
  evidence       what backs an answer (measured by our core, by a public stack, or extrapolated), its band and the
                 MFU cap of the GPU's generation (profiles/evidence.yaml)
  params          parameter counts from a ModelSpec (per module, LoRA adapters)
  param_adapters  memory of LoRA adapters peft folds into a parameter (an MoE's experts and router)
  precision       bytes per weight / gradient / optimizer state for a method and precision
  context         the derived facts of one setting, built once for the memory and the time model
  activations     activation and logits bytes per layer (Korthikanti et al. 2022)
  adapter_activations  what peft's LoRA adapters save for backward (input copies, shared inputs, lora_A output)
  fused_kernels   what kernels: liger changes in memory and time (fused RMSNorm, SwiGLU, RoPE, linear CE)
  memory          model states per rank (sharding, offload), peak phases, the memory breakdown
  gemm            GEMM and attention kernel time from their shapes
  fp8_time        FP8 linears: the GEMMs at the FP8 rate plus the dynamic-scaling casts (torchao's figures)
  dispatch        kernels dispatched and element-wise bytes per layer (profiles/op_counts.yaml)
  adapter_time    the work LoRA adapters and QLoRA dequantization add to a layer's pass
  collectives     collective communication time (latency plus ring bandwidth, the frameworks' buckets)
  optimizer_step  the optimizer step and CPU offload traffic
  node_storage    host RAM and disk a cloud node needs for a plan (the SkyPilot task's memory / disk_size)
  offload         PCIe weight and gradient streaming under CPU offload (FSDP, ZeRO-3) and its overlap rule
  activation_offload  activations offloaded to host memory: the layers' saved sets off the peak, their PCIe time
  device          the GPU as the time terms see it (FLOP/s per dtype, bandwidth), built once per GPU
  layer_time      one decoder layer's forward and backward pass, one function per term
  head_time       lm_head and the loss per micro-step
  model_flops     the FLOPs a method needs per micro-step (MFU's numerator: 6·N full, 4·N frozen base)
  step_time       step time of one setting as a sum of named terms (TimeTerms), composed from the terms
  eval_time       the eval loss's time: forward-only micro batches over the held-out set, per eval
  estimate        estimate_setting: one Estimate (memory, time, fits) for one setting on one cluster
  calibration     the shipped coefficients and user calibration files (load, save); error bands
  priors          the stated priors no fit moves (each with its unit and source) and the rule for where a number
                  lives
"""
