"""Issue 29's command-line findings, as a user meets them: refusals in one line, help that says what is accepted.

Every test runs the real entry point (in-process, or in a subprocess where the process's exit matters).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

ROOT = Path(__file__).resolve().parents[3]
FALCON_CONFIG = ROOT / "tests" / "fixtures" / "configs" / "falcon-7b" / "config.json"
SHIPPED_CALIBRATION = ROOT / "src" / "autotune" / "profiles" / "calibration" / "seeds.yaml"


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", ["plan", "estimate", "sweep"])
@pytest.mark.parametrize("option", [("--lora-rank", "8"), ("--lora-dropout", "0.1"), ("--adapter-dtype", "fp32")])
def test_an_adapter_option_with_method_full_is_refused(capsys, command: str, option: tuple[str, str]) -> None:
    method = ["--methods", "full"] if command == "sweep" else ["--method", "full"]
    code, out, err = run(capsys, command, "llama3-8b", "--gpu", "h100", *method, *option)
    line = _one_line_error(err)
    assert code == 2 and out == ""
    assert option[0] in line and "full" in line and "lora" in line


def test_sweep_applies_adapter_options_to_the_adapter_columns(capsys) -> None:
    args = ("sweep", "llama3-8b", "--gpu", "h100", "--seq-len", "1024", "--methods", "full,lora", "--lora-rank", "8")
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    settings = {cell["method"]: cell["setting"] for cell in json.loads(out)["cells"] if cell["setting"]}
    assert settings["lora"]["lora_rank"] == 8 and settings["full"]["method"] == "full"


def test_an_adapter_option_without_a_method_plans_an_adapter_method(capsys) -> None:
    code, out, _ = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--lora-rank", "8", "--json")
    assert code == 0
    setting = json.loads(out)["plan"]["setting"]
    assert setting["method"] in ("lora", "qlora") and setting["lora_rank"] == 8


def test_a_plot_in_a_missing_directory_is_refused_before_the_plan_prints(capsys, tmp_path: Path) -> None:
    code, out, err = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "--plot", str(tmp_path / "nodir" / "x.png"))
    assert code == 2 and out == ""
    assert "does not exist" in _one_line_error(err)


def _with_closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """``autotune ARGS`` whose stdout reader is already gone (``autotune models | head -0``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        code = "from autotune.cli.app import main; main()"
        return subprocess.run(
            [sys.executable, "-c", code, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, check=False
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [("models",), ("gpus", "--json"), ("plan", "--help"), ("--help",)])
def test_a_closed_pipe_ends_silently_like_git(args: tuple[str, ...]) -> None:
    result = _with_closed_stdout(*args)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("name", ["rocm", "cpu"])
def test_an_unknown_gpu_with_no_close_name_lists_the_catalog(capsys, name: str) -> None:
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", name)
    line = _one_line_error(err)
    assert code == 2 and f"unknown GPU '{name}'" in line
    assert all(key in line for key in ("h100-80gb", "rtx-4090", "mi300x"))


@pytest.mark.parametrize(
    ("global_batch", "gpus", "advice"),
    [("33", "2", "use --global-batch-size 32 or 34"), ("1", "2", "use --global-batch-size 2"), ("7", "4", "4 or 8")],
)
def test_a_global_batch_the_gpus_do_not_divide_gets_the_nearest_values(
    capsys, global_batch: str, gpus: str, advice: str
) -> None:
    args = ("plan", "llama3-8b", "--gpu", "h100", "--num-gpus", gpus, "--global-batch-size", global_batch)
    code, _, err = run(capsys, *args)
    assert code == 2 and advice in _one_line_error(err)


@pytest.mark.parametrize(
    ("accum", "global_batch", "gpus", "advice"),
    [
        ("5", "32", "1", "use --grad-accum 4 or 8, or --global-batch-size 30 or 35"),
        ("64", "32", "1", "use --grad-accum 32, or --global-batch-size 64"),
        ("3", "16", "2", "use --grad-accum 2 or 4, or --global-batch-size 12 or 18"),
    ],
)
def test_a_grad_accum_that_does_not_divide_gets_the_nearest_values(
    capsys, accum: str, global_batch: str, gpus: str, advice: str
) -> None:
    args = ("plan", "llama3-8b", "--gpu", "h100", "--num-gpus", gpus, "--global-batch-size", global_batch)
    code, _, err = run(capsys, *args, "--grad-accum", accum)
    assert code == 2 and advice in _one_line_error(err)


def _help(capsys, monkeypatch: pytest.MonkeyPatch, *args: str, columns: int = 200) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = run(capsys, *args, "--help")
    assert code == 0
    return out


def test_loss_impl_native_is_in_the_help_of_the_commands_that_accept_it(capsys, monkeypatch) -> None:
    for command in ("plan", "sweep"):
        text = _help(capsys, monkeypatch, command)
        assert "fp32-upcast (" in text and "chunked (" in text and "native (" not in text
    for command in ("estimate", "trace"):
        assert "native (" in _help(capsys, monkeypatch, command)
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--loss-impl", "native")
    assert code == 2 and "native" in _one_line_error(err)
    code, _, _ = run(capsys, "estimate", "llama3-8b", "--gpu", "h100", "--loss-impl", "native", "--json")
    assert code == 0


@pytest.mark.parametrize("command", ["calibrate", "probe"])
def test_calibrate_and_probe_help_give_the_config_dir_order_uncut(capsys, monkeypatch, command: str) -> None:
    text = _help(capsys, monkeypatch, command, columns=80)
    assert "…" not in text
    flat = " ".join(text.replace("│", " ").split())
    order = [flat.find(name) for name in ("$AUTOTUNE_CONFIG_DIR", "$XDG_CONFIG_HOME/autotune", "~/.config/autotune")]
    assert -1 not in order and order == sorted(order)


def test_sweep_notes_the_user_calibration_once(capsys, _isolated_user_config: Path) -> None:
    shutil.copy(SHIPPED_CALIBRATION, _isolated_user_config / "calibration.yaml")
    args = ("sweep", "llama3.2-1b", "--gpu", "4090", "--seq-len", "512,1024", "--methods", "lora,qlora")
    code, _, err = run(capsys, *args)
    assert code == 0
    assert err.count("using calibration") == 1


def test_a_model_family_is_not_named_twice_in_a_note(capsys) -> None:
    code, out, _ = run(capsys, "plan", str(FALCON_CONFIG), "--gpu", "h100", "--json")
    assert code == 0
    notes = [note for note in json.loads(out)["notes"] if note.startswith("falcon-7b:")]
    assert notes and not any(note.startswith("falcon-7b: falcon:") for note in notes)


@pytest.mark.parametrize("command", ["launch", "plan", "estimate"])
def test_help_prints_each_default_once(capsys, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    text = _help(capsys, monkeypatch, command, columns=400)
    twice = [line for line in text.splitlines() if "(default:" in line and "[default:" in line]
    assert not twice, twice
