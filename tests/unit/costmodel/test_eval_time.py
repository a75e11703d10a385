"""The eval loss in the whole run's time (issue 26): the trainer's eval schedule, forward-only micro batches."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autotune.costmodel.context import setting_context
from autotune.costmodel.device import device_context
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.eval_time import eval_batches_per_rank, eval_micro_batch_s
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas import ClusterSpec, CostCoefficients, TrainingSetting, Workload
from autotune.schemas.workload import EvalSet

PRIOR = CostCoefficients()
LLAMA3_8B = resolve_model_profile("llama3-8b")
H100, _ = resolve_gpu("h100-80gb")


def trainer_eval_steps(max_steps: int, eval_steps: int | None) -> list[int]:
    """The global steps the core evaluates at: transformers' DefaultFlowCallback run step by step, then the core's
    final eval (``trainer.train._run``: unless the last step was just evaluated)."""
    pytest.importorskip("transformers")  # the train extra
    from transformers.trainer_callback import DefaultFlowCallback, TrainerControl, TrainerState
    from transformers.trainer_utils import IntervalStrategy, SaveStrategy

    args = SimpleNamespace(
        logging_first_step=False, logging_strategy=IntervalStrategy.STEPS, save_strategy=SaveStrategy.STEPS,
        eval_strategy=IntervalStrategy.STEPS if eval_steps is not None else IntervalStrategy.NO, eval_delay=0,
    )  # fmt: skip
    state = TrainerState(max_steps=max_steps, logging_steps=1, save_steps=50, eval_steps=eval_steps or 500)
    evaluated = []
    callback = DefaultFlowCallback()
    for step in range(1, max_steps + 1):
        state.global_step = step
        control = callback.on_step_end(args, state, TrainerControl())
        if control.should_evaluate:
            evaluated.append(step)
    if evaluated[-1:] != [max_steps]:
        evaluated.append(max_steps)
    return evaluated


@pytest.mark.parametrize(
    ("steps", "eval_steps"), [(5, 2), (4, 2), (1, 1), (7, None), (3, 10), (100, 7), (297, 50), (12, 12)]
)
def test_the_eval_count_is_the_trainers_schedule(steps: int, eval_steps: int | None) -> None:
    workload = Workload(num_samples=100, eval=EvalSet(samples=10, steps=eval_steps))
    assert workload.num_evals(steps) == len(trainer_eval_steps(steps, eval_steps))


def test_the_integration_runs_schedule() -> None:
    """tests/integration/test_eval.py logs evals at steps 2, 4, 5 for 5 steps and --eval-steps 2."""
    assert trainer_eval_steps(5, 2) == [2, 4, 5]
    assert Workload(num_samples=40, eval=EvalSet(samples=8, steps=2)).num_evals(5) == 3


def test_no_eval_set_no_eval() -> None:
    assert Workload(num_samples=100, eval=EvalSet(steps=3)).num_evals(10) == 0
    assert Workload(num_samples=100).num_evals(10) == 0


@pytest.mark.parametrize(
    "setting",
    [
        TrainingSetting(method="lora", micro_batch_size=4, grad_accum=2, grad_ckpt=False),
        TrainingSetting(method="full", micro_batch_size=2, grad_accum=4, grad_ckpt=True, sharding="fsdp"),
        TrainingSetting(method="qlora", micro_batch_size=8, grad_accum=1, grad_ckpt=True),
    ],
)
def test_the_whole_run_grows_by_the_predicted_eval_time(setting: TrainingSetting) -> None:
    gpus = 2 if setting.sharding == "fsdp" else 1
    cluster = ClusterSpec(gpu=H100, num_gpus_per_node=gpus)
    batch = setting.micro_batch_size * setting.grad_accum * gpus
    train = Workload(seq_len=2048, global_batch_size=batch, num_samples=900)
    evaluated = train.model_copy(update={"eval": EvalSet(samples=101, steps=5)})
    without = estimate_setting(LLAMA3_8B, cluster, train, setting, PRIOR)
    with_eval = estimate_setting(LLAMA3_8B, cluster, evaluated, setting, PRIOR)
    assert without.total_time_s is not None and with_eval.total_time_s is not None
    assert without.eval_time_s is None and without.num_evals is None
    steps = with_eval.num_optimizer_steps
    assert steps == without.num_optimizer_steps
    assert with_eval.num_evals == len(trainer_eval_steps(steps, 5))
    per_batch_s = eval_micro_batch_s(
        setting_context(LLAMA3_8B, setting, cluster, evaluated), PRIOR, device_context(cluster.gpu, PRIOR)
    )
    batches = eval_batches_per_rank(101, gpus, setting.micro_batch_size)
    assert batches == {1: {4: 26, 8: 13}, 2: {2: 26}}[gpus][setting.micro_batch_size]  # ⌈⌈101 / gpus⌉ / mbs⌉
    predicted = with_eval.num_evals * batches * per_batch_s
    assert with_eval.eval_time_s == pytest.approx(predicted, rel=1e-12)
    assert with_eval.total_time_s - without.total_time_s == pytest.approx(predicted, rel=1e-9)
    # forward only: a fraction of a training micro-step (forward + backward, and the recompute under checkpointing)
    assert 0.2 * with_eval.micro_step_time_s < per_batch_s < 0.7 * with_eval.micro_step_time_s


def test_eval_time_scales_with_the_held_out_tokens() -> None:
    setting = TrainingSetting(method="lora", micro_batch_size=4, grad_accum=2, grad_ckpt=False)
    cluster = ClusterSpec(gpu=H100)
    small, large = (
        estimate_setting(LLAMA3_8B, cluster, Workload(num_samples=800, eval=EvalSet(samples=n), global_batch_size=8),
                         setting, PRIOR)
        for n in (40, 400)
    )  # fmt: skip
    assert small.eval_time_s is not None and large.eval_time_s is not None
    assert large.eval_time_s == pytest.approx(10 * small.eval_time_s, rel=1e-9)  # 10 vs 100 micro batches, one eval


@pytest.mark.parametrize("sharding", ["fsdp-offload", "zero3-offload"])
def test_an_offloaded_eval_batch_is_never_shorter_than_its_weights_over_the_host_link(sharding: str) -> None:
    """The eval forward copies every unit in once: back to back on one link, never faster than bytes / bandwidth."""
    from autotune.costmodel.memory import base_weight_bytes
    from autotune.costmodel.optimizer_step import host_link_bytes_per_s

    gpu, _ = resolve_gpu("3090")
    setting = TrainingSetting(method="lora", sharding=sharding, micro_batch_size=1, grad_accum=8)
    for seq_len in (128, 2048):
        context = setting_context(LLAMA3_8B, setting, ClusterSpec(gpu=gpu), Workload(seq_len=seq_len))
        weights = base_weight_bytes(LLAMA3_8B, context.counts, setting, context.dtypes)
        floor_s = weights / host_link_bytes_per_s(gpu, PRIOR)
        assert eval_micro_batch_s(context, PRIOR, device_context(context.gpu, PRIOR)) >= floor_s * PRIOR.time_scale
        unloaded = setting_context(LLAMA3_8B, setting.model_copy(update={"sharding": "none"}), ClusterSpec(gpu=gpu),
                                   Workload(seq_len=seq_len))  # fmt: skip
        assert (
            eval_micro_batch_s(context, PRIOR, device_context(context.gpu, PRIOR))
            > eval_micro_batch_s(unloaded, PRIOR, device_context(unloaded.gpu, PRIOR)) + 0.5 * floor_s
        )


def test_an_eval_under_liger_holds_the_full_logits_that_training_never_does() -> None:
    """Liger's fused loss runs in training only: an eval micro batch materialises b·s·V logits and the fp32 loss, a
    phase of its own that can set the peak; without Liger the eval holds no more than the training step."""
    from autotune.costmodel.memory import predict_memory_in

    setting = TrainingSetting(method="lora", micro_batch_size=4, grad_accum=2, kernels="liger")
    cluster = ClusterSpec(gpu=H100)
    plain = Workload(seq_len=4096, global_batch_size=8, num_samples=800)
    evaluated = plain.model_copy(update={"eval": EvalSet(samples=40)})
    liger = predict_memory_in(setting_context(LLAMA3_8B, setting, cluster, evaluated), PRIOR)
    assert liger.peak_phase == "eval forward"
    assert (
        liger.peak_allocated_bytes
        > predict_memory_in(setting_context(LLAMA3_8B, setting, cluster, plain), PRIOR).peak_allocated_bytes
    )
    logits = 4 * 4096 * LLAMA3_8B.vocab_size  # b·s·V
    assert liger.breakdown_bytes["logits + loss"] >= 8 * logits  # at least the fp32 copy and the log-softmax
    unfused = setting.model_copy(update={"kernels": "none"})
    with_eval = predict_memory_in(setting_context(LLAMA3_8B, unfused, cluster, evaluated), PRIOR)
    without = predict_memory_in(setting_context(LLAMA3_8B, unfused, cluster, plain), PRIOR)
    assert with_eval.peak_allocated_bytes == without.peak_allocated_bytes and with_eval.peak_phase != "eval forward"
