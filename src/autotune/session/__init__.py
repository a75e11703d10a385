"""The session layer: a request's typed option groups → validated request → plan, estimate or table, with notes.

Everything between a front end and the planner lives here, so that the command line (:mod:`autotune.cli`, parsing
and rendering) and the Python API (:mod:`autotune.api`) share one path. It prints nothing: progress goes to
:mod:`.progress`'s sink, notes come back with the results. It never imports torch.

Modules:
  option_groups  the option groups besides the setting (nodes, the run's size, the dataset, the eval set, the table)
  setting_options  the setting group (SettingOptions) and the Flag each option is spelled with
  planning       options (PlanOptions) → PlanRequest → plan, shared by plan / sweep / launch MODEL / the API
  plan_one       one plan: the dataset prepared, the search, the notes, the ``--json`` document
  gpu_grid       the table of GPU types × counts: its options validated, every cell planned, the row chosen, the report
  estimating     one stated setting: its inputs, the estimate with its notes, the nearest setting that fits
  sweeping       the requests of sweep's cells (method × sequence length)
  resolve        model / GPU / cluster names → schemas, option values → validated schemas, the notes they carry
  calibration_choice  which calibration to use (``--calibration``, the user's, the shipped) and a plan's estimator
  dataset_lengths  ``--dataset``: the data tokenized as a launch would (a subprocess), its statistics, and its packed
                 blocks or padded rows as the workload (``--packing``)
  dataset_plan   ``plan --dataset``: plan the data packed and padded, keep the faster whole run
  attention_note  the note that sdpa runs its masked path on the user's data and what flash_attention_2 would take
  node_needs     the host RAM and disk per node a SkyPilot task asks for, from the plan
  validation_text  plain text of the calibration layer's figures (error summaries, per-source ranking lines)
  progress       where the session's progress goes (silent by default; the CLI's stderr console)
"""
