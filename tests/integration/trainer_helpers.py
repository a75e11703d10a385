"""Helpers of the integration tests: the tiny model's tokenizer, small datasets, plans, running the core.

Nothing downloads: the model is a 2-layer LlamaConfig with random weights saved with
``save_pretrained``; the tokenizer is a WordLevel model trained on the test text with the
``tokenizers`` library and wrapped in ``PreTrainedTokenizerFast`` with a ChatML-style chat template.
The training core runs in a subprocess (``python -m autotune.trainer``) so the real entry point is tested.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from autotune.schemas.estimate import Estimate
from autotune.schemas.model import ModelSpec
from autotune.schemas.plan import ClusterChoice, PlanFile
from autotune.schemas.plan_io import load_plan, save_plan
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WORDS = ["red", "green", "blue", "yellow", "black", "white", "orange", "purple", "pink", "brown", "gray", "cyan"]
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}


def pattern_text(index: int, length: int = 24) -> str:
    """A learnable sequence: the colour words in a fixed cyclic order starting at ``index``."""
    return " ".join(WORDS[(index + k) % len(WORDS)] for k in range(length))


def instruction_rows(count: int = 64) -> list[dict[str, str]]:
    """Instruction data whose answer is fully determined by the instruction (a learnable mapping)."""
    return [
        {"instruction": f"continue from {WORDS[i % len(WORDS)]}", "input": "", "output": pattern_text(i, 12)}
        for i in range(count)
    ]


def chat_rows(count: int = 64) -> list[dict[str, Any]]:
    """Chat data: system + user + assistant, the assistant answer is the colour cycle."""
    return [
        {
            "messages": [
                {"role": "system", "content": "you list colours"},
                {"role": "user", "content": f"continue from {WORDS[i % len(WORDS)]}"},
                {"role": "assistant", "content": pattern_text(i, 12)},
            ]
        }
        for i in range(count)
    ]


def text_rows(count: int = 64) -> list[dict[str, str]]:
    """Plain text for continued pre-training."""
    return [{"text": pattern_text(i, 24)} for i in range(count)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` as JSON lines and return ``path``."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def build_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [
        "### Instruction : Input Response continue from you list colours system user assistant",
        *WORDS,
    ]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainer=trainers.WordLevelTrainer(special_tokens=SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        chat_template=CHAT_TEMPLATE,
    )


def save_tiny_model(path: Path) -> Path:
    """Save the 2-layer Llama (hidden 64, random weights, seed 0) and its word-level tokenizer to ``path``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        **TINY,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def tiny_model_spec(model_dir: Path) -> ModelSpec:
    """The ModelSpec of the tiny model, read back from its config.json."""
    config = json.loads((model_dir / "config.json").read_text())
    return ModelSpec(
        key="tiny-llama",
        model_type="llama",
        hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        num_key_value_heads=config["num_key_value_heads"],
        head_dim=config["hidden_size"] // config["num_attention_heads"],
        vocab_size=config["vocab_size"],
        max_position_embeddings=config["max_position_embeddings"],
        source=str(model_dir / "config.json"),
    )


def rough_prediction() -> Estimate:
    """A prediction with rough numbers (the report puts the measurements next to these)."""
    return Estimate(
        peak_memory_gib=0.01,
        peak_reserved_gib=0.02,
        memory_breakdown_gib={"weights": 0.01},
        peak_phase="forward/backward",
        cuda_context_gib=0.0,
        memory_uncertainty_gib=0.01,
        gpu_memory_gib=24.0,
        fits=True,
        micro_step_time_s=0.01,
        optimizer_time_s=0.001,
        step_time_s=0.02,
        tokens_per_s=5000.0,
        mfu=0.01,
        time_uncertainty_fraction=0.3,
    )


@dataclass(frozen=True)
class FinishedRun:
    """A finished run of the training core: its run directory and what ``autotune launch`` printed."""

    output_dir: Path
    launched: subprocess.CompletedProcess[str]


PlanWriter = Callable[..., Path]
"""``write_plan(num_gpus=1, seq_len=32, name='plan.yaml', **setting_fields) -> Path``."""


def trainer_env() -> dict[str, str]:
    """Environment of the subprocess: offline, small thread count, no tokenizers fork warning."""
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def launch(capsys: Any, *args: str) -> tuple[int, str, str]:
    """``autotune launch ARGS`` in-process (:func:`cli_runner.run`), its run started with :func:`trainer_env`, as every
    other run of the core in the tests: (exit code, stdout, stderr)."""
    import pytest
    from cli_runner import run

    with pytest.MonkeyPatch.context() as patch:
        for name, value in trainer_env().items():
            patch.setenv(name, value)
        return run(capsys, "launch", *args)


def core_args(plan: Path, data: Path, out: Path, max_steps: int) -> list[str]:
    """The arguments every CPU run of the core takes: ``--plan P --dataset D --output-dir O --cpu --max-steps N``."""
    return [
        "--plan",
        str(plan),
        "--dataset",
        str(data),
        "--output-dir",
        str(out),
        "--cpu",
        "--max-steps",
        str(max_steps),
    ]


