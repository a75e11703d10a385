"""kernels: liger wired through Liger Kernel's own entry point: the modules and functions it replaces.

Collected only where liger-kernel is installed (the optional extra ``.[liger]``, which pulls a CUDA build of torch;
``tests/conftest.py`` ``OPTIONAL_TEST_MODULES``): CI's install (train, plot, dev) does not collect this module.
"""

from __future__ import annotations

import json
import subprocess
import sys

from trainer_helpers import TINY, trainer_env

LIGER_PROBE = """
import json, torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama
from autotune.schemas.setting import TrainingSetting
from autotune.trainer.kernels import apply_kernels
model = LlamaForCausalLM(LlamaConfig(vocab_size=32, **TINY))
before = {"rope": modeling_llama.apply_rotary_pos_emb}
apply_kernels(model, TrainingSetting(kernels="liger"))
layer = model.model.layers[0]
print(json.dumps({
    "norm": type(model.model.norm).__module__ + "." + type(model.model.norm).__name__,
    "norm_forward": model.model.norm.forward.__func__.__module__,
    "mlp_forward": layer.mlp.forward.__func__.__module__,
    "rope": modeling_llama.apply_rotary_pos_emb.__module__,
    "rope_replaced": modeling_llama.apply_rotary_pos_emb is not before["rope"],
    "forward": model.forward.__func__.__module__,
}))
"""


def test_liger_entry_point_replaces_the_modules_and_functions() -> None:
    """Run in a subprocess: Liger patches transformers' llama module for the whole process."""
    code = f"TINY = {TINY!r}\n" + LIGER_PROBE
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=trainer_env(), check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["norm_forward"].startswith("liger_kernel.transformers.rms_norm"), found
    assert found["mlp_forward"].startswith("liger_kernel.transformers.swiglu"), found
    assert found["rope_replaced"] and found["rope"].startswith("liger_kernel.transformers.rope"), found
    assert found["forward"].startswith("liger_kernel.transformers.model.llama"), found
