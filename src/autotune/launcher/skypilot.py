"""A SkyPilot task that runs a plan on cloud GPUs (``autotune launch --skypilot``).

The task (``OUT/sky.yaml``) is built from the plan and the launch options; nothing here runs ``sky``. Its fields are
SkyPilot's task YAML (skypilot-org/skypilot ``docs/source/reference/yaml-spec.rst``):

- ``resources.accelerators``: the plan's GPU under SkyPilot's name (:data:`SKYPILOT_ACCELERATORS`) and its GPUs per
  node, e.g. ``H100:8``; ``num_nodes``: the plan's nodes.
- ``workdir``: the autotune source checkout this autotune was installed from (``options.project_dir``); SkyPilot
  syncs it to ``~/sky_workdir`` on every node (leaving out what its ``.gitignore`` lists) and runs ``setup`` and
  ``run`` there.
- ``setup``: the locked install of README.md's first command, in a virtual environment (:data:`NODE_VENV`):
  ``pip install -c constraints.txt torch``, then ``pip install -c constraints.txt -e ".[train,...]"`` with the
  extras the plan and options need (Liger kernels, the ``--report-to`` tracker). On a GPU node PyPI's torch wheel
  is the CUDA build.
- ``file_mounts``: every local path the run reads or writes (the output directory, a local dataset and eval
  dataset, local model weights) is mounted at the **same absolute path** on every node, so the plan file and the
  per-node command name the same paths there as here. SkyPilot syncs an absolute destination outside ``~/`` and
  ``/tmp/`` into a directory of the node's user and links it from the path with ``sudo``
  (``sky/backends/cloud_vm_ray_backend.py``, ``_execute_file_mounts``: ``FileMountHelper.wrap_file_mount`` and
  ``make_safe_symlink_command``), so the run can write there.
- ``run``: the per-node command of a manual launch (:func:`autotune.launcher.command.node_command`) with the
  node rank ``$SKYPILOT_NODE_RANK`` and node 0's address, the first line of ``$SKYPILOT_NODE_IPS`` — SkyPilot's
  multi-node pattern (docs.skypilot.co, "Distributed Multi-Node Jobs"). A relaunch on the same cluster of a
  one-node task resumes a run that trained and starts again one that never did (:func:`resume_lines`).
- ``envs``: :data:`autotune.launcher.command.RUN_ENV`.

Where the ``skypilot`` package is installed (the optional extra), the task is also checked against SkyPilot's own
schema (:func:`skypilot_schema_error`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shlex
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Final

import yaml

from autotune.errors import InvalidRequestError
from autotune.launcher.command import RUN_ENV, comment_text, node_command, output_path, shell_join
from autotune.launcher.options import DEFAULT_MASTER_PORT, SKYPILOT_TASK_FILE, LaunchOptions
from autotune.launcher.slurm import with_interpreter
from autotune.schemas.plan import PlanFile

SKYPILOT_ACCELERATORS: Final[dict[str, tuple[str, ...]]] = {
    "a100-40gb": ("A100",),
    "a100-80gb": ("A100-80GB",),
    "a10g": ("A10G",),
    "h100-80gb": ("H100",),
    "h200": ("H200",),
    "l4": ("L4",),
    "l40s": ("L40S",),
    "mi300x": ("MI300X",),
    "rtx-3090": ("RTX3090",),
    "rtx-4090": ("RTX4090",),
    "rtx-6000-ada": ("RTX6000-Ada",),
    "rtx-a6000": ("A6000", "RTXA6000"),
    "t4": ("T4",),
    "v100-16gb": ("V100",),
    "v100-32gb": ("V100-32GB",),
}
"""Catalog GPU key → SkyPilot's accelerator name(s) for that card, from ``sky show-gpus -a``
(skypilot-org/skypilot ``docs/source/compute/show-gpus-all.txt`` @ 1c9d60b). Two names are one card under two
providers' names (Lambda's ``A6000``, RunPod's ``RTXA6000``); the task lists both and SkyPilot tries them in order.
Cards SkyPilot has no name for (the H100 PCIe: its ``H100`` is the SXM card on most clouds; RTX PRO 6000;
RX 7900 XTX) are refused rather than swapped for another card."""

NODE_VENV: Final[str] = "$HOME/autotune-venv"
"""The virtual environment the setup installs into and the run uses, on each node."""

SKYPILOT_EXTRA: Final[str] = "skypilot"
"""autotune's optional extra that installs SkyPilot (the schema check, and ``sky`` itself)."""

