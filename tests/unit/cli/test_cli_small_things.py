"""The small things a new user trips over (issue 12): help, --version, notes, did-you-mean, nearest fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run

from autotune.calibration.cases import prepare_cases
from autotune.calibration.recalibrate import recalibrate
from autotune.cli.refit import bound_notes
from autotune.costmodel.calibration import default_coefficients
from autotune.profiles.measurement_csv import measurements_from_csv

EXAMPLE_CSV = """model,gpu,method,seq_len,micro_batch_size,grad_accum,peak_memory_gib,memory_kind,micro_step_time_s,oom
llama3.1-8b,4090,qlora,2048,2,8,14.5,allocated,1.25,
llama3.1-8b,4090,lora,4096,4,1,,,,true
"""
"""The CSV example of docs/calibration.md."""


def test_no_arguments_prints_help_and_exits_0(capsys) -> None:
    code, out, err = run(capsys)
    assert code == 0
    assert "Usage: autotune" in out and "Commands" in out and "plan" in out
    assert "error" not in err


def test_version(capsys) -> None:
    from autotune import __version__

    code, out, _ = run(capsys, "--version")
    assert (code, out.strip()) == (0, f"autotune {__version__}")


def _plan_notes(capsys, *args: str) -> list[str]:
    code, out, _ = run(capsys, "plan", "llama3-8b", "--gpu", "h100", *args, "--json")
    assert code == 0
    return json.loads(out)["notes"]


def test_host_ram_note_only_when_a_setting_offloads(capsys) -> None:
    assert not any("host RAM" in note for note in _plan_notes(capsys, "--sharding", "none"))
    assert any("host RAM" in note for note in _plan_notes(capsys, "--sharding", "zero3-offload"))
    assert not any("host RAM" in note for note in _plan_notes(capsys, "--host-memory-gib", "256"))
    code, out, _ = run(capsys, "estimate", "llama3-8b", "--gpu", "4090", "--json")
    assert code == 0 and not any("host RAM" in note for note in json.loads(out)["notes"])


@pytest.fixture
def plan_file(capsys, tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    code, _, _ = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "-o", str(path))
    assert code == 0
    return path


@pytest.fixture
def gpu_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dry runs without --cpu probe the GPU: these describe a GPU machine (the probe is tested in
    tests/unit/launcher/test_preflight.py)."""
    from autotune.launcher import preflight

    monkeypatch.setattr(preflight, "check_gpu_visible", lambda: None)


def _launch(capsys, plan: Path, tmp_path: Path, *args: str) -> tuple[int, str]:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    code, _, err = run(
        capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "r"), "--dry-run", *args
    )
    return code, err


def test_mistyped_launch_option_with_a_plan_file_gets_did_you_mean(capsys, plan_file: Path, tmp_path: Path) -> None:
    code, err = _launch(capsys, plan_file, tmp_path, "--max-step", "3")
    assert code == 2 and "--max-step" in err and "did you mean --max-steps?" in err
    assert len(err.strip().splitlines()) == 1


def test_set_of_a_run_option_points_to_its_flag(capsys, plan_file: Path, tmp_path: Path) -> None:
    code, err = _launch(capsys, plan_file, tmp_path, "--set", "save_steps=10")
    assert code == 2 and "use --save-steps" in err


def test_estimate_that_does_not_fit_names_the_nearest_that_fits(capsys) -> None:
    code, out, _ = run(capsys, "estimate", "llama3-8b", "--gpu", "4090", "--method", "full", "--json")
    assert code == 0
    data = json.loads(out)
    assert not data["fits"]
    (line,) = [note for note in data["notes"] if "nearest that fits" in note]
    assert "does not fit" in line and "GiB" in line
    code, out, _ = run(capsys, "estimate", "llama3-8b", "--gpu", "4090", "--method", "qlora", "--json")
    assert json.loads(out)["fits"] and not any("nearest" in note for note in json.loads(out)["notes"])


def test_csv_whose_first_line_is_blank_is_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("\n\n" + EXAMPLE_CSV)
    rows = measurements_from_csv(path)
    assert len(rows) == 2 and rows[0].peak_memory_gib == 14.5


def test_refit_that_cannot_reach_a_row_names_the_bound(tmp_path: Path) -> None:
    """A micro-step 'measured' 100× faster than the model can run it: the stack factor stops at its bound 0.1."""
    path = tmp_path / "runs.csv"
    path.write_text(EXAMPLE_CSV.replace(",1.25,", ",0.0125,"))
    cases = prepare_cases(measurements_from_csv(path))
    result = recalibrate(
        cases, default_coefficients(), start_name="seeds", sources=[str(path)], with_seeds=False, name="t"
    )
    assert result.coefficients.time_scale == 0.1
    (line,) = bound_notes(result)
    assert "time_scale" in line and "bound 0.1" in line and "per micro-step" in line


