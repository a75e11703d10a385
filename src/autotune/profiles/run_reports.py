"""Run reports (``RUN/run_report.json`` written by the training core) read as measurements.

Assumptions (and why):
  * A CPU run (``memory_kind: cpu-rss``) measures the host process's resident set, not a GPU's memory or
    time, so it cannot calibrate a GPU prediction: :class:`UnusableRunError`.
  * A run that failed with an out-of-memory error is an OOM row (validated, not fitted; see
    :mod:`autotune.calibration.fit`).
  * The GPU measured is the device the run used when its name is in the catalog (the report's ``gpu`` is
    the planned card, which need not be the device), else the planned card.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from autotune import yamlio
from autotune.errors import AutotuneError, ConfigError
from autotune.profiles.catalog import resolve_gpu
from autotune.schemas.calibration import Measurement
from autotune.schemas.run_report import RunReport
from autotune.validation import format_validation_error

RUN_REPORT_FILE = "run_report.json"
PLAN_FILE = "plan.yaml"
OOM_MARKERS = ("outofmemoryerror", "out of memory")
"""Substrings (lower case) of a failed run's message that mean the run ran out of GPU memory
(``torch.OutOfMemoryError`` / "CUDA out of memory. Tried to allocate ..." / "HIP out of memory")."""


class UnusableRunError(ConfigError):
    """A run report that cannot calibrate a GPU prediction (CPU run, failed run); the message says why."""


def load_run_report(run_dir: str | Path) -> RunReport:
    """Read ``RUN/run_report.json``.

    Raises:
        ConfigError: no report in the directory, or a malformed one (one line naming the file).
    """
    path = Path(run_dir) / RUN_REPORT_FILE
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no {RUN_REPORT_FILE} (is it a run directory written by autotune launch?)")
    data = yamlio.parse_json(yamlio.read_text_file(path, "run report"), str(path), "run report")
    try:
        return RunReport.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{path}: not a valid run report: {format_validation_error(error, RunReport)}") from None


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def _device_gpu_key(device: str) -> str | None:
    """Catalog key of the device named in 'cuda:0 (NVIDIA GeForce RTX 4090)', or None if not in the catalog."""
    if "(" not in device or not device.endswith(")"):
        return None
    name = device[device.index("(") + 1 : -1]
    try:
        return resolve_gpu(name)[0].key
    except AutotuneError:
        return None


def measurement_from_run_report(report: RunReport, run_dir: str | Path) -> Measurement:
    """One measurement from a run report: id = the run directory's name, source = its path.

    Memory is ``peak_memory_gib_measured`` (kind ``allocated``, i.e. ``torch.cuda.max_memory_allocated``,
    max over ranks); times are the median micro-step and optimizer-step times. A run that failed out of
    memory becomes an OOM row. The cluster is one node of ``world_size`` GPUs (:func:`case_from_run`
    takes the node layout from the plan when there is one).

    Raises:
        UnusableRunError: a CPU run (``cpu-rss`` measures the host process, not a GPU), a run that failed
            for another reason than memory, or one without any measured figure.
    """
    run = Path(run_dir)
    if report.memory_kind != "allocated":
        raise UnusableRunError(
            f"{run}: a CPU run ({report.memory_kind} measures the host process, not a GPU): it cannot "
            "calibrate GPU memory or GPU time"
        )
    oom = report.status == "failed" and any(marker in report.message.lower() for marker in OOM_MARKERS)
    if report.status == "failed" and not oom:
        raise UnusableRunError(f"{run}: the run failed ({report.message[:120]}): nothing measured to calibrate")
    memory = None if oom else _positive(report.peak_memory_gib_measured)
    micro = None if oom else _positive(report.micro_step_time_s_measured)
    step = None if oom else _positive(report.step_time_s_measured)
    if not oom and memory is None and micro is None and step is None:
        raise UnusableRunError(f"{run}: the report has no measured memory or time")
    gpu = report.gpu
    notes = f"{report.status} run of {report.steps}/{report.max_steps} steps on {report.device}"
    device_key = _device_gpu_key(report.device)
    if device_key is not None and device_key != report.gpu:
        gpu = device_key
        notes += f"; planned for {report.gpu}, measured on {device_key}"
    try:
        return Measurement(
            id=run.resolve().name,
            source=str(run.resolve()),
            model=report.model,
            gpu=gpu,
            num_gpus_per_node=report.world_size,
            setting=report.setting,
            workload=report.workload,
            oom=oom,
            peak_memory_gib=memory,
            memory_kind="allocated",
            micro_step_time_s=micro,
            step_time_s=step,
            notes=notes,
        )
    except ValidationError as error:  # a hand-edited report: out-of-range figures are refused like any input
        raise ConfigError(f"{run / 'run_report.json'}: {format_validation_error(error, Measurement)}") from None
