"""Imports every command module so that each registers its command on ``app``."""

from autotune.cli import (  # noqa: F401
    calibrate_cmd,
    catalog_cmd,
    estimate_cmd,
    launch_cmd,
    plan_cmd,
    probe_cmd,
    sweep_cmd,
    trace_cmd,
    validate_cmd,
)
