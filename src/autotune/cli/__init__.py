"""The ``autotune`` command line: a thin typer layer over the planner, the launcher and the cost model.

Modules:
  app            the entry point: the command table (``COMMANDS``), lazy registration, one-line errors (exit 2)
  plan_cmd, estimate_cmd, sweep_cmd, launch_cmd, probe_cmd, calibrate_cmd, validate_cmd, catalog_cmd, trace_cmd
                 one module per command; none imports another, none imports ``app``
  export_cmd     ``autotune export``: its checks here; the export runs in the training core's process
  cloud_options  launch's SkyPilot options (--bucket, --spot), declared once, and the node needs from the plan
  setting_options  the setting options of plan / estimate / trace / sweep, declared once (SettingOptions) and put
                 into each command's signature by one decorator
  planning       options (PlanOptions) → PlanRequest → plan, shared by plan / sweep / launch MODEL
  gpu_grid       plan across GPU types and counts: the table of the best setting per type × count, prices
  dataset_lengths  ``--dataset`` of plan / estimate: the data tokenized as a launch would (a subprocess), its
                 statistics, and its packed blocks or padded rows as the workload (``--packing``)
  dataset_plan   ``plan --dataset``: plan the data packed and padded, keep the faster whole run
  refit          options, refit-and-write and tables shared by calibrate and probe
  _shared        which calibration to use (``--calibration``, the user's, the shipped) and a plan's estimator
  options        typer option types whose help comes from the schemas' field descriptions
  resolve        model / GPU / cluster names → schemas, CLI values → validated schemas
  attention_note  the note that sdpa runs its masked path on the user's data and what flash_attention_2 would take
  render         rich tables of estimates and plans; JSON output
  console        the two rich consoles (stdout, stderr), created on first use
  plot_data      the numbers each ``--plot`` picture draws (pure, no matplotlib)
  plots          the figure canvas and file rules of every picture; the memory breakdown bars
  plot_validation, plot_sweep   the validate scatter and the sweep curves (matplotlib imported only when asked for)
  plan_recheck   a plan about to be launched, re-checked with the rules of ``autotune plan``
  plan_verify    ``plan --verify``: trace the chosen setting and the runners-up, re-plan on a miss
  tracing        shared by ``trace``, ``estimate --trace`` and ``plan --verify``: the stated setting, running the trace
  tables         tables that fit the terminal without cutting identifiers or numbers
  validation_text  terminal text of the calibration layer's figures (error summaries, per-source ranking lines)
"""
