"""``launch``'s SkyPilot options, declared once as a typed group, and the node needs the task gets from the plan.

:class:`CloudOptions` holds ``--bucket`` and ``--spot`` (help from :class:`autotune.launcher.LaunchOptions`' field
descriptions, the one text); :func:`takes_cloud_options` puts them into a command's signature in place of its
``cloud: CloudOptions`` parameter, as :func:`autotune.cli.setting_options.takes_setting_options` does for the setting.
:func:`with_node_needs` fills the host RAM and disk the task asks for (:mod:`autotune.costmodel.node_storage`).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from autotune.launcher.options import LaunchOptions
from autotune.schemas.plan import PlanFile

CommandT = TypeVar("CommandT", bound=Callable[..., None])


def _help(name: str) -> str:
    return LaunchOptions.model_fields[name].description or ""


@dataclass(frozen=True)
class CloudOptions:
    """``--bucket`` and ``--spot`` as given (None / False: not given)."""

    bucket: Annotated[str | None, typer.Option("--bucket", help=_help("bucket"))] = None
    spot: Annotated[bool, typer.Option("--spot", help=_help("spot"))] = False

    def values(self) -> dict[str, Any]:
        """The given options as :class:`LaunchOptions` fields (only those given, so defaults stay unset)."""
        given: dict[str, Any] = {}
        if self.bucket is not None:
            given["bucket"] = self.bucket
        if self.spot:
            given["spot"] = True
        return given


CLOUD_OPTION_NAMES = tuple(field.name for field in fields(CloudOptions))


def takes_cloud_options(command: CommandT) -> Callable[..., None]:
    """Decorate a command whose ``cloud: CloudOptions`` parameter stands for the SkyPilot options.

    The command's signature gets one typer option per :class:`CloudOptions` field in place of ``cloud``; the wrapper
    builds the :class:`CloudOptions` and calls the command with it.
    """
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)
    group_hints = typing.get_type_hints(CloudOptions, include_extras=True)
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.name == "cloud":
            parameters += [
                inspect.Parameter(
                    field.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=field.default,
                    annotation=group_hints[field.name],
                )
                for field in fields(CloudOptions)
            ]
        else:
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[parameter.name]))

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        cloud = CloudOptions(**{name: values.pop(name) for name in CLOUD_OPTION_NAMES})
        command(cloud=cloud, **values)

    wrapper.__signature__ = signature.replace(parameters=parameters, return_annotation=None)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return wrapper


def with_node_needs(options: LaunchOptions, plan: PlanFile) -> LaunchOptions:
    """``options`` with the host RAM and disk per node the plan needs (``--skypilot`` only; else unchanged).

    The dataset counts when it is a local file (a hub dataset is downloaded into the allowance's caches).

    Raises:
        AutotuneError: the plan's GPU is not in the catalog (one line).
    """
    if not options.skypilot:
        return options
    from autotune.cli.resolve import catalog_gpu
    from autotune.costmodel.node_storage import node_needs
    from autotune.errors import InvalidRequestError

    gpu = catalog_gpu(plan.cluster.gpu)
    if gpu is None:
        raise InvalidRequestError(f"plan cluster.gpu {plan.cluster.gpu!r} is not in the GPU catalog (autotune gpus)")
    dataset = Path(options.dataset)
    dataset_bytes = dataset.stat().st_size if dataset.is_absolute() and dataset.is_file() else 0
    host_gib = plan.prediction.host_memory_gib
    needs = node_needs(plan.model, plan.setting, gpu, plan.cluster.num_gpus_per_node, host_gib, dataset_bytes)
    memory = needs.memory_gib if needs.memory_gib > 0 else None  # QLoRA without offload: no host-RAM floor to ask
    return options.model_copy(update={"node_memory_gib": memory, "node_disk_gib": needs.disk_gib})
