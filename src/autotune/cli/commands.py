"""Imports every command module so that each registers its command on ``app``."""

from autotune.cli import catalog_cmd, estimate_cmd, launch_cmd, plan_cmd, sweep_cmd, validate_cmd  # noqa: F401
