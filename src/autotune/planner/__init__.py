"""The planner: candidate space, feasibility, ranking and explanations (pure Python, no torch).

Modules:
  lever_hints    a refusal's hint that names a lever (the global batch the optimizer in backward fits at)
  batch_choice   the global batch the planner chooses where none was stated and nothing fits at the default
  precision_choice  pure bf16 against bf16-mixed for full fine-tuning: the search, quality's order, the note
  fp8_choice     FP8 linears in the search: offered where public figures back them, kept where ≥ 5 % faster
  request   PlanRequest and the user's fixed choices (Overrides)
  space     the candidate settings of a request and what is refused up front
  search    estimate every candidate, rank, choose
  search_memo  each request's search outcome, kept per process (a sweep's refusals ask the same searches)
  refusals  why each rejected family and a refused request do not fit, in one line each
  fit       why a predicted setting does not fit, in one line
  build     PlanFile from a request and its search result
  sweep     plan over a grid of sequence lengths / methods
  grid      plan every GPU type × count, choose by time or cost under a deadline / budget
  packing   a dataset's layout, packed or padded: the faster whole run
  evaluation  the eval set in the workload: held out of the training set, priced per eval
"""

from autotune.planner.build import build_plan_file, plan
from autotune.planner.request import Overrides, PlanRequest
from autotune.planner.search import PlanResult, Scored, search

__all__ = ["Overrides", "PlanRequest", "PlanResult", "Scored", "build_plan_file", "plan", "search"]
