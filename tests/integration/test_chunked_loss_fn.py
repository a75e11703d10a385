"""The chunked cross-entropy itself: equal to transformers' loss and gradients, and the Trainer's reduction.

Fast (in-process, tiny models built in code, fp32 on the CPU); the end-to-end run and the memory
measurement are in ``test_chunked_loss.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM, LlamaForCausalLM, Trainer, TrainingArguments

from autotune.costmodel.activations import CHUNKED_LOSS_TOKENS
from autotune.errors import ConfigError
from autotune.trainer.chunked_loss import (
    CHUNK_TOKENS,
    ChunkedLossTrainer,
    capture_head_input,
    check_chunked_loss_supported,
    chunked_causal_lm_loss,
    final_logit_softcap,
    output_head,
)

TOLERANCE = 1e-5


def _batch(vocab: int, b: int = 3, s: int = 23, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and labels with an ignored prompt prefix and ignored padding (-100)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (b, s), generator=generator)
    labels = ids.clone()
    labels[:, :5] = -100  # prompt
    labels[1, -7:] = -100  # padding of the second row
    return ids, labels


def _chunked_forward(model: Any, ids: torch.Tensor, labels: torch.Tensor, chunk: int, **kwargs: Any) -> torch.Tensor:
    head = output_head(model)
    with capture_head_input(head) as capture:
        outputs = model(input_ids=ids)
    assert outputs.logits.shape[1] == 0  # the model computed no logits
    assert capture.hidden_states is not None
    return chunked_causal_lm_loss(
        capture.hidden_states,
        head.weight,
        labels,
        chunk_tokens=chunk,
        softcap=final_logit_softcap(model),
        lm_head_bias=head.bias,
        **kwargs,
    )


def _grads(model: torch.nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
    params = dict(model.named_parameters())
    return {name: params[name].grad.detach().clone() for name in names}  # type: ignore[union-attr]


def _reference_and_chunked(
    model: Any, ids: torch.Tensor, labels: torch.Tensor, chunk: int, names: list[str], **kwargs: Any
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    reference = model(input_ids=ids, labels=labels, **kwargs).loss
    reference.backward()
    reference_grads = _grads(model, names)
    model.zero_grad(set_to_none=True)
    chunked = _chunked_forward(model, ids, labels, chunk, **kwargs)
    chunked.backward()
    return reference.detach(), chunked.detach(), reference_grads, _grads(model, names)


def _assert_close(
    reference: torch.Tensor, chunked: torch.Tensor, ref_grads: dict[str, torch.Tensor], grads: dict[str, torch.Tensor]
) -> None:
    assert chunked.dtype == torch.float32
    assert abs(float(reference) - float(chunked)) <= TOLERANCE, (float(reference), float(chunked))
    for name, expected in ref_grads.items():
        assert float(expected.abs().max()) > 0, name  # the gradient is not trivially zero
        torch.testing.assert_close(grads[name], expected, atol=TOLERANCE, rtol=1e-4, msg=name)


LLAMA_GRADS = ["lm_head.weight", "model.layers.0.self_attn.q_proj.weight", "model.embed_tokens.weight"]


@pytest.mark.parametrize("chunk", [1, 5, 16, CHUNK_TOKENS])
def test_loss_and_gradients_equal_transformers_loss(tiny_model_dir: Path, chunk: int) -> None:
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids, labels = _batch(model.config.vocab_size)
    _assert_close(*_reference_and_chunked(model, ids, labels, chunk, LLAMA_GRADS))


def test_num_items_in_batch_divides_the_sum(tiny_model_dir: Path) -> None:
    """Under gradient accumulation the Trainer passes the step's token count: sum / that count, like HF."""
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids, labels = _batch(model.config.vocab_size)
    items = torch.tensor(97)  # e.g. this micro batch's 46 tokens + another micro batch's 51
    _assert_close(*_reference_and_chunked(model, ids, labels, 7, LLAMA_GRADS, num_items_in_batch=items))


