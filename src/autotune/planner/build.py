"""Turn a search result into the plan file that ``autotune launch`` runs."""

from __future__ import annotations

from autotune import __version__
from autotune.planner.request import PlanRequest
from autotune.planner.search import PlanResult, search
from autotune.schemas.plan import Alternative, ClusterChoice, PlanFile, Rejection
from autotune.schemas.recipe import default_recipe


def build_plan_file(request: PlanRequest, result: PlanResult) -> PlanFile:
    """The PlanFile for the best setting of ``result`` (alternatives and rejections included)."""
    cluster = request.cluster
    return PlanFile(
        autotune_version=__version__,
        model=request.model,
        model_source=request.model_source,
        cluster=ClusterChoice(
            gpu=cluster.gpu.key,
            num_gpus_per_node=cluster.num_gpus_per_node,
            num_nodes=cluster.num_nodes,
            host_memory_gib_per_node=cluster.host_memory_gib_per_node,
            inter_node_gb_per_s=cluster.inter_node_gb_per_s,
            intra_node_gb_per_s=cluster.intra_node_gb_per_s,
            intra_node_bus_measured=cluster.intra_node_bus_measured,
            network=cluster.network,
        ),
        workload=result.planned_workload(request),
        setting=result.best.setting,
        prediction=result.best.estimate,
        training=default_recipe(result.best.setting.method),
        objective=request.objective,
        calibration=request.calibration_name,
        alternatives=[
            Alternative(setting=a.setting, prediction=a.estimate, why_not_chosen=a.why) for a in result.alternatives
        ],
        rejected=[Rejection(family=family, reason=reason) for family, reason in result.rejected],
    )


def plan(request: PlanRequest) -> tuple[PlanFile, PlanResult]:
    """Search and build the plan file in one call."""
    result = search(request)
    return build_plan_file(request, result), result
