"""Files a user names are read only when they are regular files, and rows are read with a bounded length (issue 41).

A FIFO given as ``--dataset`` or ``--eval-dataset`` hung ``plan``, ``estimate`` and ``launch --dry-run`` for ever; a
dataset linked to ``/dev/zero`` read one endless line until memory ran out. Each CLI case runs ``autotune`` in a
subprocess with a timeout, so a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import run
from plans import make_plan

from autotune import yamlio
from autotune.errors import ConfigError
from autotune.schemas.dataset_rows import check_dataset_file
from autotune.schemas.dataset_stats import fingerprint
from autotune.schemas.plan_io import load_plan, plan_to_yaml

FIXTURE_CONFIG = Path(__file__).resolve().parent.parent / "fixtures" / "configs" / "llama3.2-1b" / "config.json"
HANG_GUARD_S = 60
"""A refusal comes back within seconds (the CLI's cold start); a hang is killed here and fails the test."""

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


def _autotune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``autotune *args`` in a fresh interpreter; a hang becomes a test failure after :data:`HANG_GUARD_S`."""
    code = "import sys; from autotune.cli.app import main; main(sys.argv[1:])"
    try:
        return subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=cwd
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"autotune {' '.join(args)} did not return within {HANG_GUARD_S} s") from None


def _refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _model_dir(tmp_path: Path) -> Path:
    """A local model directory the launch pre-flight accepts (config, a weights file, a tokenizer file)."""
    model = tmp_path / "model"
    model.mkdir()
    shutil.copy(FIXTURE_CONFIG, model / "config.json")
    (model / "tokenizer.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    return model


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    os.mkfifo(path)
    return path


@pytest.fixture
def zero_link(tmp_path: Path) -> Path:
    path = tmp_path / "zero.jsonl"
    path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_fifo_dataset_refused_by_plan_and_estimate(tmp_path: Path, fifo: Path, command: str) -> None:
    model = _model_dir(tmp_path)
    done = _autotune(command, str(model), "--gpu", "a100-80gb", "--dataset", str(fifo), cwd=tmp_path)
    _refused(done, str(fifo), "not a regular file", "FIFO")


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_fifo_eval_dataset_refused_by_plan_and_estimate(tmp_path: Path, fifo: Path, command: str) -> None:
    model = _model_dir(tmp_path)
    done = _autotune(
        command, str(model), "--gpu", "a100-80gb", "--num-samples", "1000", "--eval-dataset", str(fifo), cwd=tmp_path
    )
    _refused(done, str(fifo), "not a regular file")


@pytest.mark.parametrize("option", ["--dataset", "--eval-dataset"])
def test_fifo_and_dev_zero_refused_by_launch_dry_run(tmp_path: Path, fifo: Path, zero_link: Path, option: str) -> None:
    model = _model_dir(tmp_path)
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_to_yaml(make_plan().model_copy(update={"model_source": str(model)})))
    good = tmp_path / "good.jsonl"
    good.write_text('{"instruction": "a", "output": "b"}\n')
    for special, kind in ((fifo, "FIFO"), (zero_link, "character device")):
        files = {"--dataset": str(good), option: str(special)}
        args = [arg for pair in files.items() for arg in pair]
        done = _autotune(
            "launch", str(plan), *args, "--output-dir", str(tmp_path / "run"), "--cpu", "--dry-run", cwd=tmp_path
        )
        _refused(done, str(special), kind)
        assert not (tmp_path / "run").exists()


def test_every_reader_refuses_special_files(tmp_path: Path, fifo: Path, zero_link: Path) -> None:
    """The one check (``yamlio.open_regular``) behind the dataset rows, the fingerprint, plans and run reports."""
    directory = tmp_path / "folder.jsonl"
    directory.mkdir()
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "missing.jsonl")
    readers: list[Callable[[Path], object]] = [
        lambda path: check_dataset_file(path, "auto"),
        lambda path: fingerprint(str(path)),
        load_plan,
        lambda path: yamlio.read_text_file(path, "run report"),
    ]
    for path in (fifo, zero_link, directory, dangling):
        for reader in readers:
            with pytest.raises(ConfigError) as caught:
                reader(path)
            message = str(caught.value)
            assert "\n" not in message and str(path) in message, message
            expected = "not found" if path == dangling else "not a regular file"
            assert expected in message, message


def test_over_long_line_refused_naming_the_line_and_the_bound(tmp_path: Path) -> None:
    data = tmp_path / "long.jsonl"
    with data.open("wb") as handle:
        handle.write(b'{"text": "a"}\n')
        handle.write(b"x" * (yamlio.MAX_LINE_BYTES + 10))  # no line break: one line past the bound
    with pytest.raises(ConfigError) as caught:
        check_dataset_file(data, "auto")
    message = str(caught.value)
    assert "line 2" in message and f"{yamlio.MAX_LINE_BYTES // (1024 * 1024)} MiB" in message and "\n" not in message


def test_a_line_of_exactly_the_bound_is_read(tmp_path: Path) -> None:
    data = tmp_path / "edge.txt"
    data.write_bytes(b"y" * (yamlio.MAX_LINE_BYTES - 1) + b"\n")
    with data.open("rb") as handle:
        lines = list(yamlio.bounded_lines(handle, "edge", yamlio.MAX_LINE_BYTES))
    assert len(lines) == 1 and len(lines[0][1]) == yamlio.MAX_LINE_BYTES


def test_a_huge_file_without_line_breaks_is_refused_reading_only_the_bound(tmp_path: Path) -> None:
    """A sparse 2 GiB file with no newline: refused after reading one bound's worth (constant memory)."""
    data = tmp_path / "huge.jsonl"
    with data.open("wb") as handle:
        handle.truncate(2 << 30)  # 2 GiB of zero bytes, sparse: no disk used
    with yamlio.open_regular(data, "dataset") as handle:
        with pytest.raises(ConfigError, match="line 1: longer than"):
            list(yamlio.bounded_lines(handle, "dataset huge"))
        assert handle.tell() <= yamlio.MAX_LINE_BYTES + 1 + (1 << 20)  # the bound, plus at most a buffer


CSV_HEADER = "model,gpu,method,seq_len,micro_batch_size,grad_accum,peak_memory_gib,memory_kind,micro_step_time_s\n"
CSV_ROW = "llama3.2-1b,rtx-4090,lora,1024,2,8,6.5,allocated,0.9\n"


def test_a_csv_cell_over_the_csv_field_limit_is_one_line_naming_the_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs.csv"
    runs.write_text(CSV_HEADER + CSV_ROW + f'"{"x" * (128 * 1024 + 1)}",rtx-4090,lora,1024,2,8,6.5,allocated,0.9\n')
    code, _, err = run(capsys, "calibrate", str(runs), "-o", str(tmp_path / "c.yaml"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "row 2 (line 3)" in lines[0] and "field larger than field limit" in lines[0], lines[0]
    assert not (tmp_path / "c.yaml").exists()


def test_calibrate_refuses_a_fifo_csv(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.csv"
    os.mkfifo(fifo)
    done = _autotune("calibrate", str(fifo), "-o", str(tmp_path / "c.yaml"), cwd=tmp_path)
    _refused(done, str(fifo))  # recalibrate.collect takes only regular .csv files; runs_from_csv opens regular ones


def test_a_large_csv_is_streamed_with_every_row_read(tmp_path: Path) -> None:
    """100,000 rows (benchmarks/calibrate_csv.py prints how long they take) are all read, in file order."""
    from autotune.profiles.measurement_csv import runs_from_csv

    runs = tmp_path / "runs.csv"
    with runs.open("w") as handle:
        handle.write("# a comment line\n" + CSV_HEADER)
        for index in range(100_000):
            handle.write(f"llama3.2-1b,rtx-4090,lora,{512 + index % 4 * 256},2,8,6.5,allocated,{0.5 + index / 1e6}\n")
    read = runs_from_csv(runs)
    assert len(read) == 100_000
    assert read[-1].measurement.source == f"{runs} row 100000"
    assert read[-1].measurement.micro_step_time_s == pytest.approx(0.5 + 99_999 / 1e6)


def test_launch_warns_when_the_eval_dataset_is_the_training_data(tmp_path: Path) -> None:
    """The training file given again as --eval-dataset (also through a link): one warning line, the launch goes on."""
    model = _model_dir(tmp_path)
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_to_yaml(make_plan().model_copy(update={"model_source": str(model)})))
    good = tmp_path / "good.jsonl"
    good.write_text('{"instruction": "a", "output": "b"}\n')
    link = tmp_path / "same.jsonl"
    link.symlink_to(good)
    for eval_dataset in (good, link):
        done = _autotune("launch", str(plan), "--dataset", str(good), "--eval-dataset", str(eval_dataset),
                         "--output-dir", str(tmp_path / "run"), "--cpu", "--dry-run", cwd=tmp_path)  # fmt: skip
        warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
        assert done.returncode == 0, done.stderr
        assert len(warnings) == 1 and "is the training data" in warnings[0], done.stderr
