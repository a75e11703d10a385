"""The ``autotune`` command line: a thin typer layer of parsing and rendering over the session layer.

What a command asks for (a plan, an estimate, a sweep's requests) is done in :mod:`autotune.session`, which the
Python API (:mod:`autotune.api`) shares; the commands parse their options and render the results.

Modules:
  app            the entry point: the command table (``COMMANDS``), lazy registration, one-line errors (exit 2)
  plan_cmd, estimate_cmd, sweep_cmd, launch_cmd, probe_cmd, calibrate_cmd, validate_cmd, catalog_cmd, trace_cmd
                 one module per command; none imports another, none imports ``app``
  export_cmd     ``autotune export``: its checks here; the export runs in the training core's process
  setting_options  the option groups put into each command's signature by one decorator (``takes_option_groups``),
                 and groups declared by a schema itself (``schema_group``: launch's run options)
  gpu_grid       plan across GPU types and counts: tell the table from one plan, write it (-o), print it
  refit          options, refit-and-write and tables shared by calibrate and probe
  suggest_options  what ``calibrate --suggest K`` does: plan the space, pick the K settings, write the CSV template
  options        typer option types of the single options (model, GPU, sequence length, objective, ...)
  render         rich tables of estimates and plans; JSON output
  console        the two rich consoles (stdout, stderr), created on first use; the session's progress sink
  plot_data      the numbers each ``--plot`` picture draws (pure, no matplotlib)
  plots          the figure canvas and file rules of every picture; the memory breakdown bars
  plot_validation, plot_sweep   the validate scatter and the sweep curves (matplotlib imported only when asked for)
  plan_recheck   a plan about to be launched, re-checked with the rules of ``autotune plan``
  plan_verify    ``plan --verify``: trace the chosen setting and the runners-up, re-plan on a miss
  tracing        shared by ``trace``, ``estimate --trace`` and ``plan --verify``: the torch check, running the trace
  tables         tables that fit the terminal without cutting identifiers or numbers
"""
