"""The shared calibrate / probe output of src/autotune/cli/refit.py: where the calibration went and how it is used."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run

ROWS = (
    "model,gpu,method,seq_len,micro_batch_size,grad_accum,peak_memory_gib,memory_kind,micro_step_time_s\n"
    "llama3.2-1b,rtx-4090,lora,1024,2,8,6.5,allocated,0.9\n"
)


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user config dir of the test's own (never the real home)."""
    path = tmp_path / "config"
    monkeypatch.setenv("AUTOTUNE_CONFIG_DIR", str(path))
    return path


def _calibrate(capsys: pytest.CaptureFixture[str], tmp_path: Path, output: Path) -> str:
    csv_file = tmp_path / "runs.csv"
    csv_file.write_text(ROWS, encoding="utf-8")
    code, out, err = run(capsys, "calibrate", str(csv_file), "-o", str(output))
    assert code == 0, err
    assert output.is_file()
    return " ".join(out.split())


def test_o_naming_the_user_calibration_path_says_plan_and_estimate_now_use_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config_dir: Path
) -> None:
    """Issue 28: ``-o`` into the config dir said "use it with --calibration FILE" though plan already uses it."""
    config_dir.mkdir()
    spelled_otherwise = config_dir / ".." / config_dir.name / "calibration.yaml"
    out = _calibrate(capsys, tmp_path, spelled_otherwise)
    assert "plan and estimate now use it" in out and "use it with --calibration" not in out


def test_o_elsewhere_says_how_to_pass_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config_dir: Path
) -> None:
    out = _calibrate(capsys, tmp_path, tmp_path / "elsewhere.yaml")
    assert "use it with --calibration" in out and "now use it" not in out
    assert not (config_dir / "calibration.yaml").exists()