def test_tied_head_and_gemma2_softcapping() -> None:
    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        tie_word_embeddings=True,
        final_logit_softcapping=0.5,  # small, so the cap changes the loss visibly
        attn_implementation="eager",
    )
    model = Gemma2ForCausalLM(config)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    with torch.no_grad():
        model.lm_head.weight.mul_(50.0)  # logits of order 1, so that the cap of 0.5 changes them
    assert final_logit_softcap(model) == 0.5
    ids, labels = _batch(97)
    results = _reference_and_chunked(model, ids, labels, 4, ["model.embed_tokens.weight", "model.norm.weight"])
    _assert_close(*results)
    with torch.no_grad():
        hidden = model.model(input_ids=ids).last_hidden_state
        uncapped = chunked_causal_lm_loss(hidden, model.lm_head.weight, labels, chunk_tokens=4)
    assert abs(float(uncapped) - float(results[0])) > 0.1  # the soft-capping is really applied


def test_peft_wrapped_model_finds_the_base_head(tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model = LlamaForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    head = model.lm_head
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    assert output_head(peft_model) is head
    ids, labels = _batch(model.config.vocab_size)
    reference = peft_model(input_ids=ids, labels=labels).loss
    chunked = _chunked_forward(peft_model, ids, labels, 5)
    assert abs(float(reference) - float(chunked)) <= TOLERANCE


def test_lora_on_the_head_is_refused(tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model = LlamaForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["lm_head"], task_type="CAUSAL_LM"))
    with pytest.raises(ConfigError, match="plain linear output head"):
        output_head(peft_model)


def test_chunked_trainer_loss_equals_trainer_loss(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``Trainer.compute_loss`` with and without the chunked loss, with an accumulated-step token count."""
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", gradient_accumulation_steps=2)
    ids, labels = _batch(model.config.vocab_size)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    items = torch.tensor(120)
    reference = Trainer(model=model, args=args).compute_loss(model, dict(inputs), num_items_in_batch=items)
    chunked_trainer = ChunkedLossTrainer(model=model, args=args, chunk_tokens=8)
    chunked = chunked_trainer.compute_loss(model, dict(inputs), num_items_in_batch=items)
    assert abs(float(reference) - float(chunked)) <= TOLERANCE
    assert chunked_trainer.compute_loss_func is not None  # so training_step treats it as scaled for accumulation
    without_count = chunked_trainer.compute_loss(model, dict(inputs))
    assert abs(float(without_count) - float(model(input_ids=ids, labels=labels).loss)) <= TOLERANCE


def test_all_labels_ignored_gives_zero_loss_with_gradients(tiny_model_dir: Path) -> None:
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids, _ = _batch(model.config.vocab_size)
    labels = torch.full_like(ids, -100)
    loss = _chunked_forward(model, ids, labels, 4, num_items_in_batch=torch.tensor(10))
    loss.backward()
    assert float(loss) == 0.0
    assert model.lm_head.weight.grad is not None and float(model.lm_head.weight.grad.abs().max()) == 0.0


def test_chunk_size_is_the_cost_models() -> None:
    assert CHUNK_TOKENS == CHUNKED_LOSS_TOKENS


@pytest.mark.parametrize("sharding", ["fsdp", "fsdp-offload", "zero3", "zero3-offload"])
def test_parameter_sharded_runs_are_refused(sharding: str) -> None:
    with pytest.raises(ConfigError, match=f"sharding={sharding}"):
        check_chunked_loss_supported(sharding)


@pytest.mark.parametrize("sharding", ["none", "ddp", "zero2"])
def test_other_shardings_are_accepted(sharding: str) -> None:
    check_chunked_loss_supported(sharding)


def test_bad_arguments_raise() -> None:
    hidden, weight, labels = torch.zeros(1, 4, 8), torch.zeros(10, 8), torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="chunk_tokens"):
        chunked_causal_lm_loss(hidden, weight, labels, chunk_tokens=0)
    with pytest.raises(ValueError, match="do not match"):
        chunked_causal_lm_loss(hidden, weight, labels[:, :3])
