"""The LoRA / QLoRA fast path of the training core on the CPU with tiny models (issue 21).

- ``adapter_dtype compute``: the adapters are in the compute dtype under pure bf16 (LoRA: the base weights' dtype;
  QLoRA: bitsandbytes' ``compute_dtype``, which peft reads from ``Linear4bit``), fp32 with ``adapter_dtype fp32``;
- ``lora_dropout 0``: peft's dropout is ``nn.Identity``, and an adapted layer runs only the base GEMM, its two
  adapter GEMMs, one scale and one add (recorded with a dispatch mode: no dropout mask, no dtype cast);
- a non-finite loss stops the run (callback alone here; the whole core in ``test_nan_loss_stops_the_run``);
- Liger Kernel's entry point really replaces the modules and functions (where the package is installed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from trainer_helpers import TINY, PlanWriter, core_args, read_report, run_trainer, text_rows, write_jsonl

from autotune.schemas.setting import TrainingSetting
from autotune.trainer.model import apply_method, choose_precision, load_model, resolve_source


def _tiny_llama(dtype: torch.dtype) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32, tie_word_embeddings=False, **TINY)
    model = LlamaForCausalLM(config).to(dtype)
    model.config.use_cache = False
    return model


def _lora_parameters(model: Any) -> dict[str, torch.dtype]:
    return {name: param.dtype for name, param in model.named_parameters() if "lora_" in name}


@pytest.mark.parametrize(("adapter_dtype", "expected"), [("compute", torch.bfloat16), ("fp32", torch.float32)])
def test_lora_adapters_are_in_the_planned_dtype(adapter_dtype: str, expected: torch.dtype) -> None:
    setting = TrainingSetting(method="lora", precision="bf16", adapter_dtype=adapter_dtype)
    model = apply_method(_tiny_llama(torch.bfloat16), setting)
    dtypes = _lora_parameters(model)
    assert dtypes and set(dtypes.values()) == {expected}


@pytest.mark.parametrize(("adapter_dtype", "expected"), [("compute", torch.bfloat16), ("fp32", torch.float32)])
def test_qlora_adapters_are_in_the_planned_dtype(
    tiny_model_dir: Path, adapter_dtype: str, expected: torch.dtype
) -> None:
    import bitsandbytes as bnb

    setting = TrainingSetting(method="qlora", precision="bf16", adapter_dtype=adapter_dtype, grad_ckpt=False)
    precision = choose_precision(setting, cpu=True)
    model = load_model(resolve_source(str(tiny_model_dir)), setting, precision, None)
    base = [module for module in model.modules() if isinstance(module, bnb.nn.Linear4bit)]
    assert base and {module.compute_dtype for module in base} == {torch.bfloat16}
    dtypes = _lora_parameters(apply_method(model, setting))
    assert dtypes and set(dtypes.values()) == {expected}


class _OpRecorder:
    """The aten ops run inside a block (``torch.utils._python_dispatch.TorchDispatchMode``)."""

    def __init__(self) -> None:
        self.ops: list[str] = []

    def __enter__(self) -> _OpRecorder:
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                recorder.ops.append(str(func.overloadpacket.__name__))
                return func(*args, **(kwargs or {}))

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


VIEWS = {"view", "t", "transpose", "_unsafe_view", "detach", "alias", "reshape", "expand", "unsqueeze"}


def _adapted_layer_ops(setting: TrainingSetting) -> list[str]:
    """The non-view aten ops of one adapted projection's forward (q_proj of layer 0) on a bf16 input."""
    model = apply_method(_tiny_llama(torch.bfloat16), setting)
    model.train()
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    x = torch.randn(2, 8, TINY["hidden_size"], dtype=torch.bfloat16)
    with _OpRecorder() as recorder:
        layer(x)
    return [op for op in recorder.ops if op not in VIEWS]


def test_dropout_zero_and_compute_dtype_run_two_gemms_one_scale_one_add() -> None:
    setting = TrainingSetting(method="lora", precision="bf16", adapter_dtype="compute", lora_dropout=0.0)
    model = apply_method(_tiny_llama(torch.bfloat16), setting)
    dropouts = [module for name, module in model.named_modules() if name.endswith("lora_dropout.default")]
    assert dropouts and all(isinstance(module, torch.nn.Identity) for module in dropouts)
    ops = _adapted_layer_ops(setting)
    gemms = [op for op in ops if op in ("mm", "addmm", "bmm")]
    assert len(gemms) == 3, ops  # the base projection and the two adapter GEMMs
    assert sorted(op for op in ops if op not in ("mm", "addmm", "bmm")) == ["add", "mul"], ops


