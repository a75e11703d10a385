"""A SLURM batch script that runs a plan on its nodes (``autotune launch --slurm``).

One task per node (``--ntasks-per-node=1``); each task runs the same per-node command as a manual
launch (torchrun / accelerate launch / python), with its node rank from ``$SLURM_NODEID`` and node 0
(the first host of ``scontrol show hostnames $SLURM_JOB_NODELIST``) as the rendezvous address.
The launchers and the trainer run with ``options.python`` (``autotune launch`` passes ``sys.executable``:
``torchrun`` becomes ``PYTHON -m torch.distributed.run``, ``accelerate`` ``PYTHON -m
accelerate.commands.accelerate_cli``), and that interpreter's directory is put first on ``PATH``, so the
job uses the environment that planned it even when it is not activated where the job runs.
"""

from __future__ import annotations

import posixpath
import shlex

from autotune.launcher.command import RUN_ENV, comment_text, node_command, output_path, shell_join
from autotune.launcher.options import DEFAULT_MASTER_PORT, INTERPRETER_MODULES, SLURM_SCRIPT_FILE, LaunchOptions
from autotune.schemas.plan import PlanFile

_NODE_RANK = "$SLURM_NODEID"
_MASTER_ADDR = "$MASTER_ADDR"
_MASTER_PORT = "$MASTER_PORT"
_REFERENCES = frozenset({_NODE_RANK, _MASTER_ADDR, _MASTER_PORT})


def slurm_script(plan: PlanFile, options: LaunchOptions) -> str:
    """The text of an sbatch script for ``plan`` (any number of nodes; GPUs requested unless ``--cpu``).

    The per-node command is built by :func:`autotune.launcher.command.node_command` with shell
    references for the node rank, address and port, then quoted for ``bash -c`` so those references
    are expanded on each node.
    """
    cluster = plan.cluster
    command = with_interpreter(
        node_command(plan, options, node_rank=_NODE_RANK, master_addr=_MASTER_ADDR, master_port=_MASTER_PORT),
        options.python,
    )
    port = options.main_process_port or DEFAULT_MASTER_PORT
    lines = [
        "#!/bin/bash",
        f"# Written by `autotune launch --slurm`: {comment_text(plan.model.key)}, {plan.setting.short()},",
        f"# {cluster.num_nodes} node(s) x {cluster.num_gpus_per_node} {comment_text(cluster.gpu)}.",
        f"# Submit with: sbatch {shlex.quote(output_path(options, SLURM_SCRIPT_FILE))}",
        f"#SBATCH --job-name=autotune-{_job_name(plan.model.key)}",
        f"#SBATCH --nodes={cluster.num_nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if not options.cpu:
        lines.append(f"#SBATCH --gpus-per-node={cluster.num_gpus_per_node}")
    lines += [
        f"#SBATCH --output={_sbatch_value(output_path(options, 'slurm-%j.out'))}",
        "",
        "set -euo pipefail",
        *([f'export PATH={shlex.quote(posixpath.dirname(options.python))}:"$PATH"'] if "/" in options.python else []),
        *(f"export {name}={shlex.quote(value)}" for name, value in RUN_ENV.items()),
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        f"MASTER_PORT={port}",
        "export MASTER_ADDR MASTER_PORT",
        "",
        f"srun --nodes={cluster.num_nodes} --ntasks-per-node=1 bash -c {shlex.quote(shell_join(command, _REFERENCES))}",
        "",
    ]
    return "\n".join(lines)


def with_interpreter(argv: list[str], python: str) -> list[str]:
    """``argv`` with ``python`` / ``torchrun`` / ``accelerate`` run by the interpreter ``python``."""
    modules = INTERPRETER_MODULES.get(argv[0])
    return argv if modules is None else [python, *modules, *argv[1:]]


def _sbatch_value(value: str) -> str:
    """A value for an ``#SBATCH`` line: double-quoted when it has whitespace (sbatch reads quoted values).

    Control characters and ``"`` are refused before (``command.check_values``); checked again here.
    """
    if any(ord(char) < 32 or char in '"\x7f' for char in value):
        raise ValueError(f"unsafe #SBATCH value {value!r}")
    return f'"{value}"' if any(char.isspace() for char in value) else value


def _job_name(key: str) -> str:
    return "".join(char if char.isalnum() or char in "-_." else "-" for char in key)
