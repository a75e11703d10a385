"""A SkyPilot task that runs a plan on cloud GPUs (``autotune launch --skypilot``).

The task (``OUT/sky.yaml``) is built from the plan and the launch options; nothing here runs ``sky``. Its fields are
SkyPilot's task YAML (skypilot-org/skypilot ``docs/source/reference/yaml-spec.rst``):

- ``resources.accelerators``: the plan's GPU under SkyPilot's name (its catalog entry's ``skypilot_offers``:
  :mod:`autotune.launcher.skypilot_offers`) and its GPUs per node, e.g. ``H100-SXM:8``; ``num_nodes``: the plan's
  nodes.
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

import hashlib
import importlib
import importlib.util
import json
import math
import re
import shlex
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Final

import yaml

from autotune.errors import InvalidRequestError
from autotune.launcher.command import RUN_ENV, comment_text, node_command, output_path, shell_join
from autotune.launcher.options import DEFAULT_MASTER_PORT, SKYPILOT_TASK_FILE, LaunchOptions
from autotune.launcher.skypilot_offers import skypilot_resources
from autotune.launcher.slurm import with_interpreter
from autotune.run_lock import LOCK_FILE
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.plan import PlanFile

OUTPUT_MOUNT_MODE: Final[str] = "MOUNT_CACHED"
"""How the output directory's bucket is mounted: SkyPilot's cached mount, which supports every file operation a
checkpoint write needs and uploads asynchronously (docs.skypilot.co, "Cloud Buckets": storage modes MOUNT, COPY,
MOUNT_CACHED; MOUNT streams writes and does not support the random writes and renames of a checkpoint save)."""

MOUNT_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/@+=,:-]*$")
"""What a mounted path may hold: SkyPilot 0.14.1 puts a ``file_mounts`` destination unquoted into the node's
``sudo mkdir -p`` / ``ln -s`` commands (``sky/backends/backend_utils.py``,
``FileMountHelper.make_safe_symlink_command``, read in the 0.14.1 wheel the ``skypilot`` extra pins), so a character
a shell would read (``;``, space, ``$``, quotes, ``*``, a line break, any non-ASCII such as U+0085) would run as a
command there as root. Such paths are refused."""

BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
"""A bucket name every store SkyPilot creates accepts: 3-63 lowercase letters, digits, dots and dashes (S3's rule,
docs.aws.amazon.com "Bucket naming rules"; GCS's is the same for names without dots)."""

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


def skypilot_task(plan: PlanFile, options: LaunchOptions, gpu: GpuSpec | None) -> dict[str, Any]:
    """The SkyPilot task (a YAML mapping) that runs ``plan`` with ``options`` on the plan's GPUs and nodes.

    Pure: no disk, no ``sky``. Field by field: see the module's docstring. ``options`` are ones
    :func:`skypilot_option_error` accepts (:func:`autotune.launcher.spec.build_launch_spec` refuses the others first);
    ``gpu`` is the catalog entry of the plan's GPU (None: not in the catalog), whose SkyPilot offers rent it.

    Raises:
        InvalidRequestError: a GPU SkyPilot has no name for, or no node of the plan's count
            (:func:`autotune.launcher.skypilot_offers.skypilot_resources`).
    """
    assert options.project_dir is not None, "options skypilot_option_error refuses"
    cluster = plan.cluster
    resources = {**skypilot_resources(cluster.gpu, gpu, cluster.num_gpus_per_node), **node_resources(options)}
    mounts = mounted_paths(plan, options)
    check_mount_paths(mounts)
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
        # sed reads all its input: `head -n1` may exit before echo writes the rest, and pipefail then ends the run (141)
        'MASTER_ADDR="$(printf \'%s\\n\' "$SKYPILOT_NODE_IPS" | sed -n 1p)"',
        f"MASTER_PORT={port}",
        "export MASTER_ADDR MASTER_PORT",
        *resume_lines(options, cluster.num_nodes),
        f"{shell_join(command, references)} {_RESUME}",
    ]
    output = {"name": bucket_name(options), "source": options.output_dir, "mode": OUTPUT_MOUNT_MODE}
    task: dict[str, Any] = {
        "name": f"autotune-{cluster_name_part(plan.model.key)}",
        "num_nodes": cluster.num_nodes,
        "resources": resources,
        "workdir": options.project_dir,
        "envs": dict(RUN_ENV),
        "file_mounts": {path: output if path == options.output_dir else path for path in mounts},
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
    lock = shlex.quote(str(PurePosixPath(options.output_dir) / LOCK_FILE))
    return [
        "# The output directory is the task's bucket: a lock in it was left by a node that is gone (a preempted or",
        "# downed one; SkyPilot runs one copy of a one-node task at a time), and its host name is not this node's.",
        f"rm -f {lock}",
        "# A relaunch resumes from the run's newest checkpoint in the bucket, or starts again if it never trained.",
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
    one kind of job beside SLURM's, resumes by itself on a relaunch, and installs from a source checkout; the bucket
    is a name SkyPilot can create (:data:`BUCKET_NAME`).
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
    if options.bucket is not None and not BUCKET_NAME.match(options.bucket):
        return (
            f"--bucket {options.bucket!r}: a bucket name is 3-63 lowercase letters, digits, dots and dashes (SkyPilot "
            "creates it, or reuses the one it created, and uploads the output directory to it)"
        )
    if options.project_dir is None:
        return (
            "--skypilot installs autotune on the nodes from the source checkout this autotune was installed from "
            "(pip install -e CHECKOUT, as README.md does); this autotune was not installed from one"
        )
    return None


def node_resources(options: LaunchOptions) -> dict[str, Any]:
    """``resources`` beyond the accelerators: host RAM and disk the plan needs per node, spot instances.

    ``memory``: ``"N+"`` GiB (SkyPilot's at-least form, docs.skypilot.co "YAML Configuration": ``resources.memory``),
    ``disk_size``: GB of the node's OS disk (SkyPilot's default is 256), both from ``options.node_memory_gib`` /
    ``options.node_disk_gib`` that ``autotune launch`` fills from the plan
    (:func:`autotune.costmodel.node_storage.node_needs`); ``use_spot`` with ``--spot`` (run as a managed job,
    :func:`sky_launch_command`).
    """
    resources: dict[str, Any] = {}
    if options.node_memory_gib is not None:
        resources["memory"] = f"{math.ceil(options.node_memory_gib)}+"
    if options.node_disk_gib is not None:
        resources["disk_size"] = math.ceil(options.node_disk_gib)
    if options.spot:
        resources["use_spot"] = True
    return resources


def check_mount_paths(paths: list[str]) -> None:
    """Refuse a mounted path a shell would read as more than a path (:data:`MOUNT_SAFE_PATH`).

    Raises:
        InvalidRequestError: one line naming the path and the first character refused.
    """
    for path in paths:
        if not MOUNT_SAFE_PATH.match(path):
            bad = next(char for char in path if not MOUNT_SAFE_PATH.match("/" + char))
            raise InvalidRequestError(
                f"--skypilot: {path!r} contains {bad!r}: SkyPilot writes mounted paths unquoted into shell commands "
                "on the node (make_safe_symlink_command); use letters, digits and . _ - / @ + = , : only"
            )


def bucket_name(options: LaunchOptions) -> str:
    """The bucket that holds the output directory: ``--bucket``, else ``autotune-`` + the directory's name + a hash.

    The default is the same for every launch of one output directory (a relaunch finds its checkpoints) and differs
    between directories of the same name (8 hex digits of the absolute path's SHA-256).
    """
    if options.bucket is not None:
        return options.bucket
    digest = hashlib.sha256(options.output_dir.encode()).hexdigest()[:8]
    return f"autotune-{cluster_name_part(PurePosixPath(options.output_dir).name)[:40]}-{digest}"


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
    """What the user runs to start the task (autotune never runs it).

    ``sky launch -c CLUSTER OUT/sky.yaml``; with ``--spot``, ``sky jobs launch -n NAME OUT/sky.yaml``: a managed job,
    which SkyPilot relaunches on a new node after a preemption (docs.skypilot.co, "Managed Jobs"), where the run
    resumes from the newest checkpoint in the bucket (:func:`resume_lines`).
    """
    task = output_path(options, SKYPILOT_TASK_FILE)
    if options.spot:
        return ["sky", "jobs", "launch", "-n", cluster_name(options), task]
    return ["sky", "launch", "-c", cluster_name(options), task]


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