def test_dry_run_prints_the_command_and_file_list_not_the_files(
    capsys, plan_file: Path, tmp_path: Path, gpu_visible: None
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    args = ["launch", str(plan_file), "--dataset", str(data), "--output-dir", str(tmp_path / "r"), "--dry-run"]
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "-m autotune.trainer" in out and "plan.yaml" in out and "--show-files" in out
    assert "prediction:" not in out and len(out.splitlines()) < 30
    code, out, _ = run(capsys, *args, "--show-files")
    assert code == 0 and "prediction:" in out and "memory_breakdown_gib:" in out
    assert not (tmp_path / "r").exists()
    headers = [line for line in out.splitlines() if "plan.yaml" in line and "─" in line]
    assert headers and all(len(line) <= 100 for line in headers)  # a file's header in a pipe: not 1,000 columns


def test_launch_verbose_exports_verbose_and_withdraws_the_quiet_switches(
    capsys, plan_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu_visible: None
) -> None:
    import os

    from autotune import quiet

    monkeypatch.setenv("AUTOTUNE_VERBOSE", "0")
    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    monkeypatch.setattr(quiet, "_EXPORTED", set())
    quiet.quiet_third_party()
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "error"  # what a quiet trainer would inherit
    code, _ = _launch(capsys, plan_file, tmp_path, "--verbose")
    assert code == 0
    assert os.environ["AUTOTUNE_VERBOSE"] == "1" and "TRANSFORMERS_VERBOSITY" not in os.environ


def test_verbose_keeps_the_users_own_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from autotune import quiet

    monkeypatch.setenv("AUTOTUNE_VERBOSE", "0")
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")
    monkeypatch.setattr(quiet, "_EXPORTED", set())
    quiet.quiet_third_party()
    quiet.quiet_third_party(verbose=True)
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"


def test_launch_help_lists_the_plan_options_launch_model_accepts(capsys) -> None:
    code, out, _ = run(capsys, "launch", "--help")
    assert code == 0
    flat = " ".join(out.replace("│", " ").split())
    assert "With a MODEL instead of PLAN.yaml" in flat
    for flag in ("--gpu", "--num-gpus", "--seq-len", "--method", "--sharding", "--lora-rank"):
        assert f"{flag}," in flat or f"{flag}." in flat


def test_progress_bars_drawn_with_tqdm_directly_are_quiet() -> None:
    """transformers draws the GGUF de-quantization bar with tqdm.auto directly (no HF switch applies)."""
    import os
    import subprocess
    import sys

    script = (
        "from autotune.quiet import quiet_third_party\nquiet_third_party()\n"
        "from tqdm.auto import tqdm\nfor _ in tqdm(range(3), desc='Converting GGUF tensors'): pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_VERBOSE", "TQDM_DISABLE")}
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert quiet.returncode == 0 and "Converting" not in quiet.stderr
    loud = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**env, "AUTOTUNE_VERBOSE": "1"}, timeout=60
    )
    assert "Converting" in loud.stderr


def test_set_sharding_fsdp_on_one_gpu_is_refused_like_plan(
    capsys, plan_file: Path, tmp_path: Path, gpu_visible: None
) -> None:
    code, _, plan_err = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "--sharding", "fsdp")
    assert code == 2 and "needs more than one GPU" in plan_err
    code, err = _launch(capsys, plan_file, tmp_path, "--set", "sharding=fsdp")
    assert code == 2 and "--set:" in err and "needs more than one GPU" in err
    assert len(err.strip().splitlines()) == 1
    code, _ = _launch(capsys, plan_file, tmp_path, "--set", "sharding=zero3-offload")
    assert code == 0


def test_set_fsdp_offload_that_would_accumulate_on_one_gpu_is_refused_like_plan(
    capsys, plan_file: Path, tmp_path: Path, gpu_visible: None
) -> None:
    """torch FSDP with CPU offload keeps only the last micro-batch's gradient outside no_sync(), which accelerate
    enters only with several processes: plan, estimate and launch refuse it on one GPU, before writing anything."""
    plan_args = ("--gpu", "4090", "--sharding", "fsdp-offload", "--micro-batch-size", "1", "--global-batch-size", "4")
    code, _, plan_err = run(capsys, "plan", "llama3-8b", *plan_args)
    assert code == 2 and "cannot accumulate gradients (4 micro-steps" in plan_err
    assert len(plan_err.strip().splitlines()) == 1
    code, _, estimate_err = run(
        capsys, "estimate", "llama3-8b", "--gpu", "4090", "--sharding", "fsdp-offload", "--grad-accum", "2"
    )
    assert code == 2 and "cannot accumulate gradients (2 micro-steps" in estimate_err
    code, err = _launch(capsys, plan_file, tmp_path, "--set", "sharding=fsdp-offload")
    assert code == 2 and "--set:" in err and "zero3-offload" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
