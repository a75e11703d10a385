"""The memory levers in the planner: full fine-tuning of an 8B model on a 24 GB card, and their refusals."""

from __future__ import annotations

import importlib

import pytest
from cli_runner import run
from plan_requests import plan_request

from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InfeasibleError
from autotune.planner import search
from autotune.planner.request import PlanRequest
from autotune.planner.search import PlanResult

search_module = importlib.import_module("autotune.planner.search")  # the package exports the function as search

TORCHTUNE_4090_FULL_GIB = 18.9
"""torchtune README, "Memory and training speed": Llama 3.1 8B full fine-tune on 1× 4090, batch 2, packed 2048
(pytorch/torchtune README.md, since commit 30b8519e, 2024-09-24)."""


def _full_4090(**options: object) -> tuple[PlanRequest, PlanResult]:
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="full", **options)
    return request, search(request)


def test_full_8b_fits_a_4090_at_torchtunes_batch_with_its_levers() -> None:
    """Global batch 2: the optimizer in backward, paged 8-bit states and the chunked loss; torchtune's memory ± 10 %."""
    _, result = _full_4090(global_batch_size=2)
    best, e = result.best.setting, result.best.estimate
    assert (best.micro_batch_size, best.grad_accum) == (2, 1)
    assert best.optimizer_in_backward and best.optimizer == "paged-adamw-8bit" and best.precision == "bf16"
    assert best.loss_impl == "chunked" and best.grad_ckpt
    assert e.peak_reserved_gib <= 22
    assert abs(e.peak_memory_gib / TORCHTUNE_4090_FULL_GIB - 1) <= 0.10
    assert "gradients" not in e.memory_breakdown_gib or e.memory_breakdown_gib["gradients"] < 1.5  # no full buffer
    assert e.time_breakdown_s["pcie optimizer paging"] > 0  # 15 GiB of states cannot stay on the card


def test_without_the_lever_full_8b_does_not_fit_a_4090() -> None:
    """The same batch with the optimizer in backward turned off: the gradient buffer does not fit."""
    with pytest.raises(InfeasibleError):
        _full_4090(global_batch_size=2, optimizer_in_backward=False)


def test_the_refusal_at_a_stated_global_batch_names_the_batch_that_fits() -> None:
    """A stated global batch 32 cannot be one micro batch: the message names the global batch where the lever fits."""
    with pytest.raises(InfeasibleError, match=r"optimizer stepped inside the backward .* --global-batch-size \d+"):
        _full_4090(global_batch_size=32)


def test_a_refusal_searches_each_hinted_batch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hint's searches only ask whether something fits: none builds a refusal of its own (which would hint again).

    Full fine-tuning of 8B at 16384 tokens fits no global batch on a 4090: the refusal is the forced search, one
    search per halved global batch (16 … 1) and the search without the forced method (its nearest setting).
    """
    calls: list[int] = []
    evaluate = search_module.evaluate_candidates
    monkeypatch.setattr(search_module, "evaluate_candidates", lambda r: calls.append(1) or evaluate(r))
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=16384, method="full", global_batch_size=32)
    with pytest.raises(InfeasibleError, match="Nearest that fits"):
        search(request)
    assert len(calls) == 1 + 5 + 1


def test_the_lever_is_searched_for_full_fine_tuning_only() -> None:
    """An adapter method's gradients are small: the lever is not searched for it (a forced one is kept)."""
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="lora")
    assert not search(request).best.setting.optimizer_in_backward
    forced, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="lora", optimizer_in_backward=True,
                             global_batch_size=2)  # fmt: skip
    assert search(forced).best.setting.optimizer_in_backward


def test_paged_states_leave_the_allocated_peak_and_cost_pcie_time_only_when_they_overflow() -> None:
    """Paged states are outside the peak; on an 80 GB card they stay there and cost no paging time."""
    request, result = _full_4090(global_batch_size=2)
    setting = result.best.setting
    eight_bit = setting.model_copy(update={"optimizer": "adamw-8bit"})
    paged = result.best.estimate
    plain = estimate_setting(request.model, request.cluster, request.workload, eight_bit, request.coefficients)
    assert plain.peak_memory_gib - paged.peak_memory_gib > 14  # ~15 GiB of 8-bit states (32-bit embedding)
    big, _ = plan_request(model="llama3-8b", gpu="h100", seq_len=2048, global_batch_size=2)
    roomy = estimate_setting(big.model, big.cluster, big.workload, setting, big.coefficients)
    assert roomy.time_breakdown_s["pcie optimizer paging"] == 0


