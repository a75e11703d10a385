"""``autotune calibrate --suggest K``: the settings to measure first, written as the calibrate CSV, read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run

from autotune.profiles.measurement_csv import CSV_COLUMNS, measurements_from_csv


def test_suggest_writes_k_settings_that_calibrate_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "suggested.csv"
    args = ("calibrate", "--suggest", "3", "--model", "llama3.2-1b", "--gpu", "rtx-4090", "--seq-len", "512")
    code, out, err = run(capsys, *args, "--seq-len", "4096", "--template", str(template))
    assert code == 0, err
    assert "mean 80 % time band over the plan space" in out and "wrote" in out
    lines = [line for line in template.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    assert lines[0] == ",".join(CSV_COLUMNS) and len(lines) == 4
    # filled in, the rows are measurements of the suggested settings (three different ones)
    time = CSV_COLUMNS.index("micro_step_time_s")
    filled = [lines[0]] + [",".join(c if i != time else "0.5" for i, c in enumerate(r.split(","))) for r in lines[1:]]
    template.write_text("\n".join(filled) + "\n", encoding="utf-8")
    rows = measurements_from_csv(template)
    assert len({(m.workload.seq_len, m.setting) for m in rows}) == 3
    assert all(m.model == "llama3.2-1b" and m.gpu == "rtx-4090" and m.micro_step_time_s == 0.5 for m in rows)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--suggest", "2", "--gpu", "rtx-4090"), "--suggest needs --model"),
        (("--model", "llama3.2-1b"), "--model only go with --suggest K"),
        (("--suggest", "2", "--model", "llama3.2-1b", "--gpu", "rtx-4090"), "give --template FILE"),
    ],
)
def test_suggest_refuses_what_it_cannot_do_in_one_line(
    extra: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = () if "give --template FILE" in message else ("--template", str(tmp_path / "s.csv"))
    code, _, err = run(capsys, "calibrate", *extra, *template)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.csv").exists()