def run_trainer(
    *argv: str, timeout_s: float = 300, fresh_interpreter: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the core's entry point with ``ARGV`` and return the completed process (text output).

    Forked from the worker's server that imported the training stack once (``core_fork``: a run costs its work, not
    an interpreter start and ~6 s of imports); ``fresh_interpreter``: ``python -m autotune.trainer ARGV`` in a new
    process, for what concerns the process itself.
    """
    command = [sys.executable, "-m", "autotune.trainer", *argv]
    if fresh_interpreter:
        return run_command(command, timeout_s)
    from core_fork import ForkedCore

    return run_command(command, timeout_s, start=lambda out, err: ForkedCore(list(argv), trainer_env(), out, err))


def run_torchrun(*argv: str, nproc: int = 2, timeout_s: float = 420) -> subprocess.CompletedProcess[str]:
    """Run the core under ``torchrun --standalone --nproc_per_node NPROC`` (CPU, gloo)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    return run_command([*command, "-m", "autotune.trainer", *argv], timeout_s)


def run_command(
    command: list[str], timeout_s: float, start: Callable[[IO[str], IO[str]], Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with its output in files; on a timeout (or any interruption, e.g. pytest-timeout) kill it
    and every process under it.

    ``start``: how the process is started with its stdout and stderr files (default: ``subprocess.Popen`` of
    ``command`` with :func:`trainer_env`, in a session of its own); what it returns has ``pid`` and ``wait`` as
    ``Popen`` has them (``core_fork.ForkedCore``).

    torchrun starts each worker in a session of its own (``start_new_session=True`` in torch's
    ``SubprocessHandler``), so killing torchrun's process group would leave hung workers running; and a worker
    holding an output pipe would keep ``communicate()`` waiting after torchrun is gone. Files and a kill of the
    whole tree (psutil, found by parent pid) avoid both.
    """
    with tempfile.TemporaryFile("w+") as stdout_file, tempfile.TemporaryFile("w+") as stderr_file:
        if start is None:
            proc = subprocess.Popen(
                command, stdout=stdout_file, stderr=stderr_file, text=True, env=trainer_env(), start_new_session=True
            )
        else:
            proc = start(stdout_file, stderr_file)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.wait()
            stderr_file.seek(0)
            stderr = stderr_file.read()
            raise AssertionError(f"timed out after {timeout_s} s: {' '.join(command)}\n{stderr[-3000:]}") from None
        except BaseException:
            _kill_tree(proc.pid)
            proc.wait()
            raise
        stdout_file.seek(0)
        stderr_file.seek(0)
        return subprocess.CompletedProcess(command, code, stdout_file.read(), stderr_file.read())


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s descendants and then ``pid`` itself (those already gone are skipped)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def read_report(output_dir: Path) -> Any:
    """Load and validate ``OUT/run_report.json``."""
    from autotune.schemas.run_report import RunReport

    return RunReport.model_validate_json((output_dir / "run_report.json").read_text())


def mean(values: list[float]) -> float:
    """Arithmetic mean."""
    return sum(values) / len(values)


def build_plan_file(model_dir: Path, path: Path, num_gpus: int = 1, seq_len: int = 32, **fields: Any) -> Path:
    """Write a plan for the tiny model at ``path`` (fp32, no checkpointing unless given) and return it."""
    setting = TrainingSetting(**{"precision": "fp32", "grad_ckpt": False, **fields})
    plan = PlanFile(
        autotune_version="0.1.0",
        model=tiny_model_spec(model_dir),
        model_source=str(model_dir),
        cluster=ClusterChoice(gpu="rtx-4090", num_gpus_per_node=num_gpus),
        workload=Workload(seq_len=seq_len, global_batch_size=setting.micro_batch_size * setting.grad_accum * num_gpus),
        setting=setting,
        prediction=rough_prediction(),
    )
    return save_plan(plan, path)


UNCLIPPED = 1e9
"""A clipping norm no gradient of the tiny model reaches: the standard path then updates as the optimizer stepped in the
backward does (it clips nothing)."""


def unclipped_losses(model_dir: Path, work: Path, name: str, steps: int, **fields: Any) -> list[float]:
    """The per-step losses of ``steps`` steps of the core on the tiny model, full fine-tuning, micro batch 2, unclipped.

    ``fields``: the setting's other fields (precision, optimizer, ``optimizer_in_backward``...). Learning rate 5e-3 on
    the colour text (:func:`text_rows`); the run directory is ``work / name``.

    Raises:
        AssertionError: the core failed (its stderr's tail) or logged another number of losses.
    """
    path = build_plan_file(model_dir, work / f"{name}.yaml", method="full", micro_batch_size=2, **fields)
    plan = load_plan(path)
    unclipped = plan.training.model_copy(update={"max_grad_norm": UNCLIPPED})
    save_plan(plan.model_copy(update={"training": unclipped}), path, overwrite=True)
    data = write_jsonl(work / "text.jsonl", text_rows())
    out = work / name
    proc = run_trainer(*core_args(path, data, out, steps), "--learning-rate", "5e-3", "--save-steps", "100")
    assert proc.returncode == 0, proc.stderr[-5000:]
    losses: list[float] = read_report(out).losses
    assert len(losses) == steps
    return losses