def test_dropout_and_fp32_adapters_add_mask_and_casts() -> None:
    """The same count fails for peft's old defaults: a dropout mask and the casts to fp32 and back."""
    setting = TrainingSetting(method="lora", precision="bf16", adapter_dtype="fp32", lora_dropout=0.05)
    ops = _adapted_layer_ops(setting)
    assert "_to_copy" in ops
    assert any("dropout" in op or "bernoulli" in op for op in ops), ops


def test_non_finite_loss_callback_stops_without_saving() -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from autotune.trainer.callbacks import StopOnNonFiniteLossCallback

    callback = StopOnNonFiniteLossCallback()
    args = TrainingArguments(output_dir="unused", use_cpu=True, report_to="none")
    state, control = TrainerState(), TrainerControl()
    state.global_step = 3
    callback.on_log(args, state, control, logs={"loss": 2.5})
    assert not callback.stopped and not control.should_training_stop
    control.should_save = True
    state.global_step = 4
    callback.on_log(args, state, control, logs={"loss": float("inf")})
    assert callback.stopped and control.should_training_stop and not control.should_save
    message = callback.message(2e-4)
    assert "inf at step 4" in message and "\n" not in message


@pytest.mark.slow
def test_nan_loss_stops_the_run(write_plan: PlanWriter, tiny_model_dir: Path, tmp_path: Path) -> None:
    """A model whose final norm holds a NaN: the first loss is NaN; the core stops with one line and exit 2, and
    its report says failed, with the step and the value; no final weights are written."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    broken = tmp_path / "broken"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.model.norm.weight[0] = float("nan")
    model.save_pretrained(broken)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(broken)
    plan_path = write_plan(method="full", micro_batch_size=2)
    plan_text = plan_path.read_text().replace(str(tiny_model_dir), str(broken))
    plan_path.write_text(plan_text)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(16))
    out = tmp_path / "run"
    proc = run_trainer(*core_args(plan_path, data, out, 5), "--save-steps", "1")
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "loss became nan at step 1" in errors[0], proc.stderr
    report = read_report(out)
    assert report.status == "failed" and "loss became nan at step 1" in report.message
    assert report.steps == 1
    assert not (out / "final").exists()
    assert not list((out / "checkpoints").glob("checkpoint-*"))


def test_liger_is_refused_on_the_cpu_by_the_core(write_plan: PlanWriter, tmp_path: Path) -> None:
    from autotune.errors import ConfigError
    from autotune.trainer.kernels import check_kernels_runnable

    with pytest.raises(ConfigError, match="cannot run on the CPU"):
        check_kernels_runnable(TrainingSetting(kernels="liger"), cpu=True)
    check_kernels_runnable(TrainingSetting(kernels="none"), cpu=True)
    plan = write_plan(kernels="liger")
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(4))
    out = tmp_path / "run"
    proc = run_trainer(*core_args(plan, data, out, 1))
    assert proc.returncode == 2 and "kernels=liger" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("planned", [True, False])
def test_guard_refuses_a_compile_mismatch(write_plan: PlanWriter, planned: bool) -> None:
    from types import SimpleNamespace

    from autotune.errors import RuntimeGuardError
    from autotune.schemas.plan_io import load_plan
    from autotune.trainer.guard import _check_compile

    plan = load_plan(write_plan(method="lora", compile=planned))
    module = torch.nn.Linear(2, 2)
    runs = SimpleNamespace(model_wrapped=torch.compile(module) if planned else module)
    _check_compile(runs, plan)  # as planned: no error
    other = SimpleNamespace(model_wrapped=module if planned else torch.compile(module))
    with pytest.raises(RuntimeGuardError, match=f"compile={planned}"):
        _check_compile(other, plan)


@pytest.mark.slow
def test_compiled_lora_run(write_plan: PlanWriter, tmp_path: Path) -> None:
    """A LoRA plan with compile: accelerate compiles the whole PeftModel (the guard checks the model that trains is
    compiled) and the run completes; ~70 s on 2 CPU cores, mostly inductor's compile."""
    plan = write_plan(method="lora", compile=True, micro_batch_size=2)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(16))
    out = tmp_path / "run"
    proc = run_trainer(*core_args(plan, data, out, 2), "--save-steps", "100", timeout_s=600)
    assert proc.returncode == 0, proc.stderr
    report = read_report(out)
    assert report.status == "completed" and report.setting.compile
    assert (out / "final" / "adapter_config.json").is_file()
