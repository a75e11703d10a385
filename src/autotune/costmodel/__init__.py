"""The cost model: peak GPU memory and step time of one setting (pure Python, never imports torch).

Both are derived from shapes and datasheets, with a few fitted coefficients. docs/cost-model.md has the formulas.

Modules:
  params         parameter counts from a ModelSpec (per module, LoRA adapters)
  precision      bytes per weight / gradient / optimizer state for a method and precision
  activations    activation and logits bytes per layer (Korthikanti et al. 2022)
  memory         model states per rank (sharding, offload), peak phases, the memory breakdown
  compute        FLOPs, GEMM and bandwidth time, collectives, offload, optimizer step
  estimate       estimate_setting: one Estimate (memory, time, fits) for one setting on one cluster
  calibration    the shipped coefficients and user calibration files; error bands
  fitting        fit the coefficients to measured rows (cases, residuals; fit_parameters: the one Nelder–Mead
                 fit, via _optimize, that the allocator fit and recalibrate's refit both use)
  validation     error summaries of predictions against measurements
  crossval       held-out error (leave one source / GPU / family out)
  recalibrate    refit from the user's runs (the rows are read by profiles.run_reports / measurement_csv)
  context        the derived facts of one setting (dtypes, tokens, recompute, attention kernel)
  gemm           GEMM and attention kernel time from their shapes
  collectives    collective communication time (latency plus ring bandwidth, bucketed)
  optimizer_step  the optimizer step and CPU offload traffic
  dispatch       kernels dispatched and element-wise bytes per layer (profiles/op_counts.yaml)
  adapter_time   the work LoRA adapters and QLoRA dequantization add to a layer's pass
  param_adapters  memory of LoRA adapters peft folds into a parameter (MoE experts and router)
  fused_kernels  what ``kernels: liger`` changes in memory and time
  time_fit       fit the time coefficients (efficiencies per GPU generation)
  ranking        does the time model rank settings as the GPUs ran them (Spearman ρ, MAPE per source)
  _optimize      the pure-Python Nelder–Mead minimizer
  priors         the stated priors no fit moves (each with its unit and source) and the rule for where a number lives
"""
