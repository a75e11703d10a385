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
"""
