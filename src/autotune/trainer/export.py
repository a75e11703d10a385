"""Export a run's weights as a model others load: ``python -m autotune.trainer.export`` (run by ``autotune export``).

- A LoRA / QLoRA run: the adapter as trained (peft's ``adapter_config.json`` + ``adapter_model.safetensors``), or
  with ``--merge`` a full model: the base loaded unquantized in the plan's compute dtype (bf16 / fp16, fp32 for an
  fp32 plan; a QLoRA base is the original weights, not their 4-bit copy), the adapter merged into it with peft's
  ``merge_and_unload`` (W + B·A·alpha/r), saved with ``save_pretrained`` so that
  ``AutoModelForCausalLM.from_pretrained(DIR)`` loads it.
- A full fine-tuning run: its weights as they are (``--merge`` changes nothing).
- Always the tokenizer with its chat template (``save_pretrained``).

The weights are the run's ``final/`` or, with ``--checkpoint NAME``, ``checkpoints/NAME``. The output is written
into a temporary folder beside ``--output`` and renamed into place when complete, so a failed export leaves no
partial model. Errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path


def export(run_dir: Path, weights: Path, output: Path, merge: bool) -> str:
    """Write the model of ``weights`` (a run's ``final/`` or a checkpoint) to ``output``; returns what was written.

    Raises:
        ConfigError: the run's plan, its weights or its base model cannot be loaded.
    """
    from autotune.errors import ConfigError
    from autotune.quiet import quiet_third_party

    quiet_third_party()
    from autotune.schemas.plan_io import load_plan
    from autotune.trainer.model import load_tokenizer, resolve_source

    plan = load_plan(run_dir / "plan.yaml")
    setting = plan.setting
    source = resolve_source(plan.model_source)
    tokenizer = load_tokenizer(source)
    output.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        if not setting.uses_adapters:
            _save_full(weights, work)
            what = "the fine-tuned model"
        elif not merge:
            for name in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"):
                if (weights / name).is_file():
                    shutil.copy2(weights / name, work / name)
            what = "the LoRA adapter"
        else:
            import torch
            from peft import PeftModel

            from autotune.trainer.model import PrecisionChoice, load_model

            compute = {"bf16": torch.bfloat16, "bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}
            dtype = compute.get(setting.precision, torch.float32)  # the plan's compute dtype (fp32 plans: fp32)
            # The training core's loader (a .gguf dequantized and made an ordinary model), unquantized (a QLoRA
            # plan's base too: method lora), in the compute dtype.
            unquantized = setting.model_copy(update={"method": "lora"})
            base = load_model(source, unquantized, PrecisionChoice(load_dtype=dtype, bf16=False, fp16=False), None)
            try:
                merged = PeftModel.from_pretrained(base, str(weights)).merge_and_unload()
                merged.config.use_cache = True  # a model to generate with (the core trains without the cache)
                merged.save_pretrained(str(work))
            except (OSError, ValueError) as error:
                raise ConfigError(
                    f"cannot merge the adapter of {weights} into {plan.model_source}: {' '.join(str(error).split())}"
                ) from error
            what = f"the base model with the adapter merged ({str(dtype).removeprefix('torch.')})"
        tokenizer.save_pretrained(str(work))
        work.rename(output)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return what


def _save_full(weights: Path, work: Path) -> None:
    """Copy a full fine-tuning run's weight and config files (everything but trainer state) into ``work``."""
    for path in weights.iterdir():
        if path.is_file() and not path.name.startswith(("optimizer", "scheduler", "rng_state", "trainer_state")):
            shutil.copy2(path, work / path.name)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, export, print one line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m autotune.trainer.export", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--merge", action="store_true")
    args = parser.parse_args(argv)
    from autotune.errors import AutotuneError

    try:
        what = export(args.run_dir, args.weights, args.output, args.merge)
    except AutotuneError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {what} and its tokenizer to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
