"""The shared calibrate / probe output of src/autotune/cli/refit.py: where the calibration went and how it is used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
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


def test_an_outlier_is_named_once_and_narrowed_bands_are_not_called_widened(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config_dir: Path
) -> None:
    """Three rows of one stack (1.3× the model, ±2 %) and one 30× off: the outlier line, no 'time still' note for
    it, and the leave-one-out band (narrower than the shipped one) not called widened."""
    rows = []
    for seq_len, scale in ((512, 1.3), (1024, 1.32), (2048, 1.28), (4096, 39.0)):
        code, out, err = run(capsys, "estimate", "llama3.2-1b", "--gpu", "4090", "--method", "lora",
                             "--seq-len", str(seq_len), "--micro-batch-size", "1", "--json")  # fmt: skip
        assert code == 0, err
        rows.append(f"llama3.2-1b,rtx-4090,lora,{seq_len},1,{json.loads(out)['micro_step_time_s'] * scale:.6g}")
    csv_file = tmp_path / "runs.csv"
    header = "model,gpu,method,seq_len,micro_batch_size,micro_step_time_s\n"
    csv_file.write_text(header + "\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "calibrate", str(csv_file), "-o", str(tmp_path / "c.yaml"))
    assert code == 0, err
    text = " ".join(out.split())
    assert "outlier, named and left out of the fit: runs-row4: measured" in text
    assert "runs-row4: time still" not in text and "note: runs-row" not in text
    # three LoRA rows at 512–2048 tokens, 1.3× and agreeing within 2 %: one corner of the setting space, whose own
    # error could be the offset, so the stack factor stays and the local correction matches them there
    assert "fitted: time from 3 timed row(s); no time coefficient moved" in text
    assert "your rows cover: method lora; seq 512–2048; micro batch 1; sharding none" in text
    assert "time MAPE 23.1% → 0.7% (3 rows)" in text
    assert "time bands from your rows held out one at a time: time_error_band[default] 0.619 → 0.242" in text
    assert "error bands widened: time_error_band" not in text


def test_one_row_within_a_rows_own_error_keeps_the_stack_factor_and_says_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config_dir: Path
) -> None:
    """One row 1.2× the model: within one row's expected error (σ 10 %, stack_fit.ROW_LOG_SIGMA) against a stack
    factor anywhere within a factor e, so the start's stack is the likelier one and the factor stays; the row's note
    says so instead of blaming coefficients shared with other rows (there are none)."""
    code, out, err = run(capsys, "estimate", "llama3.2-1b", "--gpu", "4090", "--method", "lora",
                         "--seq-len", "1024", "--micro-batch-size", "1", "--json")  # fmt: skip
    assert code == 0, err
    csv_file = tmp_path / "runs.csv"
    measured = json.loads(out)["micro_step_time_s"] * 1.2
    csv_file.write_text(
        f"model,gpu,method,seq_len,micro_batch_size,micro_step_time_s\nllama3.2-1b,rtx-4090,lora,1024,1,{measured:.6g}\n",
        encoding="utf-8",
    )
    code, out, err = run(capsys, "calibrate", str(csv_file), "-o", str(tmp_path / "c.yaml"))
    assert code == 0, err
    text = " ".join(out.split())
    assert "fitted: time from 1 timed row(s); no time coefficient moved" in text
    assert "kept: time_scale 1, the stack factor: your rows' offset from the start is within what their own" in text
    assert "measured / predicted ×1.200 on average" in text
    # nor does one such row show a setting error (coverage.setting_error_probability: on a stack the start describes,
    # a row 1.2× off is likelier its noise): the correction is off, and the row's note says why, not "shared rows"
    assert "local correction: off" in text
    assert "runs-row1: time still -17% after the refit: the stack factor was kept" in text
    assert "shared with your other rows" not in text
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["time_scale"] == 1.0
