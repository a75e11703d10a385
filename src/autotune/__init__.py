"""autotune: plan and launch LLM fine-tuning on the GPUs you have.

The planning side (``autotune.schemas``, ``autotune.profiles``, ``autotune.costmodel``,
``autotune.calibration``, ``autotune.planner``, ``autotune.launcher``) is pure Python and never imports torch; the
training core lives in ``autotune.trainer`` and is the only package that imports the
training stack (torch, transformers, peft, bitsandbytes, accelerate, deepspeed, datasets).

The Python API (:mod:`autotune.api`, docs/api.md): ``from autotune import plan, estimate, grid, launch_spec``;
imported on first use, so that ``import autotune`` (the command line, the training core's process) stays light.

Modules:
  api          plan / estimate / grid / launch_spec for Python callers (the session layer, without the command line)
  session      a request's option groups → plan, estimate or table, with notes (shared by cli and api)
  schemas      pydantic schemas shared by every package (the bottom layer)
  profiles     the shipped catalogs (GPUs, models, measurements, calibration) and the readers of files
  costmodel    the analytic cost model: peak GPU memory and step time of one setting (prediction only)
  calibration  fitting the cost model's coefficients to measured rows and evaluating its predictions
  planner      candidate settings, feasibility, ranking and explanations
  launcher     plan → run directory, configs and the command that starts the training core
  trace        the training step traced on the CPU with fake tensors (imports torch)
  trainer      the shared training core (the only package that imports the training stack)
  cli          the ``autotune`` command line
  errors       the user-facing error types (one line on stderr, exit code 2)
  validation   a pydantic ValidationError as one line for the user
  fileio       atomic file writes (write_atomic)
  yamlio       safe, bounded loading of YAML and JSON files
  units        named constants and unit conversions (bytes per dtype, GiB)
  run_lock     one run per directory (the run lock file)
  hostcpu      this machine's CPU: bf16 instructions, usable physical cores, threads busy now
  quiet        third-party log and warning noise kept off the terminal
"""

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "EstimateOutcome",
    "GridOutcome",
    "LaunchPreview",
    "PlanOutcome",
    "SettingOptions",
    "estimate",
    "grid",
    "launch_spec",
    "plan",
]


def __getattr__(name: str) -> Any:
    """The API's names (``autotune.plan`` …), imported from :mod:`autotune.api` on first use (PEP 562)."""
    if name in __all__:  # by name, not an import statement: the package itself depends on no layer
        import importlib

        return getattr(importlib.import_module("autotune.api"), name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
