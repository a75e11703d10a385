"""The host RAM and disk per node a SkyPilot task asks for, from the plan (``launch --skypilot``)."""

from __future__ import annotations

from pathlib import Path

from autotune.costmodel.node_storage import node_needs
from autotune.errors import InvalidRequestError
from autotune.launcher.options import LaunchOptions
from autotune.schemas.plan import PlanFile
from autotune.session.resolve import catalog_gpu


def with_node_needs(options: LaunchOptions, plan: PlanFile) -> LaunchOptions:
    """``options`` with the host RAM and disk per node the plan needs (``--skypilot`` only; else unchanged).

    The dataset counts when it is a local file (a hub dataset is downloaded into the allowance's caches).

    Raises:
        AutotuneError: the plan's GPU is not in the catalog (one line).
    """
    if not options.skypilot:
        return options
    gpu = catalog_gpu(plan.cluster.gpu)
    if gpu is None:
        raise InvalidRequestError(f"plan cluster.gpu {plan.cluster.gpu!r} is not in the GPU catalog (autotune gpus)")
    dataset = Path(options.dataset)
    dataset_bytes = dataset.stat().st_size if dataset.is_absolute() and dataset.is_file() else 0
    host_gib = plan.prediction.host_memory_gib
    needs = node_needs(plan.model, plan.setting, gpu, plan.cluster.num_gpus_per_node, host_gib, dataset_bytes)
    memory = needs.memory_gib if needs.memory_gib > 0 else None  # QLoRA without offload: no host-RAM floor to ask
    return options.model_copy(update={"node_memory_gib": memory, "node_disk_gib": needs.disk_gib})
