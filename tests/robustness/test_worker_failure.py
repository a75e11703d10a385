"""A failed torchrun / accelerate worker ends the launch in one line and the worker's exit code, never a
``ChildFailedError`` traceback (issue 19 item 5). Runs the real ``torch.distributed.run`` with one worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

WORKER = """
import sys
print("error: a refusal by the training core", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[1]))
"""


def _torchrun(script: Path, code: int) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "autotune.trainer.distributed_run", "torchrun", "--standalone"]
    return subprocess.run(
        [*argv, "--nproc_per_node", "1", str(script), str(code)], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize(("code", "lines"), [(2, 1), (3, 2)], ids=["refusal", "failure"])
def test_a_failed_worker_is_one_line_and_its_exit_code(tmp_path: Path, code: int, lines: int) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = _torchrun(script, code)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and "ChildFailedError" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == lines and all(line.startswith("error:") for line in errors), done.stderr
    if code != 2:
        assert f"rank 0 failed (exit code {code})" in errors[-1]


def test_an_unknown_launcher_is_refused() -> None:
    from autotune.trainer.distributed_run import main

    assert main(["mpirun"]) == 2
