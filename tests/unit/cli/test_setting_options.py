"""One set of setting options for plan / estimate / trace / sweep (issue 25 item 3, issue 29 item 3)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from cli_runner import run

from autotune.cli import trace_cmd
from autotune.cli.app import build_command
from autotune.errors import AutotuneError
from autotune.planner.request import Overrides
from autotune.schemas.setting import TrainingSetting
from autotune.session.estimating import SettingInputs, setting_inputs
from autotune.session.setting_options import SETTING_OPTION_NAMES, SettingOptions

CLUSTER_OPTIONS = {"--gpu", "--num-gpus", "--num-nodes", "--host-memory-gib"}


def _options(command: str) -> set[str]:
    """The command's long option names (``--grad-ckpt`` for ``--grad-ckpt/--no-grad-ckpt``)."""
    return {param.opts[-1] for param in build_command(command).params if param.param_type_name == "option"}


def _setting_options(command: str) -> set[str]:
    """The command's options that set a field of the training setting."""
    return {param.opts[-1] for param in build_command(command).params if param.name in TrainingSetting.model_fields}


def test_the_four_commands_take_the_same_setting_options() -> None:
    plan = _setting_options("plan")
    assert len(plan) == len(SETTING_OPTION_NAMES)
    assert _setting_options("estimate") == plan
    assert _setting_options("trace") == plan
    assert _setting_options("sweep") == plan - {"--method"}  # sweep forces each of its --methods in turn
    assert "--methods" in _options("sweep")
    for command in ("plan", "estimate", "trace", "sweep"):
        assert _options(command) >= CLUSTER_OPTIONS, command


def test_trace_takes_the_options_it_lacked() -> None:
    assert {"--lora-dropout", "--adapter-dtype", "--kernels", "--lora-alpha"} <= _options("trace")


def test_the_option_set_is_the_overrides_schema() -> None:
    """Every field the planner can be forced on has one option, and every option is such a field."""
    assert set(SETTING_OPTION_NAMES) == set(Overrides.model_fields)
    assert set(SETTING_OPTION_NAMES) <= set(TrainingSetting.model_fields)
    assert all(field.default is None for field in fields(SettingOptions))


def test_a_stated_setting_takes_the_setting_defaults_for_what_is_not_given(capsys) -> None:
    code, out, _ = run(capsys, "estimate", "llama3-8b", "--gpu", "h100", "--json")
    assert code == 0
    expected = TrainingSetting(sharding="none", precision="bf16").model_dump(mode="json")
    assert json.loads(out)["setting"] == expected


def test_the_trace_gets_every_given_option(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    traced: list[SettingInputs] = []

    class Stop(AutotuneError):
        pass

    def fake_trace(inputs: SettingInputs) -> None:
        traced.append(inputs)
        raise Stop("traced")

    monkeypatch.setattr(trace_cmd, "run_trace", fake_trace)
    monkeypatch.setattr(trace_cmd, "require_torch", lambda: None)
    args = ("--lora-dropout", "0.05", "--adapter-dtype", "fp32", "--kernels", "liger", "--lora-alpha", "8")
    code, _, err = run(capsys, "trace", "llama3-8b", "--seq-len", "1024", "--micro-batch-size", "2", *args)
    assert code == 2 and "traced" in err
    (inputs,) = traced
    setting = inputs.setting
    assert (setting.lora_dropout, setting.adapter_dtype, setting.kernels, setting.lora_alpha) == (
        0.05,
        "fp32",
        "liger",
        8.0,
    )
    assert (setting.micro_batch_size, inputs.workload.seq_len) == (2, 1024)


def test_estimate_and_trace_state_the_same_setting() -> None:
    options = SettingOptions(method="qlora", micro_batch_size=4, lora_targets="q_proj, v_proj", attention_impl="math")
    inputs = setting_inputs("llama3-8b", "4090", 1, 1, None, options, seq_len=512)
    setting = inputs.setting
    assert (setting.method, setting.micro_batch_size, setting.lora_targets) == ("qlora", 4, ("q_proj", "v_proj"))
    assert setting.attention_impl == "eager"  # the alias, resolved by the one schema
    assert inputs.workload.global_batch_size == 4


@pytest.mark.parametrize("command", ["plan", "estimate", "trace", "sweep"])
@pytest.mark.parametrize(
    ("option", "flag"),
    [(("--lora-dropout", "1.5"), "--lora-dropout"), (("--optimizer", "sgd"), "--optimizer")],
)
def test_a_bad_value_is_refused_the_same_way_by_every_command(
    capsys, command: str, option: tuple[str, str], flag: str
) -> None:
    code, out, err = run(capsys, command, "llama3-8b", "--gpu", "h100", *option)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"error: {flag}: ")
    _, _, reference = run(capsys, "plan", "llama3-8b", "--gpu", "h100", *option)
    assert err == reference


@pytest.mark.parametrize("command", ["plan", "sweep"])
def test_the_objective_is_checked_by_the_request_schema(capsys, command: str) -> None:
    code, _, err = run(capsys, command, "llama3-8b", "--gpu", "h100", "--objective", "fast")
    assert code == 2
    assert err.startswith("error: --objective: ") and "'quality', 'speed' or 'memory'" in err


def test_plan_honours_a_forced_attention_impl(capsys) -> None:
    code, out, _ = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--attention-impl", "eager", "--json")
    assert code == 0
    assert json.loads(out)["plan"]["setting"]["attention_impl"] == "eager"
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--attention-impl", "eager-legacy")
    assert code == 2 and "eager-legacy" in err