TRACKER_EXTRAS: Final[frozenset[str]] = frozenset({"tensorboard", "wandb", "mlflow", "trackio"})
"""``--report-to`` trackers that are autotune extras of the same name (pyproject.toml)."""

_NODE_RANK = "$SKYPILOT_NODE_RANK"
_MASTER_ADDR = "$MASTER_ADDR"
_MASTER_PORT = "$MASTER_PORT"
_PYTHON = "$AUTOTUNE_PYTHON"
_RESUME = "$AUTOTUNE_RESUME"

RELAUNCH_MODULE: Final[str] = "autotune.launcher.relaunch"
"""Decides on the node whether a relaunch resumes (:mod:`autotune.launcher.relaunch`)."""


def skypilot_task(plan: PlanFile, options: LaunchOptions) -> dict[str, Any]:
    """The SkyPilot task (a YAML mapping) that runs ``plan`` with ``options`` on the plan's GPUs and nodes.

    Pure: no disk, no ``sky``. Field by field: see the module's docstring. ``options`` are ones
    :func:`skypilot_option_error` accepts (:func:`autotune.launcher.spec.build_launch_spec` refuses the others first).

    Raises:
        InvalidRequestError: a GPU SkyPilot has no name for (:func:`skypilot_accelerators`).
    """
    assert options.project_dir is not None, "options skypilot_option_error refuses"
    cluster = plan.cluster
    names = skypilot_accelerators(cluster.gpu)
    count = cluster.num_gpus_per_node
    command = with_interpreter(
        node_command(plan, options, node_rank=_NODE_RANK, master_addr=_MASTER_ADDR, master_port=_MASTER_PORT),
        _PYTHON,
    )
    references = {_NODE_RANK, _MASTER_ADDR, _MASTER_PORT, _PYTHON}
    port = options.main_process_port or DEFAULT_MASTER_PORT
    run = [
        "set -euo pipefail",
        f'export PATH="{NODE_VENV}/bin:$PATH"',
        f'AUTOTUNE_PYTHON="{NODE_VENV}/bin/python"',
        'MASTER_ADDR="$(echo "$SKYPILOT_NODE_IPS" | head -n1)"',
        f"MASTER_PORT={port}",
        "export MASTER_ADDR MASTER_PORT",
        *resume_lines(options, cluster.num_nodes),
        f"{shell_join(command, references)} {_RESUME}",
    ]
    task: dict[str, Any] = {
        "name": f"autotune-{cluster_name_part(plan.model.key)}",
        "num_nodes": cluster.num_nodes,
        "resources": {
            "accelerators": f"{names[0]}:{count}" if len(names) == 1 else [f"{name}:{count}" for name in names]
        },
        "workdir": options.project_dir,
        "envs": dict(RUN_ENV),
        "file_mounts": {path: path for path in mounted_paths(plan, options)},
        "setup": "\n".join(setup_lines(plan, options)) + "\n",
        "run": "\n".join(run) + "\n",
    }
    return task


