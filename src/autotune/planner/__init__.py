"""The planner: candidate space, feasibility, ranking and explanations (pure Python, no torch)."""

from autotune.planner.build import build_plan_file, plan
from autotune.planner.request import Overrides, PlanRequest
from autotune.planner.search import PlanResult, Scored, search

__all__ = ["Overrides", "PlanRequest", "PlanResult", "Scored", "build_plan_file", "plan", "search"]
