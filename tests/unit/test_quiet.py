"""Third-party output stays off stderr unless asked for, so a user error is one line (autotune.quiet)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

# What the libraries do at import, reproduced without them: bitsandbytes 0.50 logs a warning from a module
# logger (backends/cpu/ops.py), DeepSpeed creates its own logger with a level and a handler
# (utils/logging.py, LoggerFactory.create_logger) and warns through it, peft / transformers warn.
_NOISY_IMPORTS = """
import logging, sys, warnings
logging.getLogger("bitsandbytes.backends.cpu.ops").warning(
    "Failed to load CPU gemm_4bit_forward from kernels-community: No module named 'kernels'")
ds = logging.getLogger("DeepSpeed")
ds.setLevel(logging.INFO)
handler = logging.StreamHandler(sys.stderr)
handler.setLevel(logging.INFO)
ds.addHandler(handler)
ds.warning("Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.")
warnings.warn_explicit("`torch_dtype` is deprecated", FutureWarning, "modeling_utils.py", 1, module="transformers.x")
logging.getLogger("autotune.trainer").error("error: our own line")
"""


def _run(script: str, verbose: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_VERBOSE", "PYTHONWARNINGS")}
    if verbose:
        env["AUTOTUNE_VERBOSE"] = "1"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env, timeout=120
    )


def test_library_noise_is_dropped_and_our_line_kept() -> None:
    proc = _run("from autotune.quiet import quiet_third_party\nquiet_third_party()\n" + _NOISY_IMPORTS, False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ["ERROR autotune.trainer: error: our own line"]


def test_verbose_keeps_library_output() -> None:
    proc = _run("from autotune.quiet import quiet_third_party\nquiet_third_party()\n" + _NOISY_IMPORTS, True)
    assert proc.returncode == 0, proc.stderr
    assert "gemm_4bit_forward" in proc.stderr
    assert "Setting accelerator to CPU" in proc.stderr
    assert "torch_dtype" in proc.stderr


def test_without_quiet_the_noise_reaches_stderr() -> None:
    """The emulation is real: without autotune.quiet the same script prints the library lines."""
    proc = _run(_NOISY_IMPORTS, False)
    assert "gemm_4bit_forward" in proc.stderr
    assert "Setting accelerator to CPU" in proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs autotune[train]")
def test_real_training_stack_imports_silently() -> None:
    """DeepSpeed warns on import on a machine without a GPU; bitsandbytes on CPUs with AVX512-BF16."""
    script = """
    from autotune.quiet import quiet_third_party
    quiet_third_party()
    import deepspeed, transformers, peft, accelerate, bitsandbytes, datasets
    quiet_third_party()
    """
    proc = _run(script, False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == ""
