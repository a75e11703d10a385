"""Write a randomly initialised bf16 Hugging Face model directory from a config.json (no download).

usage: python benchmarks/gpu_kit/make_model.py CONFIG.json OUT_DIR [--device cuda|cpu]

The byte-level tokenizer in ``benchmarks/gpu_kit/tok`` is copied beside the weights: 256 byte ids plus
``<|begin_of_text|>`` (256), ``<|end_of_text|>`` (257) and ``<|pad|>`` (258), valid for any vocabulary of at least
259 ids; one token per byte of text. Memory and speed of a training step do not depend on the weights' values, so
random weights measure what the real checkpoint would (an 8B model takes about 40 s to write on an H100 machine).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

TOKENIZER_DIR = Path(__file__).resolve().parent / "tok"


def main(argv: list[str]) -> int:
    """Build, save and report the parameter count; returns the exit code."""
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--device"):
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    config_path, out = Path(argv[0]), Path(argv[1])
    device = argv[3] if len(argv) == 4 else "cuda"
    start_s = time.perf_counter()
    config = AutoConfig.for_model(**json.loads(config_path.read_text()))
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out)
    for path in TOKENIZER_DIR.iterdir():
        shutil.copy(path, out / path.name)
    print(f"{out}: {parameters / 1e9:.3f}B parameters, written in {time.perf_counter() - start_s:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