def resume_lines(options: LaunchOptions, num_nodes: int) -> list[str]:
    """The run script's lines that set ``$AUTOTUNE_RESUME``: what a relaunch on the same cluster does.

    On one node: :mod:`autotune.launcher.relaunch` decides as ``autotune launch`` does here (a run directory that never
    trained starts again, one that did resumes). On several nodes each node holds its own copy of the run directory
    (the checkpoints of a DDP run only on node 0), so the nodes could decide differently: nothing is resumed, and a
    relaunch needs a new output directory or the run directory on storage all nodes share.
    """
    if num_nodes > 1:
        return [
            "# Several nodes keep separate copies of the run directory: a relaunch here does not resume.",
            'AUTOTUNE_RESUME=""',
        ]
    out = shlex.quote(options.output_dir)
    return [
        "# A relaunch on this cluster resumes from the run's newest checkpoint, or starts again if it never trained.",
        f'AUTOTUNE_RESUME="$("$AUTOTUNE_PYTHON" -m {RELAUNCH_MODULE} {out})"',
    ]


class _TaskDumper(yaml.SafeDumper):
    """PyYAML's safe dumper that writes multi-line strings (the ``setup`` / ``run`` scripts) as ``|`` blocks."""


def _represent_string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_TaskDumper.add_representer(str, _represent_string)


def task_yaml(task: dict[str, Any], launch_command: list[str]) -> str:
    """``task`` as YAML text: PyYAML's safe dumper in field order, the ``setup`` / ``run`` scripts as ``|`` blocks.

    A header comment says what wrote it and how to start it (``launch_command``, :func:`sky_launch_command`).
    """
    header = f"# Written by `autotune launch --skypilot`. Start it with: {comment_text(shlex.join(launch_command))}\n"
    return header + yaml.dump(task, Dumper=_TaskDumper, sort_keys=False, allow_unicode=True, width=1_000_000)


def skypilot_option_error(options: LaunchOptions) -> str | None:
    """Why ``--skypilot`` cannot go with the other options given, or None.

    SkyPilot places the processes itself (node ranks, node 0's address), runs on the plan's GPUs (not ``--cpu``), is
    one kind of job beside SLURM's, resumes by itself on a relaunch, and installs from a source checkout.
    """
    if options.slurm:
        return "--skypilot and --slurm each write the job that runs the plan (SkyPilot task, SLURM script): choose one"
    if options.cpu:
        return "--skypilot runs the plan on its GPUs in the cloud, --cpu on this machine's CPU: choose one"
    if options.resume:
        return (
            "--skypilot writes no --resume: launching a one-node task again on the same cluster (sky launch -c NAME "
            "OUT/sky.yaml) resumes from the newest checkpoint there by itself; drop --resume"
        )
    placement = (("--node-rank", options.node_rank), ("--main-process-ip", options.main_process_ip))
    given = [flag for flag, value in placement if value]
    if given:
        return f"--skypilot sets each node's rank and node 0's address itself: drop {' and '.join(given)}"
    if options.project_dir is None:
        return (
            "--skypilot installs autotune on the nodes from the source checkout this autotune was installed from "
            "(pip install -e CHECKOUT, as README.md does); this autotune was not installed from one"
        )
    return None


def skypilot_accelerators(gpu: str) -> tuple[str, ...]:
    """SkyPilot's accelerator name(s) for the catalog GPU ``gpu`` (:data:`SKYPILOT_ACCELERATORS`).

    Raises:
        InvalidRequestError: SkyPilot has no name for that card (the message lists the cards it has).
    """
    names = SKYPILOT_ACCELERATORS.get(gpu)
    if names is None:
        raise InvalidRequestError(
            f"--skypilot: SkyPilot has no accelerator name for {gpu} (sky show-gpus -a); plan for one of "
            f"{', '.join(SKYPILOT_ACCELERATORS)} (autotune plan ... --gpu NAME -o plan.yaml)"
        )
    return names


