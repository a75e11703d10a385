"""The calibration layer: fit the cost model's free coefficients to measured rows and evaluate its predictions.

Pure Python, never imports torch. It sits between the CLI and the cost model: it imports
:mod:`autotune.costmodel`, :mod:`autotune.planner`, :mod:`autotune.profiles` and :mod:`autotune.schemas`, and
nothing below it imports it. It returns data; the CLI and the benchmarks render it. docs/calibration.md describes
the procedure.

Modules:
  cases         Case (a measurement with its model and cluster) and the one rule for what a row is compared on
  results       CaseResult and evaluate: predictions paired with the measured quantities
  nelder_mead   the pure-Python Nelder–Mead minimizer every fit uses
  time_fit      the MAP fit of the time coefficients (efficiencies per architecture generation, stack factors)
  fit           losses, fit_parameters, fit_allocator, fit_coefficients (memory + time) and the error bands
  stack_fit     the few-rows refit: the stack factor first, a term only where the rows vary it
  held_out      the held-out time errors the bands are read from (one setting left out at a time)
  replicates    rows of one setting as one point of every fit (a CSV of 100,000 rows of a few settings)
  recalibrate   refit from the user's runs (run directories, CSV, measurement sets)
  validation    error summaries (MAPE per group, verdicts, the rows with the largest errors)
  crossval      held-out error (leave one source / GPU / family out) and bands from held-out residuals
  ranking       Spearman ρ of measured vs predicted throughput within sweeps, per source
  plan_quality  the planner's choice on the measured sweeps, judged against the measurements
  coverage      where in the setting space a few rows lie: the setting-error kernel, the local correction, the band
  outliers      a row that is not one stack's speed: leave-one-out against the rows' scatter prior
  row_fields    the setting fields of a row that move its prediction beyond what ``short()`` shows
  suggest       which settings to measure first (``calibrate --suggest K``): greedy variance reduction
"""
