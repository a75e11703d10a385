"""The baseline a user would write by hand: transformers Trainer + peft on the same model, data and setting.

usage: python benchmarks/gpu_kit/plain_hf.py MODEL_DIR DATA.jsonl SEQ MBS GA STEPS METHOD CKPT
METHOD: lora | qlora | full; CKPT: 0 | 1. Prints one JSON line starting with ``{"baseline"``: tokens/s over the steps
after the first (warm-up), peak allocated / reserved GiB.

What it runs is what the peft / transformers documentation shows: bf16 weights (pure bf16 for lora and full,
``bf16=True`` autocast for qlora, as the QLoRA notebooks do after ``prepare_model_for_kbit_training``), LoRA rank 16,
alpha 32, dropout 0.05, ``target_modules="all-linear"``, peft's default adapter dtype (fp32), 4-bit NF4 with double
quantization and bf16 compute for qlora, AdamW (torch), learning rate 2e-4, packed blocks of SEQ tokens.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import torch
from datasets import Dataset, load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


class StepTimer(TrainerCallback):
    """Wall time at each step begin and at the end (synchronised with the GPU)."""

    def __init__(self) -> None:
        """Start with no times recorded."""
        self.times_s: list[float] = []

    def _mark(self) -> None:
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        self.times_s.append(time.perf_counter())

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Record the time at the step's begin."""
        self._mark()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Record the time at the end of training."""
        self._mark()


def load(model_dir: str, method: str, ckpt: bool) -> Any:
    """The model as the user's script would build it."""
    if method == "qlora":
        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig

        quant = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
        model = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.bfloat16, quantization_config=quant, device_map={"": 0}, attn_implementation="sdpa"
        )
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=ckpt)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, attn_implementation="sdpa")
        model = model.to(DEVICE)
    if method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM")
        model = get_peft_model(model, lora)
        if ckpt:
            model.enable_input_require_grads()
    model.config.use_cache = False
    return model


def main(argv: list[str]) -> int:
    """Train STEPS optimizer steps and print the JSON line; returns the exit code."""
    model_dir, data, seq_text, mbs_text, ga_text, steps_text, method, ckpt_text = argv
    seq, mbs, ga, steps, ckpt = int(seq_text), int(mbs_text), int(ga_text), int(steps_text), ckpt_text == "1"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    raw = load_dataset("json", data_files=data, split="train")
    ids = [t for row in raw["text"] for t in [*tokenizer(row)["input_ids"], tokenizer.eos_token_id]]
    blocks = [ids[i : i + seq] for i in range(0, len(ids) - seq + 1, seq)]
    dataset = Dataset.from_dict({"input_ids": blocks, "labels": blocks})
    model = load(model_dir, method, ckpt)
    timer = StepTimer()
    args = TrainingArguments(
        output_dir="/tmp/plain_hf",
        per_device_train_batch_size=mbs,
        gradient_accumulation_steps=ga,
        max_steps=steps,
        bf16=method == "qlora",
        use_cpu=DEVICE == "cpu",
        learning_rate=2e-4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        gradient_checkpointing=ckpt,
        gradient_checkpointing_kwargs={"use_reentrant": False} if ckpt else None,
        optim="adamw_torch",
        dataloader_num_workers=1,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=[timer])
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    elapsed_s = timer.times_s[-1] - timer.times_s[1]
    tokens = (len(timer.times_s) - 2) * mbs * ga * seq
    cuda = DEVICE == "cuda"
    result = {
        "baseline": "plain-hf",
        "method": method,
        "seq": seq,
        "mbs": mbs,
        "ga": ga,
        "ckpt": ckpt,
        "tokens_per_s": tokens / elapsed_s,
        "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if cuda else None,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
