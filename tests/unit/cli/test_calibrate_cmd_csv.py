"""``autotune calibrate`` on CSV files through the CLI: the model column's forms (config.json, model directory,
.gguf, relative to the CSV) and ``--template`` (written once, read back, refused over an existing file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run
from model_files import config_with_layers, tiny_gguf

from autotune.profiles.measurement_csv import CSV_COLUMNS

"""A Llama 3.2 1B config.json (tests/fixtures/configs/README.md)."""

HEADER = "model,gpu,method,seq_len,micro_batch_size,grad_accum,micro_step_time_s\n"


def calibrated_rows(capsys: pytest.CaptureFixture[str], csv_file: Path, output: Path) -> str:
    """Run ``autotune calibrate CSV -o OUTPUT``; its stdout (written at the console's pipe width: lines unbroken)."""
    code, out, err = run(capsys, "calibrate", str(csv_file), "-o", str(output))
    assert code == 0, err
    assert output.is_file()
    return out


@pytest.mark.parametrize("form", ["config.json", "directory", "gguf"])
def test_model_column_takes_a_config_a_directory_and_a_gguf(
    form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if form == "gguf":
        target = tiny_gguf(tmp_path / "tiny.gguf")
        time_s = 0.01
    else:
        folder = config_with_layers(tmp_path / "my-llama", 8)
        target = folder / "config.json" if form == "config.json" else folder
        time_s = 0.5
    csv_file = tmp_path / "runs.csv"
    csv_file.write_text(HEADER + f"{target},rtx-4090,lora,1024,2,8,{time_s}\n", encoding="utf-8")
    out = calibrated_rows(capsys, csv_file, tmp_path / "c.yaml")
    assert f"runs-row1: rtx-4090 ×1, {target}" in out


def test_relative_model_paths_are_read_from_the_csv_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config_with_layers(tmp_path / "runs" / "models" / "my-llama", 8)
    tiny_gguf(tmp_path / "runs" / "models" / "tiny.gguf")
    csv_file = tmp_path / "runs" / "rows.csv"
    csv_file.write_text(
        HEADER
        + "models/my-llama,rtx-4090,lora,1024,2,8,0.5\n"
        + "models/my-llama/config.json,rtx-4090,lora,2048,2,8,0.9\n"
        + "models/tiny.gguf,rtx-4090,lora,1024,2,8,0.01\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)  # not the CSV's folder: models/... does not exist here
    out = calibrated_rows(capsys, Path("runs") / "rows.csv", tmp_path / "c.yaml")
    models = tmp_path / "runs" / "models"
    assert f"rows-row1: rtx-4090 ×1, {models / 'my-llama'}" in out
    assert f"rows-row2: rtx-4090 ×1, {models / 'my-llama' / 'config.json'}" in out
    assert f"rows-row3: rtx-4090 ×1, {models / 'tiny.gguf'}" in out


def test_template_is_written_once_and_read_back_with_a_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = tmp_path / "rows.csv"
    code, out, err = run(capsys, "calibrate", "--template", str(template))
    assert code == 0, err
    text = template.read_text(encoding="utf-8")
    assert text.splitlines()[-1] == ",".join(CSV_COLUMNS) and "wrote" in out
    cells = dict.fromkeys(CSV_COLUMNS, "")
    cells.update(model="llama3.2-1b", gpu="rtx-4090", method="lora", seq_len="1024", micro_batch_size="2")
    cells.update(grad_accum="8", compile="true", attention_impl="eager", micro_step_time_s="0.9")
    template.write_text(text + ",".join(cells[column] for column in CSV_COLUMNS) + "\n", encoding="utf-8")
    out = calibrated_rows(capsys, template, tmp_path / "c.yaml")
    assert "rows-row1: rtx-4090 ×1, llama3.2-1b, seq 1024, lora r16, mbs 2 × ga 8, ckpt, compile" in out


def test_template_refuses_an_existing_file_and_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "rows.csv"
    existing.write_text("mine\n", encoding="utf-8")
    code, _, err = run(capsys, "calibrate", "--template", str(existing))
    assert code == 2 and "already exists" in err and len(err.strip().splitlines()) == 1
    assert existing.read_text(encoding="utf-8") == "mine\n"
    fresh = tmp_path / "new.csv"
    code, _, err = run(capsys, "calibrate", str(existing), "--template", str(fresh))
    assert code == 2 and "RUN_DIR_OR_CSV would be ignored" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "calibrate", "--template", str(fresh), "-o", "c.yaml", "--with-seeds")
    assert code == 2 and "-o, --with-seeds would be ignored" in err
    assert not fresh.exists()
    code, _, err = run(capsys, "calibrate")
    assert code == 2 and "--template" in err and len(err.strip().splitlines()) == 1


def test_unknown_column_names_the_closest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_file = tmp_path / "runs.csv"
    csv_file.write_text(HEADER.replace("grad_accum", "grad_accumulation"), encoding="utf-8")
    code, _, err = run(capsys, "calibrate", str(csv_file), "-o", str(tmp_path / "c.yaml"))
    assert code == 2 and "unknown column 'grad_accumulation' (did you mean 'grad_accum'?" in err
    assert not (tmp_path / "c.yaml").exists()


def test_rows_are_labelled_by_their_id_and_name_every_field_that_moves_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lora_dropout and adapter_dtype move the prediction and are named; lora_alpha does not and is not."""
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "id,model,gpu,method,seq_len,micro_batch_size,lora_dropout,adapter_dtype,lora_alpha,micro_step_time_s\n"
        "mine-a,llama3.2-1b,rtx-4090,lora,512,1,0.1,fp32,64,0.3\n"
        ",llama3.2-1b,rtx-4090,lora,1024,1,0,compute,64,0.5\n",
        encoding="utf-8",
    )
    out = calibrated_rows(capsys, rows, tmp_path / "c.yaml")
    assert "  mine-a: rtx-4090 ×1, llama3.2-1b, seq 512, lora r16, mbs 1 × ga 1, ckpt, none, adamw, bf16, " in out
    assert "lora_dropout 0.1, adapter_dtype fp32\n" in out
    assert "  rows-row2: rtx-4090 ×1, llama3.2-1b, seq 1024, lora r16, mbs 1 × ga 1, ckpt, none, adamw, bf16\n" in out
    assert "lora_alpha" not in out


def test_a_long_csv_of_few_settings_is_fitted_per_setting_and_printed_in_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """600 rows of three settings (issue 41: 100,000 rows, ``benchmarks/calibrate_csv.py``): the fit runs on the three
    settings, the local correction has three anchors, and the table names the first ROWS_SHOWN rows, then counts."""
    from autotune.cli.refit import ROWS_SHOWN
    from autotune.costmodel.calibration import load_coefficients

    lines = [
        f"llama3.2-1b,rtx-4090,lora,{seq},2,8,{time_s * (1 + (index % 5 - 2) / 100):.4f}\n"
        for index in range(200)
        for seq, time_s in ((512, 0.2), (1024, 0.38), (2048, 0.8))
    ]
    csv_file = tmp_path / "runs.csv"
    csv_file.write_text(HEADER + "".join(lines), encoding="utf-8")
    out = calibrated_rows(capsys, csv_file, tmp_path / "c.yaml")
    assert f"… and {600 - ROWS_SHOWN:,} more rows" in out
    assert "runs-row40:" in out and "runs-row41:" not in out
    assert "time from 600 timed row(s)" in out
    correction = load_coefficients(tmp_path / "c.yaml").local_time_correction
    assert correction is not None and len(correction.anchors) == 3
    assert all("(+199 rows of its setting)" in label for label in correction.row_ids)
