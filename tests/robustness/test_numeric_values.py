"""Values that make no sense are refused with one line and exit code 2: NaN, ±inf, out of range, inconsistent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run
from plans import make_plan

from autotune.errors import ConfigError
from autotune.schemas.plan_io import load_plan, plan_to_yaml

NON_FINITE = ["nan", "inf", "-inf", "NaN", "Infinity", "1e400"]
PLAN = ["plan", "llama3-8b", "--gpu", "4090"]
ESTIMATE = ["estimate", "llama3-8b", "--gpu", "4090"]


def _refused(code: int, err: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("option", ["--lora-alpha", "--host-memory-gib", "--epochs"])
def test_plan_refuses_non_finite(capsys: pytest.CaptureFixture[str], option: str, value: str) -> None:
    code, _, err = run(capsys, *PLAN, option, value)
    _refused(code, err)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_estimate_refuses_bad_epochs(capsys: pytest.CaptureFixture[str], value: str) -> None:
    _refused(*run(capsys, *ESTIMATE, "--epochs", value)[::2])


@pytest.mark.parametrize(
    "args",
    [
        ["--global-batch-size", "8192"],  # once a pydantic traceback: micro batch above its bound
        ["--global-batch-size", "33", "--micro-batch-size", "2"],  # once silently trained 32
        ["--global-batch-size", "32", "--num-gpus", "3"],
        ["--global-batch-size", "0"],
        ["--global-batch-size", "-5"],
        ["--seq-len", "0"],
        ["--seq-len", "9" * 5000],
        ["--num-gpus", "0"],
        ["--micro-batch-size", "0"],
        ["--lora-rank", "0"],
        ["--lora-alpha", "0"],
    ],
    ids=lambda args: " ".join(a[:12] for a in args),
)
def test_plan_refuses_out_of_range_and_inconsistent(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, _, err = run(capsys, *PLAN, *args)
    if args == ["--global-batch-size", "8192"]:
        assert code in (0, 2) and "Traceback" not in err  # a valid request: plans with accumulation
        return
    _refused(code, err)


def test_global_batch_not_divisible_names_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *PLAN, "--global-batch-size", "33", "--micro-batch-size", "2")
    _refused(code, err)
    assert "--global-batch-size 34" in err


def test_estimate_refuses_sharding_none_on_two_gpus_like_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code_e, _, err_e = run(capsys, *ESTIMATE, "--sharding", "none", "--num-gpus", "2")
    code_p, _, err_p = run(capsys, *PLAN, "--sharding", "none", "--num-gpus", "2")
    _refused(code_e, err_e)
    _refused(code_p, err_p)
    assert err_e == err_p


@pytest.mark.parametrize("value", ["-1", "-100"])
def test_validate_worst_negative_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, _, err = run(capsys, "validate", "--worst", value)
    assert code == 2 and "Traceback" not in err


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} in --json output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", [PLAN, ESTIMATE, [*PLAN, "--method", "full"]], ids=["plan", "estimate", "full"])
def test_json_output_is_strict_json(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    code, out, err = run(capsys, *command, "--json")
    assert code in (0, 2), err
    if code == 0:
        _strict_json(out)


@pytest.mark.parametrize(
    "path,value",
    [
        ("setting.lora_alpha", ".inf"),
        ("setting.lora_alpha", ".nan"),
        ("setting.lora_dropout", "-.inf"),
        ("workload.epochs", ".nan"),
        ("prediction.peak_memory_gib", ".nan"),
        ("prediction.step_time_s", ".inf"),
        ("cluster.host_memory_gib_per_node", ".inf"),
        ("setting.micro_batch_size", "100000000"),
        ("setting.lora_rank", "-3"),
        ("workload.seq_len", "1" + "0" * 5000),
    ],
)
def test_plan_file_with_bad_number_refused(tmp_path: Path, path: str, value: str) -> None:
    text = plan_to_yaml(make_plan(workload={"num_samples": 1000}))
    section, key = path.split(".")
    lines = text.splitlines()
    start = lines.index(f"{section}:")
    index = next(i for i in range(start, len(lines)) if lines[i].strip().startswith(f"{key}:"))
    indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
    lines[index] = f"{indent}{key}: {value}"
    file = tmp_path / "plan.yaml"
    file.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as caught:
        load_plan(file)
    assert "\n" not in str(caught.value) and str(file) in str(caught.value)


@pytest.mark.parametrize("key,value", [("final_logit_softcapping", "NaN"), ("rope_theta", "Infinity")])
def test_config_json_with_non_finite_refused_or_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, value: str
) -> None:
    data = json.loads((Path(__file__).parents[1] / "fixtures" / "configs" / "gemma2-9b" / "config.json").read_text())
    data[key] = float(value)
    file = tmp_path / "config.json"
    file.write_text(json.dumps(data))  # json writes NaN / Infinity literals, which json.loads reads back
    code, out, err = run(capsys, "plan", str(file), "--gpu", "4090", "--json")
    if key == "final_logit_softcapping":  # a model field: refused
        _refused(code, err)
    assert code in (0, 2) and "Traceback" not in err
    if code == 0:
        _strict_json(out)


@pytest.mark.parametrize(
    "option,value",
    [
        ("--learning-rate", "inf"),
        ("--learning-rate", "nan"),
        ("--learning-rate", "-1"),
        ("--warmup-ratio", "nan"),
        ("--warmup-ratio", "2"),
        ("--max-steps", "0"),
        ("--save-steps", "-1"),
        ("--main-process-port", "70000"),
        ("--seed", "-1"),
    ],
)
def test_launch_refuses_bad_trainer_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_to_yaml(make_plan()))
    code, _, err = run(
        capsys, "launch", str(plan), "--dataset", "d", "--output-dir", str(tmp_path / "run"), option, value, "--dry-run"
    )
    _refused(code, err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--price", "h100=1e308"], "at most 1e+06 per GPU-hour"),
        (["--deadline", "1e306d"], "at most 3650d (ten years)"),
        (["--deadline", "4000d"], "at most 3650d (ten years)"),
    ],
)
def test_plan_grid_refuses_numbers_past_their_bound(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", "4090,h100", "--num-samples", "1000", *args)
    _refused(code, err)
    assert message in err


def test_a_user_price_past_its_bound_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from autotune.profiles.prices import user_prices_path

    path = user_prices_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("date: 2026-01-01\nsource: mine\ngpus:\n  h100-80gb: {typical: 1.0e+308}\n", encoding="utf-8")
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", "4090,h100", "--objective", "cost")
    _refused(code, err)
    assert str(path) in err
