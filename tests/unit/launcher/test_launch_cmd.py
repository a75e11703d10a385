"""``autotune launch`` through the CLI entry point: dry run, one-line errors (exit 2), --set, a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plans import make_plan

import autotune.cli.app as cli_app
from autotune.cli import launch_cmd
from autotune.launcher import LaunchSpec, run_launch
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan, save_plan

from .test_overrides import FakeEstimator


def run_cli(*argv: str) -> int:
    try:
        cli_app.main(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def plan_file(tmp_path: Path, plan: PlanFile | None = None) -> Path:
    return save_plan(plan or make_plan(sharding="zero3", gpus=2), tmp_path / "plan.yaml")


def test_dry_run_prints_the_spec_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = plan_file(tmp_path)
    before = sorted(tmp_path.iterdir())
    code = run_cli("launch", str(path), "--dataset", "org/data", "--output-dir", str(tmp_path / "run"), "--dry-run")
    out = capsys.readouterr().out
    assert code == 0
    assert sorted(tmp_path.iterdir()) == before
    assert "torchrun" in out and "autotune.trainer" in out
    assert "deepspeed_config.json" in out and '"stage": 3' not in out  # file names, not their contents
    assert "TOKENIZERS_PARALLELISM" in out
    args = ("launch", str(path), "--dataset", "org/data", "--output-dir", str(tmp_path / "run"), "--dry-run")
    assert run_cli(*args, "--show-files") == 0
    out = capsys.readouterr().out
    assert '"stage": 3' in out and sorted(tmp_path.iterdir()) == before  # contents when asked


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "not found"),
        ("a: [b\n", "malformed YAML"),
        ("schema_version: 1\nbogus: 1\n", "unknown key 'bogus'"),
    ],
)
def test_bad_plan_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    path = tmp_path / "plan.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code = run_cli("launch", str(path), "--dataset", "d", "--output-dir", str(tmp_path / "run"))
    assert code == 2
    assert expected in _error_line(capsys)
    assert not (tmp_path / "run").exists()


def test_existing_output_dir_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    out.mkdir()
    code = run_cli("launch", str(plan_file(tmp_path)), "--dataset", "d", "--output-dir", str(out))
    assert code == 2
    assert "already exists" in _error_line(capsys)
    assert list(out.iterdir()) == []


def test_plan_options_with_a_plan_file_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli("launch", str(plan_file(tmp_path)), "--dataset", "d", "--output-dir", "o", "--gpu", "4090")
    assert code == 2
    assert "--gpu 4090" in _error_line(capsys)


def test_bad_option_value_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--dataset", "d", "--output-dir", str(tmp_path / "o"), "--dataset-format", "csv", "--dry-run")
    assert run_cli("launch", str(plan_file(tmp_path)), *args) == 2
    assert "--dataset-format" in _error_line(capsys)


def test_profile_steps_reach_the_core_and_a_bad_count_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = (str(plan_file(tmp_path)), "--dataset", "org/data", "--output-dir", str(tmp_path / "o"), "--dry-run")
    assert run_cli("launch", *args, "--profile-steps", "3") == 0
    assert "--profile-steps 3" in " ".join(capsys.readouterr().out.split())
    assert run_cli("launch", *args, "--profile-steps", "0") == 2
    assert "--profile-steps" in _error_line(capsys)
    assert not (tmp_path / "o").exists()


def test_set_recomputes_and_warns_when_it_no_longer_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeEstimator()
    monkeypatch.setattr(launch_cmd, "plan_estimator", lambda plan, path: (fake.estimate, fake.resolve_gpu))
    path = plan_file(tmp_path, make_plan(sharding="zero3", gpus=2, micro_batch_size=1, grad_accum=8))
    out_dir = tmp_path / "run"
    code = run_cli(
        "launch",
        str(path),
        "--dataset",
        "d",
        "--output-dir",
        str(out_dir),
        "--set",
        "micro_batch_size=4",
        "--dry-run",
        "--show-files",
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "micro_batch_size 1 → 4" in captured.err and "grad_accum 8 → 2" in captured.err
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "no longer fits" in warnings[0]
    assert '"train_micro_batch_size_per_gpu": 4' in captured.out  # the DeepSpeed JSON follows the override
    assert len(fake.calls) == 1


def test_a_run_writes_the_files_and_returns_the_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real runner, with the trainer replaced by a script that checks the run directory."""
    seen: list[LaunchSpec] = []

    def run_checker(spec: LaunchSpec, output_dir: Any, *, resume: bool, dry_run: bool, detach: bool = False) -> int:
        seen.append(spec)
        check = "import pathlib, sys; sys.exit(3 if (pathlib.Path(sys.argv[1]) / 'plan.yaml').is_file() else 5)"
        swapped = spec.model_copy(update={"argv": ["python", "-c", check, str(output_dir)]})
        return run_launch(swapped, output_dir, resume=resume, dry_run=dry_run)

    monkeypatch.setattr(launch_cmd, "run_launch", run_checker)
    plan = make_plan()
    out = tmp_path / "run"
    code = run_cli("launch", str(plan_file(tmp_path, plan)), "--dataset", "d", "--output-dir", str(out), "--cpu")
    assert code == 3
    assert load_plan(out / "plan.yaml") == plan
    assert seen[0].argv[:3] == ["python", "-m", "autotune.trainer"]
    assert "launching" in capsys.readouterr().out


