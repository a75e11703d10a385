"""The plan's GPUs against this machine's: how many are visible and which catalog card they are.

One rule for ``autotune launch`` (the ``GPU`` launch check: too few GPUs, or a smaller card than the plan's predicted
peak needs, is refused; another card is a warning) and ``autotune probe`` (which calibrates the card it finds).
The GPUs come from :func:`autotune.launcher.gpus.detect_gpus` (``nvidia-smi -L`` / ``rocm-smi``, no torch) and are
narrowed by ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` / ``ROCR_VISIBLE_DEVICES`` as the CUDA and ROCm
runtimes narrow them (a comma-separated list of indices or UUIDs; an empty value hides every GPU).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from autotune.schemas.hardware import GpuSpec
from autotune.schemas.plan import ClusterChoice

GpuResolver = Callable[[str], GpuSpec | None]
"""A GPU name as the driver tool prints it → its catalog entry, or None (the CLI passes the catalog's lookup in:
the launcher does not read the catalogs)."""

VISIBLE_DEVICES_VARIABLES: Final[tuple[str, ...]] = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)
"""Variables that narrow the GPUs a process sees (CUDA programming guide, "CUDA Environment Variables"; ROCm docs,
"GPU isolation techniques"); the first one set counts."""


@dataclass(frozen=True)
class MachineGpus:
    """This machine's GPUs as a launch would see them.

    Attributes:
        visible: GPUs the training processes would see (after the visible-devices variable).
        name: the first GPU's name as the driver tool prints it ('' when none was found).
        spec: its catalog entry, or None when the name is not in the catalog.
        narrowed_by: ``'CUDA_VISIBLE_DEVICES=0,1'`` when a variable narrowed the count, else ''.
    """

    visible: int
    name: str
    spec: GpuSpec | None
    narrowed_by: str = ""


def machine_gpus(names: list[str], resolve: GpuResolver, environ: Mapping[str, str] | None = None) -> MachineGpus:
    """The GPUs of ``names`` (``detect_gpus()``'s list) that a process launched with ``environ`` sees.

    ``resolve`` finds the first name's catalog entry (None when it is not in the catalog).

    Returns:
        :class:`MachineGpus`; ``visible`` is at most ``len(names)``.
    """
    environ = os.environ if environ is None else environ
    visible, narrowed_by = len(names), ""
    for variable in VISIBLE_DEVICES_VARIABLES:
        value = environ.get(variable)
        if value is not None:
            entries = [entry for entry in value.split(",") if entry.strip()]
            visible, narrowed_by = min(len(entries), len(names)), f"{variable}={value}"
            break
    name = names[0] if names else ""
    return MachineGpus(visible=visible, name=name, spec=resolve(name) if name else None, narrowed_by=narrowed_by)


def too_few_gpus(cluster: ClusterChoice, found: MachineGpus) -> str | None:
    """One line when ``found`` shows fewer GPUs than the plan runs per node, else None."""
    if found.visible >= cluster.num_gpus_per_node:
        return None
    where = f", {found.narrowed_by}" if found.narrowed_by else ""
    return (
        f"the plan runs {cluster.num_gpus_per_node} GPUs per node, this machine shows {found.visible} "
        f"({found.name or 'none found'}{where})"
    )
