"""``autotune export`` (issue 26 item 5): a trained run as a model transformers loads.

A LoRA run of the tiny Llama in fp32 on the CPU: ``--merge`` writes a model whose logits equal the adapter model's
(base + adapter through peft) on a fixed prompt, and differ from the base's (the adapter trained); without
``--merge`` the adapter and tokenizer load with peft; bad input is one line with nothing written.

A bf16 LoRA run of a tiny .gguf (random fp32 weights, which bf16 cannot hold exactly, as a dequantized GGUF's):
``--merge`` writes each weight as W + ΔW computed in fp32 and rounded once to bf16 (bit for bit), its logits are
no farther from the fp32 adapter model's than peft's own bf16 forward is (2× margin), and ``--dtype fp32`` writes
a model with the fp32 adapter model's logits within 1e-4 (benchmarks/export_merge_error.py measures the README's
SmolLM2 demo).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from trainer_helpers import FinishedRun, chat_rows, run_command, write_jsonl


@pytest.fixture
def lora_run(finished_lora_run: FinishedRun) -> Path:
    """The shared 3-step LoRA run (fp32, lr 1e-2 so that the adapter moves away from its zero B) with final/ and a
    checkpoint at step 2 (tests/integration/conftest.py)."""
    return finished_lora_run.output_dir


def _logits(model: object, tokenizer: object) -> object:
    import torch

    ids = tokenizer("continue from red", return_tensors="pt")["input_ids"]  # type: ignore[operator]
    with torch.no_grad():
        return model(input_ids=ids).logits  # type: ignore[operator]


def test_a_merged_export_has_the_adapter_models_logits(
    lora_run: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "merged"
    code, stdout, err = run(capsys, "export", str(lora_run), "-o", str(out), "--merge")
    assert code == 0, err
    assert "base model with the adapter merged (float32)" in stdout
    tokenizer = AutoTokenizer.from_pretrained(out)
    merged = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    adapter = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), lora_run / "final"
    )
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    expected = _logits(adapter, tokenizer)
    torch.testing.assert_close(_logits(merged, tokenizer), expected, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(_logits(base, tokenizer), expected, atol=1e-4)  # the adapter trained


def test_the_adapter_export_loads_with_peft_and_a_checkpoint_can_be_named(
    lora_run: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for name, extra in (("adapter", ()), ("step2", ("--checkpoint", "checkpoint-2"))):
        out = tmp_path / name
        code, _, err = run(capsys, "export", str(lora_run), "-o", str(out), *extra)
        assert code == 0, err
        assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}
        PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), out)
        assert AutoTokenizer.from_pretrained(out).chat_template


@pytest.mark.parametrize("case", ["exists", "not a run", "no weights", "no checkpoint"])
def test_bad_input_is_one_line_and_nothing_is_written(
    case: str, lora_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, out, extra = lora_run, tmp_path / "out", []
    if case == "exists":
        out.mkdir()
    elif case == "not a run":
        run_dir = tmp_path
    elif case == "no weights":
        run_dir = tmp_path / "unfinished"
        run_dir.mkdir()
        shutil.copy2(lora_run / "plan.yaml", run_dir / "plan.yaml")
    else:
        extra = ["--checkpoint", "checkpoint-9"]
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run(capsys, "export", str(run_dir), "-o", str(out), *extra)
    message = {
        "exists": "exists: export writes a new folder",
        "not a run": "is not a run directory",
        "no weights": "has no weights in final/",
        "no checkpoint": "has no checkpoint checkpoint-9; checkpoints: checkpoint-2",
    }[case]
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _byte_level_gguf(path: Path) -> Path:
    """A 2-layer Llama .gguf with random fp32 weights and a byte-level BPE tokenizer (any text) with a chat template."""
    import gguf
    import numpy as np
    from tests.unit.profiles.test_gguf_reader import decoder_tensors, llama_hparams

    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]  # GPT-2's byte → unicode map (bytes_to_unicode)
    tokens = [chr(b) for b in printable] + [chr(256 + i) for i in range(len(others))]
    tokens += ["Ġt", "<|im_start|>", "<|im_end|>"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny byte-level")
    writer.add_file_type(0)
    for key, value in llama_hparams(vocab_size=len(tokens)).items():
        (writer.add_uint32 if isinstance(value, int) else writer.add_float32)(f"llama.{key}", value)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 2) + [3, 3])
    writer.add_token_merges(["Ġ t"])
    writer.add_bos_token_id(len(tokens) - 2)
    writer.add_eos_token_id(len(tokens) - 1)
    writer.add_chat_template(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    rng = np.random.default_rng(0)
    for name, shape in decoder_tensors().items():
        vocab_rows = (len(tokens), shape[1]) if name.startswith(("token_embd", "output.")) else shape
        weights = np.ones(shape) if len(shape) == 1 else rng.normal(0.0, 0.05, vocab_rows)
        writer.add_tensor(name, weights.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.slow
def test_a_bf16_merge_of_a_gguf_base_rounds_once_and_fp32_matches_the_adapter_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from autotune.schemas.plan_io import load_plan
    from autotune.trainer.model import PrecisionChoice, load_model, load_tokenizer, resolve_source

    model = _byte_level_gguf(tmp_path / "tiny.gguf")
    plan, run_dir = tmp_path / "plan.yaml", tmp_path / "run"
    code, _, err = run(capsys, "plan", str(model), "--gpu", "4090", "--method", "lora", "--seq-len", "64",
                       "--global-batch-size", "2", "--no-compile", "--sharding", "none", "-o", str(plan))  # fmt: skip
    assert code == 0, err
    launch = [sys.executable, "-c", "from autotune.cli.app import main; main()", "launch", str(plan), "--dataset",
              str(write_jsonl(tmp_path / "d.jsonl", chat_rows(16))), "--output-dir", str(run_dir), "--cpu",
              "--max-steps", "2", "--learning-rate", "1e-2"]  # fmt: skip
    done = run_command(launch, timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert load_plan(plan).setting.precision == "bf16"
    for name, extra, dtype in (("bf16", (), "bfloat16"), ("fp32", ("--dtype", "fp32"), "float32")):
        code, stdout, err = run(capsys, "export", str(run_dir), "-o", str(tmp_path / name), "--merge", *extra)
        assert code == 0 and f"adapter merged ({dtype})" in stdout, err

    source = resolve_source(str(model))
    setting = load_plan(plan).setting
    chat = [{"role": "user", "content": "continue from red"}]
    encoded: Any = load_tokenizer(source).apply_chat_template(chat, add_generation_prompt=True, return_dict=True)
    ids = torch.tensor([encoded["input_ids"]])

    def adapter_model(dtype: torch.dtype) -> PeftModel:
        base = load_model(source, setting, PrecisionChoice(load_dtype=dtype, bf16=False, fp16=False), None)
        return PeftModel.from_pretrained(base, run_dir / "final")

    def logits(module: object) -> torch.Tensor:
        with torch.no_grad():
            return module(input_ids=ids).logits.float()  # type: ignore[operator]

    reference = adapter_model(torch.float32)
    expected = logits(reference)
    with reference.disable_adapter():
        base_logits = logits(reference)
    peft_bf16_error = (logits(adapter_model(torch.bfloat16)) - expected).abs().max().item()
    merged32 = dict(reference.merge_and_unload().named_parameters())
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")
    assert exported.dtype == torch.bfloat16
    for name, weight in exported.named_parameters():  # W + ΔW in fp32, rounded once
        assert torch.equal(weight, merged32[name].to(torch.bfloat16)), name
    assert (logits(exported) - expected).abs().max().item() <= 2 * peft_bf16_error
    assert (base_logits - expected).abs().max().item() > 20 * peft_bf16_error  # the adapter moved the logits
    exported32 = AutoModelForCausalLM.from_pretrained(tmp_path / "fp32")
    torch.testing.assert_close(logits(exported32), expected, atol=1e-4, rtol=1e-4)
