"""Export a run's weights as a model others load: ``python -m autotune.trainer.export`` (run by ``autotune export``).

- A LoRA / QLoRA run: the adapter as trained (peft's ``adapter_config.json`` + ``adapter_model.safetensors``), or
  with ``--merge`` a full model: the base loaded unquantized in fp32 (a QLoRA base is the original weights, not
  their 4-bit copy; a .gguf dequantized), the adapter merged into it with peft's ``merge_and_unload``
  (W + B·A·alpha/r computed in fp32), then cast once to ``--dtype`` (the CLI passes the plan's compute dtype unless
  told otherwise) and saved with ``save_pretrained`` so that ``AutoModelForCausalLM.from_pretrained(DIR)`` loads
  it. Merging in fp32 rounds W + ΔW once: a base loaded in bf16 would be rounded before ΔW is added and again
  after (peft adds its fp32 ΔW to a bf16 weight in place), which on a .gguf base (weights not bf16 numbers) put
  the merged model farther from the fp32 adapter model than peft's own bf16 forward is
  (``benchmarks/export_merge_error.py``; docs/usage.md "Export a run").
- A full fine-tuning run: its weights as they are (``--merge`` changes nothing).
- Always the tokenizer with its chat template (``save_pretrained``).

The weights are the run's ``final/`` or, with ``--checkpoint NAME``, ``checkpoints/NAME``; before anything is written
they are checked against the manifest the trainer wrote (each file's size, format and SHA-256:
:func:`autotune.trainer.checkpoints.verify_weights`), so a truncated or replaced adapter is refused. The output is
written into a temporary folder beside ``--output`` and renamed into place when complete, so a failed or interrupted
export (SIGINT, SIGTERM: both raise here and remove the folder) leaves no partial model; the folder and its files get
the modes the umask gives, as the run directory does. Errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
"""``--dtype`` names → the torch dtypes of a merged model's weights (the CLI's ``export_cmd.EXPORT_DTYPES``)."""


def export(run_dir: Path, weights: Path, output: Path, merge: bool, dtype_name: str) -> str:
    """Write the model of ``weights`` (a run's ``final/`` or a checkpoint) to ``output``; returns what was written.

    ``dtype_name`` (a key of :data:`TORCH_DTYPES`) is the dtype of a merged model's weights; other exports keep
    the weights as trained.

    Raises:
        ConfigError: the run's plan, its weights or its base model cannot be loaded.
    """
    from autotune.errors import ConfigError
    from autotune.quiet import quiet_third_party

    quiet_third_party()
    from autotune.fileio import give_umask_mode
    from autotune.schemas.plan_io import load_plan
    from autotune.trainer.checkpoints import verify_weights
    from autotune.trainer.model import load_tokenizer, resolve_source

    problem = verify_weights(weights)
    if problem:
        raise ConfigError(f"{weights} is not what the trainer wrote ({problem}); nothing was exported")
    plan = load_plan(run_dir / "plan.yaml")
    setting = plan.setting
    source = resolve_source(plan.model_source)
    tokenizer = load_tokenizer(source)
    output.parent.mkdir(parents=True, exist_ok=True)
    work: Path | None = None
    try:
        work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
        print(f"writing {output} …", file=sys.stderr, flush=True)  # the CLI shows it: the export is under way
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

            dtype = getattr(torch, TORCH_DTYPES[dtype_name])
            # The training core's loader (a .gguf dequantized and made an ordinary model), unquantized (a QLoRA
            # plan's base too: method lora), in fp32: W + ΔW is computed in fp32 and rounded once, by the cast.
            unquantized = setting.model_copy(update={"method": "lora"})
            fp32 = PrecisionChoice(load_dtype=torch.float32, bf16=False, fp16=False)
            base = load_model(source, unquantized, fp32, None)
            try:
                merged = PeftModel.from_pretrained(base, str(weights)).merge_and_unload().to(dtype)
                merged.config.use_cache = True  # a model to generate with (the core trains without the cache)
                merged.save_pretrained(str(work))
            except (OSError, ValueError) as error:
                raise ConfigError(
                    f"cannot merge the adapter of {weights} into {plan.model_source}: {' '.join(str(error).split())}"
                ) from error
            what = f"the base model with the adapter merged ({str(dtype).removeprefix('torch.')})"
        tokenizer.save_pretrained(str(work))
        give_umask_mode(work)  # mkdtemp makes the folder 0700, safetensors its files 0600
        work.rename(output)
    except BaseException:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        raise
    return what


def _save_full(weights: Path, work: Path) -> None:
    """Copy a full fine-tuning run's weight and config files (everything but trainer state) into ``work``."""
    from autotune.trainer.checkpoints import MANIFEST, TRAINER_STATE_PREFIXES

    for path in weights.iterdir():
        if path.is_file() and path.name != MANIFEST and not path.name.startswith(TRAINER_STATE_PREFIXES):
            shutil.copy2(path, work / path.name)


def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM handled as Ctrl-C: the export's ``except BaseException`` removes its temporary folder."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, export, print one line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m autotune.trainer.export", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--merge", action="store_true")
    parser.add_argument("--dtype", choices=sorted(TORCH_DTYPES), required=True, help="a merged model's weights")
    args = parser.parse_args(argv)
    from autotune.errors import exit_code

    def run() -> int:
        what = export(args.run_dir, args.weights, args.output, args.merge, args.dtype)
        print(f"wrote {what} and its tokenizer to {args.output}")
        return 0

    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return exit_code(run)
    except KeyboardInterrupt:
        print(f"error: the export was interrupted; {args.output} was not written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
