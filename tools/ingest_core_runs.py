"""Ingest the project's own training-core runs (``autotune launch`` run directories) as a measurement set.

Reads every run directory under ``src/autotune/profiles/measurements/autotune-core-h100/`` (copied verbatim from the
H100 session; ``README.md`` there gives the conditions) the way ``autotune calibrate`` reads them
(``recalibrate.collect``: the run report's measured peak allocated memory, median micro-step and step times, the
plan's model) and writes ``src/autotune/profiles/measurements/autotune-core-h100.yaml``, the shipped source
``autotune-core-h100`` that the seed fit weights first (``profiles.measurements.CORE_SOURCE``, ``time_fit``).

The runs predate ``TrainingSetting.adapter_dtype``: their plans are version 1 and peft ran its default
``autocast_adapter_dtype=True`` (fp32 adapters, 0.16 GiB for 42M adapter parameters in the README), so every adapter
row states ``adapter_dtype: fp32``.

Usage:  python tools/ingest_core_runs.py [--check]   (--check: exit 1 when the shipped file differs)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from autotune.calibration.recalibrate import collect
from autotune.profiles.measurements import CORE_SOURCE
from autotune.schemas.calibration import Measurement, MeasurementSet
from autotune.schemas.plan_io import load_plan

ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = ROOT / "src" / "autotune" / "profiles" / "measurements"
RUNS = MEASUREMENTS / CORE_SOURCE
OUT = MEASUREMENTS / f"{CORE_SOURCE}.yaml"

MAPPING_NOTES = """\
Notes on the mapping (ours, not the runs'): one row per run directory, read as `autotune calibrate` reads it
(recalibrate.collect): peak_memory_gib = torch.cuda.max_memory_allocated (kind allocated), micro_step_time_s and
step_time_s = the run report's medians (first optimizer step excluded). adapter_dtype fp32 on the adapter rows: the
plans are version 1 (before adapter_dtype) and peft's get_peft_model ran its default autocast_adapter_dtype=True
(fp32 adapters). The model is the catalog's llama3-8b (the plans' config.json is the same shape)."""


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def row(measurement: Measurement, run: str) -> Measurement:
    """The shipped row of one run: source ``autotune-core-h100: RUN``, adapters' dtype stated."""
    setting = measurement.setting
    notes = measurement.notes
    if setting.uses_adapters:
        setting = setting.model_copy(update={"adapter_dtype": "fp32"})
        notes += "; adapter_dtype fp32: peft's default autocast_adapter_dtype=True (a version-1 plan)"
    return measurement.model_copy(
        update={"id": f"core-h100-{run}", "source": f"{CORE_SOURCE}: {run}", "setting": setting, "notes": notes}
    )


def build() -> str:
    """The YAML text of the measurement set."""
    runs = sorted(path for path in RUNS.iterdir() if (path / "run_report.json").is_file())
    collected = collect(runs, load_plan)
    if collected.skipped:
        raise SystemExit("unusable run directories: " + "; ".join(collected.skipped))
    readme = (RUNS / "README.md").read_text(encoding="utf-8").strip()
    measurement_set = MeasurementSet(
        name=CORE_SOURCE,
        source=f"autotune launch run directories, profiles/measurements/{CORE_SOURCE}/ (README.md there)",
        conditions=readme + "\n\n" + MAPPING_NOTES,
        measurements=[row(case.measurement, run.name) for case, run in zip(collected.cases, runs, strict=True)],
    )
    return yaml.dump(
        measurement_set.model_dump(mode="json", exclude_none=True),
        Dumper=_Dumper,
        sort_keys=False,
        width=110,
        allow_unicode=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Write the measurement file built from the run directories (``--check``: only compare); returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the shipped file differs; write nothing")
    args = parser.parse_args(argv)
    text = build()
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print("no difference" if same else f"{OUT.relative_to(ROOT)} differs from the run directories")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
