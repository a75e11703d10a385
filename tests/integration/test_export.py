"""``autotune export`` (issue 26 item 5): a trained run as a model transformers loads.

A LoRA run of the tiny Llama in fp32 on the CPU: ``--merge`` writes a model whose logits equal the adapter model's
(base + adapter through peft) on a fixed prompt, and differ from the base's (the adapter trained); without
``--merge`` the adapter and tokenizer load with peft; bad input is one line with nothing written.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from cli_runner import run
from trainer_helpers import instruction_rows, run_command, write_jsonl


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A 3-step LoRA run (fp32, lr 1e-2 so that the adapter moves away from its zero B) with final/ and a
    checkpoint."""
    from trainer_helpers import build_plan_file

    tmp = tmp_path_factory.mktemp("export")
    plan = build_plan_file(tiny_model_dir, tmp / "plan.yaml", method="lora", micro_batch_size=2, grad_accum=1,
                           precision="fp32")  # fmt: skip
    data = write_jsonl(tmp / "d.jsonl", instruction_rows(16))
    out = tmp / "run"
    launch = [sys.executable, "-c", "from autotune.cli.app import main; main()", "launch", str(plan), "--dataset",
              str(data), "--output-dir", str(out), "--cpu", "--max-steps", "3", "--learning-rate", "1e-2",
              "--save-steps", "2"]  # fmt: skip
    done = run_command(launch, timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


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
        "no checkpoint": "has no weights in checkpoint-9/; checkpoints: checkpoint-2",
    }[case]
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