def mounted_paths(plan: PlanFile, options: LaunchOptions) -> list[str]:
    """The local paths the run reads or writes, mounted at the same path on every node (absolute, no duplicates).

    The output directory always; the dataset, the eval dataset and the model's weights when they are absolute paths
    (``autotune launch`` makes a local dataset absolute; a plan records local weights resolved); hub names stay
    names, downloaded by each node.
    """
    candidates = [options.output_dir, options.dataset, options.eval_dataset, plan.model_source]
    paths: list[str] = []
    for value in candidates:
        if value is None or not PurePosixPath(value).is_absolute():
            continue
        path = str(PurePosixPath(value))  # no trailing slash (SkyPilot's file mounts want none)
        if path not in paths:
            paths.append(path)
    return paths


def setup_lines(plan: PlanFile, options: LaunchOptions) -> list[str]:
    """The node's setup script: a virtual environment with README.md's locked install and the extras the run needs."""
    extras = ["train"]
    if plan.setting.kernels == "liger":
        extras.append("liger")
    if options.report_to in TRACKER_EXTRAS:
        extras.append(options.report_to)
    pip = f'"{NODE_VENV}/bin/pip"'
    return [
        "set -euo pipefail",
        "python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || "
        '{ echo "autotune needs Python 3.10 or newer on the node: $(python3 --version)" >&2; exit 1; }',
        f'python3 -m venv "{NODE_VENV}"',
        f"{pip} install -q --upgrade pip",
        f"{pip} install -q -c constraints.txt torch",
        f"{pip} install -q -c constraints.txt -e {shlex.quote('.[' + ','.join(extras) + ']')}",
    ]


def cluster_name_part(text: str) -> str:
    """``text`` as part of a SkyPilot cluster or task name: lowercase letters, digits and single dashes."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")[:40] or "run"


def cluster_name(options: LaunchOptions) -> str:
    """The cluster name printed in the ``sky launch`` command: ``autotune-`` + the output directory's name."""
    return f"autotune-{cluster_name_part(PurePosixPath(options.output_dir).name)}"


def sky_launch_command(options: LaunchOptions) -> list[str]:
    """``sky launch -c CLUSTER OUT/sky.yaml``: what the user runs to start the task (autotune never runs it)."""
    return ["sky", "launch", "-c", cluster_name(options), output_path(options, SKYPILOT_TASK_FILE)]


def installed_checkout(distribution: str = "autotune") -> str | None:
    """The source checkout ``distribution`` was installed from, or None (installed from an index or a wheel).

    Read from the install's ``direct_url.json`` (PEP 610: ``url`` ``file://...`` with ``dir_info``); a checkout is a
    directory holding ``pyproject.toml`` and the lock ``constraints.txt``.
    """
    try:
        text = metadata.distribution(distribution).read_text("direct_url.json")
        record = json.loads(text) if text else {}
    except (metadata.PackageNotFoundError, ValueError):
        return None
    url = record.get("url", "") if isinstance(record, dict) else ""
    if "dir_info" not in record or not isinstance(url, str) or not url.startswith("file://"):
        return None
    path = Path(url.removeprefix("file://"))
    if not ((path / "pyproject.toml").is_file() and (path / "constraints.txt").is_file()):
        return None
    return str(path)


def skypilot_schema_error(task: dict[str, Any]) -> str | None:
    """Why the installed SkyPilot refuses ``task``, or None when it accepts it.

    Uses SkyPilot's own check (``sky.utils.common_utils.validate_schema`` with ``sky.utils.schemas.get_task_schema()``,
    as ``sky.Task.from_yaml_config`` does).

    Raises:
        ModuleNotFoundError: SkyPilot is not installed (:func:`skypilot_installed` says so first).
    """
    schemas = importlib.import_module("sky.utils.schemas")
    common_utils = importlib.import_module("sky.utils.common_utils")
    try:
        common_utils.validate_schema(task, schemas.get_task_schema(), "")
    except Exception as error:
        lines = str(error).strip().splitlines()
        return lines[0] if lines else type(error).__name__
    return None


def skypilot_installed() -> bool:
    """True when the ``sky`` package (SkyPilot) can be imported here (found, not imported)."""
    return importlib.util.find_spec("sky") is not None
