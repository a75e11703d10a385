"""``loss_impl: chunked``: the full logits never exist, the CPU allocation peak drops, a real run learns.

What is measured (CPU, fp32, a 2-layer Llama built in code with a large vocabulary V = 8192 so that
the logits dominate: b = 2, s = 256, so the full logits are E = b·s·V = 4,194,304 elements, 16 MiB in fp32):

* **Largest new tensor** — a ``TorchDispatchMode`` sees every aten op of forward and backward and
  records the shape of each output that owns new storage (views of an input are skipped). With a chunk
  of 16 rows, no new tensor with last dimension V has more than 16 rows, and no new tensor has E
  elements or more; the same probe on transformers' own loss does see an E-element tensor.
* **Allocation peak** — ``torch.profiler`` with ``profile_memory=True`` attributes every CPU allocation
  and free (bytes) to the op that made it; the running sum of those, in op start order, peaks at the
  forward+backward's allocation high-water mark (op granularity: the peak inside one op is not seen).
  The chunked loss stays below 4·E bytes (one full fp32 logits tensor) and at least 4·E bytes below
  transformers' fp32-upcast loss (measured with torch 2.13: 38,471,704 B against 9,524,860 B, a drop
  of 1.72·4·E; the cost model counts up to 3·4·E, this probe cannot see peaks inside one op).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from trainer_helpers import PlanWriter, core_args, mean, read_report, run_trainer, text_rows, write_jsonl
from transformers import LlamaConfig, LlamaForCausalLM

from autotune.trainer.chunked_loss import capture_head_input, chunked_causal_lm_loss

VOCAB = 8192
BATCH, SEQ = 2, 256
CHUNK = 16
FULL_LOGITS = BATCH * SEQ * VOCAB
FP32_BYTES = 4


class NewTensorShapes(TorchDispatchMode):
    """Records the shape of every op output that owns new storage (not a view of one of the op's inputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() not in inputs:
                self.shapes.append(tuple(tensor.shape))
        return out


def _model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    return ids, ids.clone()


def _transformers_step(model: LlamaForCausalLM, ids: torch.Tensor, labels: torch.Tensor) -> float:
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    return float(loss.detach())


def _chunked_step(model: LlamaForCausalLM, ids: torch.Tensor, labels: torch.Tensor) -> float:
    with capture_head_input(model.lm_head) as capture:
        model(input_ids=ids)
    assert capture.hidden_states is not None
    loss = chunked_causal_lm_loss(capture.hidden_states, model.lm_head.weight, labels, chunk_tokens=CHUNK)
    loss.backward()
    return float(loss.detach())


def _allocation_peak_bytes(step: Any, model: LlamaForCausalLM) -> tuple[float, int]:
    """(loss, peak of the running sum of the CPU bytes allocated minus freed by the ops of one step)."""
    model.zero_grad(set_to_none=True)
    ids, labels = _batch()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss = step(model, ids, labels)
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage != 0), key=lambda e: e.time_range.start)
    running = peak = 0
    for event in events:
        running += event.self_cpu_memory_usage
        peak = max(peak, running)
    return loss, peak


def test_full_logits_are_never_created() -> None:
    model = _model()
    ids, labels = _batch()
    with NewTensorShapes() as reference:
        _transformers_step(model, ids, labels)
    model.zero_grad(set_to_none=True)
    with NewTensorShapes() as chunked:
        _chunked_step(model, ids, labels)

    def numel(shape: tuple[int, ...]) -> int:
        return int(torch.Size(shape).numel())

    assert max(numel(shape) for shape in reference.shapes) >= FULL_LOGITS  # the probe sees the full logits
    assert max(numel(shape) for shape in chunked.shapes) < FULL_LOGITS
    logits_rows = [numel(shape[:-1]) for shape in chunked.shapes if len(shape) >= 2 and shape[-1] == VOCAB]
    assert logits_rows, "no logits chunk was seen"
    assert max(logits_rows) == CHUNK


def test_allocation_peak_drops_by_the_logits() -> None:
    model = _model()
    reference_loss, reference_peak = _allocation_peak_bytes(_transformers_step, model)
    chunked_loss, chunked_peak = _allocation_peak_bytes(_chunked_step, model)
    full_logits_bytes = FULL_LOGITS * FP32_BYTES
    assert abs(reference_loss - chunked_loss) <= 1e-5
    assert chunked_peak < full_logits_bytes, (chunked_peak, full_logits_bytes)
    assert reference_peak - chunked_peak >= full_logits_bytes, (reference_peak, chunked_peak)


@pytest.mark.slow
@pytest.mark.parametrize(
    "fields",
    [
        {"method": "full", "micro_batch_size": 2, "grad_accum": 2},
        {"method": "lora", "lora_rank": 8, "lora_alpha": 16, "lora_dropout": 0.0, "micro_batch_size": 4,
         "grad_ckpt": True, "precision": "bf16-mixed"},
    ],
    ids=["full-fp32-accum", "lora-bf16mixed-ckpt"],
)  # fmt: skip
def test_chunked_loss_run_learns(write_plan: PlanWriter, tmp_path: Path, fields: dict[str, Any]) -> None:
    steps = 20
    plan = write_plan(loss_impl="chunked", **fields)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    out = tmp_path / "run"
    proc = run_trainer(
        *core_args(plan, data, out, steps),
        "--learning-rate",
        "1e-2" if fields["method"] == "lora" else "5e-3",
        "--save-steps",
        "100",
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "loss: chunked cross-entropy, 1024 rows of logits at a time" in proc.stderr
    report = read_report(out)
    assert report.status == "completed" and report.steps == steps
    assert report.setting.loss_impl == "chunked"
    assert len(report.losses) == steps
    first, last = mean(report.losses[:5]), mean(report.losses[-5:])
    assert last < 0.8 * first, f"loss did not fall: first {first:.3f}, last {last:.3f}"
    assert report.peak_memory_gib_measured > 0
    assert (out / "final").is_dir()


@pytest.mark.slow
def test_chunked_loss_with_zero3_is_refused(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="full", loss_impl="chunked", sharding="zero3")
    ds_config = tmp_path / "deepspeed_config.json"
    ds_config.write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 3}}')
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(8))
    out = tmp_path / "run"
    proc = run_trainer(
        "--plan", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--max-steps", "2",
        "--deepspeed-config", str(ds_config),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "error: loss_impl=chunked is not supported with sharding=zero3" in proc.stderr
    assert not (out / "run_report.json").exists()


@pytest.mark.slow
def test_chunked_run_follows_the_fp32_upcast_run(write_plan: PlanWriter, tmp_path: Path) -> None:
    """Same data, seed and fp32 arithmetic: the two loss implementations log the same losses step by step."""
    steps = 6
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    losses = {}
    for loss_impl in ("fp32-upcast", "chunked"):
        plan = write_plan(
            name=f"{loss_impl}.yaml", method="full", loss_impl=loss_impl, micro_batch_size=2, grad_accum=2
        )
        out = tmp_path / loss_impl
        proc = run_trainer(
            *core_args(plan, data, out, steps), "--learning-rate", "5e-3", "--save-steps", "100",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-5000:]
        losses[loss_impl] = read_report(out).losses
    assert len(losses["chunked"]) == steps
    assert losses["chunked"] == pytest.approx(losses["fp32-upcast"], rel=1e-4)
    assert losses["chunked"][-1] < losses["chunked"][0]
