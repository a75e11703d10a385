"""The Python API (autotune.api): the same plans and estimates as the command line, typed, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

import autotune
from autotune import GridOutcome, estimate, grid, launch_spec, plan
from autotune.errors import InfeasibleError, InvalidRequestError
from autotune.session.setting_options import SettingOptions

README_PLANS = [
    (["llama3-8b", "--gpu", "4090", "--seq-len", "2048"], {"seq_len": 2048}),
    (
        ["llama3-8b", "--gpu", "4090", "--method", "qlora", "--micro-batch-size", "2", "--no-compile"],
        {"method": "qlora", "micro_batch_size": 2, "compile": False},
    ),
    (
        [
            "llama3-70b",
            "--gpu",
            "h100",
            "--num-gpus",
            "8",
            "--seq-len",
            "4096",
            "--global-batch-size",
            "64",
            "--objective",
            "speed",
        ],
        {"num_gpus": 8, "seq_len": 4096, "global_batch_size": 64, "objective": "speed"},
    ),
]
"""README's one-GPU-type ``plan`` commands, as arguments and as the API's keyword arguments."""


@pytest.mark.parametrize(("argv", "keywords"), README_PLANS, ids=["readme-4090", "readme-qlora", "readme-70b"])
def test_plan_equals_the_command_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], keywords: dict[str, object]
) -> None:
    code, out, err = run(capsys, "plan", *argv, "--json")
    assert code == 0, err
    model, gpu = argv[0], argv[2]
    assert plan(model, gpu=gpu, **keywords).json_dict() == json.loads(out)


def test_estimate_equals_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["llama3-8b", "--gpu", "4090", "--method", "qlora", "--micro-batch-size", "2", "--seq-len", "1024"]
    code, out, err = run(capsys, "estimate", *argv, "--json")
    assert code == 0, err
    outcome = estimate("llama3-8b", gpu="4090", method="qlora", micro_batch_size=2, seq_len=1024)
    assert outcome.json_dict() == json.loads(out)
    assert outcome.inputs.setting.method == "qlora"


README_GRID = ["llama3-8b", "--gpu", "4090,a100-80gb,h100", "--num-gpus", "1,2,8", "--num-samples", "50000"]
README_GRID += ["--epochs", "2", "--objective", "cost", "--deadline", "24h"]
README_GRID_KEYWORDS = {"gpu": ["4090", "a100-80gb", "h100"], "num_gpus": [1, 2, 8], "num_samples": 50000, "epochs": 2}
README_GRID_KEYWORDS |= {"objective": "cost", "deadline": "24h"}
"""README's table command (which GPUs, how many, at what cost), as arguments and as :func:`grid`'s keywords."""


def test_grid_equals_the_command_lines_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", *README_GRID, "--json")
    assert code == 0, err
    outcome = grid("llama3-8b", **README_GRID_KEYWORDS)
    assert isinstance(outcome, GridOutcome)
    assert outcome.json_dict() == json.loads(out)
    chosen = outcome.report.chosen
    assert (outcome.plan_file.cluster.gpu, outcome.plan_file.cluster.num_gpus_per_node) == (chosen.gpu, chosen.num_gpus)


def test_grid_takes_prices_as_a_mapping_or_as_the_options_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "llama3-8b", "--gpu", "h100,4090", "--objective", "time", "--json",
                         "--price", "h100=2.49")  # fmt: skip
    assert code == 0, err
    by_mapping = grid("llama3-8b", gpu="h100,4090", objective="time", price={"h100": 2.49}).json_dict()
    assert by_mapping == grid("llama3-8b", gpu=["h100", "4090"], objective="time", price=["h100=2.49"]).json_dict()
    assert by_mapping == json.loads(out)
    assert by_mapping["rows"][0]["price_per_gpu_hour"] == 2.49


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        ({"num_gpus": [1, 0]}, "--num-gpus '1,0'"),
        ({"deadline": "12h"}, "need the run's size"),
        ({"objective": "fastest"}, "--objective 'fastest'"),
        ({"seq_lenght": 2048}, "unknown option seq_lenght"),
    ],
)
def test_bad_grid_options_are_one_line(keywords: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidRequestError) as error:
        grid("llama3-8b", gpu=["4090", "h100"], **keywords)
    assert words in str(error.value)
    assert "\n" not in str(error.value)


def test_a_setting_group_is_the_same_as_its_fields() -> None:
    grouped = plan("llama3-8b", gpu="4090", setting=SettingOptions(method="lora", micro_batch_size=2))
    fields = plan("llama3-8b", gpu="4090", method="lora", micro_batch_size=2)
    assert grouped.plan_file == fields.plan_file
    assert grouped.plan_file.setting.micro_batch_size == 2


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        ({"seq_lenght": 2048}, "unknown option seq_lenght"),
        ({"setting": SettingOptions(method="lora"), "micro_batch_size": 2}, "not both"),
        ({"setting": {"method": "lora"}}, "must be a SettingOptions"),
        ({"micro_batch_size": 0}, "--micro-batch-size"),
    ],
)
def test_bad_options_are_one_line(keywords: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidRequestError) as error:
        plan("llama3-8b", gpu="4090", **keywords)
    assert words in str(error.value)
    assert "\n" not in str(error.value)


def test_a_gpu_list_is_refused_by_plan() -> None:
    with pytest.raises(InvalidRequestError, match="one GPU type"):
        plan("llama3-8b", gpu="4090,h100")


def test_nothing_fits_raises_the_command_lines_refusal() -> None:
    with pytest.raises(InfeasibleError):
        plan("llama3-70b", gpu="4090", method="full")


def test_launch_spec_builds_the_dry_run_and_writes_nothing(tmp_path: Path) -> None:
    outcome = plan("llama3-8b", gpu="4090", seq_len=2048)
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "hello"}\n', encoding="utf-8")
    out = tmp_path / "run"
    preview = launch_spec(outcome.plan_file, dataset=str(data), output_dir=out, max_steps=3, cpu=True)
    assert "autotune.trainer" in " ".join(preview.spec.argv)
    assert "plan.yaml" in preview.spec.files
    assert not out.exists()


def test_launch_spec_refuses_an_unknown_option(tmp_path: Path) -> None:
    outcome = plan("llama3-8b", gpu="4090")
    with pytest.raises(InvalidRequestError, match="max_stepz"):
        launch_spec(outcome.plan_file, dataset="d.jsonl", output_dir=tmp_path / "run", max_stepz=3)


def test_import_autotune_stays_light() -> None:
    code = "import sys, autotune; print(sorted(m for m in sys.modules if m.startswith('autotune')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['autotune']"
    assert set(autotune.__all__) >= {"plan", "estimate", "grid", "launch_spec"}