ACCUMULATING = ("--optimizer-in-backward", "--micro-batch-size", "1")
SHARDED = ("--optimizer-in-backward", "--num-gpus", "2", "--sharding", "ddp")
REFUSALS = [
    ("plan", (*ACCUMULATING, "--global-batch-size", "8"), "cannot accumulate 8"),
    ("estimate", (*ACCUMULATING, "--grad-accum", "8"), "cannot accumulate 8"),
    ("plan", (*SHARDED, "--global-batch-size", "2"), "one GPU without sharding"),
    ("estimate", SHARDED, "one GPU without sharding"),
]


@pytest.mark.parametrize(("command", "options", "expected"), REFUSALS)
def test_the_lever_is_refused_in_one_line_where_it_cannot_run(
    capsys: pytest.CaptureFixture[str], command: str, options: tuple[str, ...], expected: str
) -> None:
    """Accumulation or several GPUs: one line naming the option, exit code 2, nothing planned."""
    code, out, err = run(capsys, command, "llama3-8b", "--gpu", "h100", "--method", "full", *options)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --optimizer-in-backward ")
    assert expected in lines[0]


FP8_REFUSALS = [
    ("plan", ("--gpu", "a100", "--fp8"), "A100", "does not have"),
    ("estimate", ("--gpu", "v100", "--fp8", "--method", "lora"), "V100", "does not have"),
    ("plan", ("--gpu", "h100", "--fp8", "--method", "qlora"), "QLoRA", "NF4"),
    ("estimate", ("--gpu", "4090", "--fp8", "--method", "qlora"), "QLoRA", "NF4"),
]


@pytest.mark.parametrize(("command", "options", "named", "reason"), FP8_REFUSALS)
def test_fp8_is_refused_in_one_line_where_it_cannot_run(
    capsys: pytest.CaptureFixture[str], command: str, options: tuple[str, ...], named: str, reason: str
) -> None:
    """No FP8 tensor cores (Ampere, Volta) or NF4 base linears: one line naming --fp8 and why, exit code 2."""
    code, out, err = run(capsys, command, "llama3-8b", *options)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --fp8 ") and named in lines[0] and reason in lines[0]


@pytest.mark.parametrize("gpu", ["4090", "h100", "rtx-pro-6000"])
def test_fp8_runs_where_the_card_has_fp8_tensor_cores_and_unasked_only_where_public_figures_back_it(
    gpu: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ada, Hopper, Blackwell: a forced --fp8 plans (QLoRA left out); unasked (torchao installed), only on Hopper."""
    from autotune.planner import fp8_choice

    monkeypatch.setattr(fp8_choice, "torchao_installed", lambda: True)
    forced, _ = plan_request(model="llama3-8b", gpu=gpu, seq_len=2048, fp8=True)
    result = search(forced)
    assert result.best.setting.fp8 and result.best.setting.method != "qlora"
    unasked, _ = plan_request(model="llama3-8b", gpu=gpu, seq_len=2048, objective="speed")
    assert search(unasked).best.setting.fp8 == (gpu == "h100")


def test_rounding_and_offloading_are_enumerated_where_they_run() -> None:
    """Full pure-bf16 AdamW candidates come with and without stochastic rounding; unchecked, uncompiled ones with and
    without activation offloading; neither where its rule refuses it."""
    from autotune.planner.space import candidates

    request, _ = plan_request(model="llama3-8b", gpu="h100", seq_len=2048, method="full", global_batch_size=4)
    settings = list(candidates(request))
    rounded = [s for s in settings if s.bf16_stochastic_rounding]
    offloaded = [s for s in settings if s.activation_offloading]
    assert rounded and offloaded
    assert all(s.optimizer == "adamw" and s.precision == "bf16" for s in rounded)
    assert all(not s.grad_ckpt and not s.compile for s in offloaded)
    plain = {s.model_copy(update={"bf16_stochastic_rounding": False, "activation_offloading": False}) for s in settings}
    assert len(settings) > len(plain)  # each lever adds to a setting the search had, nothing else


def test_forced_levers_are_kept_and_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--bf16-stochastic-rounding plans only rounded settings; with --optimizer adamw-8bit it is refused in one line."""
    request, _ = plan_request(
        model="llama3-8b", gpu="h100", seq_len=2048, method="full", global_batch_size=4, bf16_stochastic_rounding=True
    )
    best = search(request).best.setting
    assert best.bf16_stochastic_rounding and best.optimizer == "adamw"
    code, _, err = run(
        capsys, "plan", "llama3-8b", "--gpu", "h100", "--bf16-stochastic-rounding", "--optimizer", "adamw-8bit"
    )
    assert code == 2
    assert "--bf16-stochastic-rounding is torchao's AdamW" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--activation-offloading", "--grad-ckpt")
    assert code == 2
    assert "--activation-offloading moves what each layer saves" in err
