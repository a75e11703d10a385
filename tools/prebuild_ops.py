"""Build the DeepSpeed ops the test suite JIT-compiles (``cpu_adam``, ``deepspeed_shm_comm``) into the venv's cache.

``.ci/run`` starts this beside its checks: ``mypy`` keeps one core busy for about a minute on a fresh clone while the
other is idle, and the two ops cost ~3 CPU-minutes (``ninja`` on both cores) that the tests would otherwise spend
inside ``tests/integration/test_distributed.py``'s ZeRO-3 runs (the suite's slowest test, 187 s, was mostly this
build). ``.ci/run`` waits for it before the tests start.

The directory and its lock protocol are the suite's own (``tests/helpers/suite_plugin.py``, ``extensions_dir``):
``<venv>/torch-extensions``, a shared ``flock`` held while building, stale build locks removed when no session uses
it. The builders are the ones DeepSpeed's runtime loads (``deepspeed.accelerator.get_accelerator()
.create_op_builder``; on a CPU machine ``op_builder.cpu``), so the tests' loads find the same ``build.ninja`` and
``ninja`` has no work. Best effort: an op this machine's accelerator lacks, or a build that fails, is one line on
stderr and exit code 1 (the tests then build it themselves, as without this script); nothing is written outside the
venv's ``torch-extensions``.

Usage:  python tools/prebuild_ops.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from suite_plugin import extensions_dir  # noqa: E402  (the suite's lock protocol: one home)

OPS = ("CPUAdamBuilder", "ShareMemCommBuilder")
"""DeepSpeed op builders the suite's CPU runs load: ZeRO offload's CPU Adam, and the CPU backend's shared-memory
collectives (two processes)."""


def main() -> int:
    """Build each of :data:`OPS` under the suite's lock; 0 when all were built (or found built), else 1."""
    root, handle = extensions_dir(Path(sys.prefix))
    os.environ["TORCH_EXTENSIONS_DIR"] = str(root)
    failed = []
    try:
        from deepspeed.accelerator import get_accelerator

        for name in OPS:
            builder = get_accelerator().create_op_builder(name)
            if builder is None or not builder.is_compatible():
                failed.append(f"{name}: not available on this accelerator")
                continue
            try:
                builder.load()
            except Exception as error:  # best effort: the tests build it themselves
                failed.append(f"{name}: {type(error).__name__}: {error}")
    finally:
        if handle is not None:
            handle.close()
    for line in failed:
        print(f"prebuild_ops: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
