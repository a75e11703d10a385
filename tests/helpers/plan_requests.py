"""Plan requests from flat keyword values, as a test writes them (``model=..., gpu=..., method="lora"``)."""

from __future__ import annotations

from autotune.planner.request import PlanRequest
from autotune.session.planning import PLAN_OPTION_NAMES, PlanOptions, request_from_options
from autotune.session.setting_options import SETTING_OPTION_NAMES, SettingOptions


def plan_options(**values: object) -> PlanOptions:
    """``PlanOptions`` from flat values: the setting options go into its ``setting``; an unknown name is a TypeError."""
    unknown = set(values) - set(PLAN_OPTION_NAMES) - set(SETTING_OPTION_NAMES)
    if unknown:
        raise TypeError(f"not a plan option: {sorted(unknown)}")
    setting = SettingOptions(**{name: value for name, value in values.items() if name in SETTING_OPTION_NAMES})  # type: ignore[arg-type]
    plan = {name: value for name, value in values.items() if name in PLAN_OPTION_NAMES}
    return PlanOptions(setting=setting, **plan)  # type: ignore[arg-type]


def plan_request(**values: object) -> tuple[PlanRequest, list[str]]:
    """:func:`autotune.session.planning.request_from_options` of :func:`plan_options` ``(**values)``."""
    return request_from_options(plan_options(**values))