def test_local_dataset_and_output_dir_become_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.jsonl").write_text('{"text": "x"}\n')
    seen: list[LaunchSpec] = []
    monkeypatch.setattr(launch_cmd, "render_spec", lambda spec, options, **_: seen.append(spec))
    assert (
        run_cli("launch", str(plan_file(tmp_path)), "--dataset", "data.jsonl", "--output-dir", "run", "--dry-run") == 0
    )
    argv = seen[0].argv
    assert argv[argv.index("--dataset") + 1] == str(tmp_path / "data.jsonl")
    assert argv[argv.index("--output-dir") + 1] == str(tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_plan_with_measurement_only_attention_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # eager-legacy (transformers <= 4.29 LlamaAttention) describes 2023 measurements; today's transformers cannot
    # run it: one line, exit 2, nothing written — from launch and from the training core itself.
    path = plan_file(tmp_path, make_plan(sharding="zero3", gpus=2, method="full", attention_impl="eager-legacy"))
    out = tmp_path / "run"
    assert run_cli("launch", str(path), "--dataset", "org/data", "--output-dir", str(out)) == 2
    assert "attention_impl=eager-legacy" in _error_line(capsys)
    assert not out.exists()

    pytest.importorskip("transformers")  # the training core's stack
    from autotune.trainer.__main__ import main as trainer_main

    assert trainer_main(["--plan", str(path), "--dataset", "org/data", "--output-dir", str(out)]) == 2
    assert "attention_impl=eager-legacy" in _error_line(capsys)
    assert not out.exists()


def test_help_shows_the_defaults(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 19 item 7: --seed, --learning-rate, --warmup-ratio and --save-steps said nothing of their defaults."""
    monkeypatch.setenv("COLUMNS", "400")
    assert run_cli("launch", "--help") == 0
    text = capsys.readouterr().out
    lines = {line.split()[1]: line for line in text.splitlines() if line.strip(" │").startswith("--")}
    assert "(default: 42)" in lines["--seed"]
    assert "(default: 50)" in lines["--save-steps"]
    assert "default: the plan's training.learning_rate" in lines["--learning-rate"]
    assert "default: the plan's training.warmup_ratio, 0.03" in lines["--warmup-ratio"]
    assert "--dataset" in text and "--output-dir" in text
    assert "PydanticUndefined" not in text  # issue 29 item 5: the required --dataset and --output-dir showed it
