"""The runner: nothing written on dry run or refusal, resume rules, exit codes, signal forwarding."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from plans import make_plan

from autotune.errors import InvalidRequestError
from autotune.launcher import (
    LaunchOptions,
    LaunchSpec,
    build_launch_spec,
    prepare_output_dir,
    run_command,
    run_launch,
)
from autotune.launcher.runner import resolve_argv


def spec_for(out: Path, **plan_values: object) -> LaunchSpec:
    plan = make_plan(**plan_values)  # type: ignore[arg-type]
    return build_launch_spec(plan, LaunchOptions(dataset="/d.jsonl", output_dir=str(out)))


def snapshot(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*")) if path.is_file()}


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run_launch(spec_for(out, sharding="zero3", gpus=2), out, resume=False, dry_run=True) == 0
    assert list(tmp_path.iterdir()) == []


def test_files_are_written_into_a_new_directory(tmp_path: Path) -> None:
    out = tmp_path / "a" / "run"
    spec = spec_for(out, sharding="zero3", gpus=2)
    written = prepare_output_dir(spec, out, resume=False)
    assert sorted(path.name for path in written) == ["deepspeed_config.json", "plan.yaml"]
    assert snapshot(out) == spec.files


def test_existing_output_dir_is_refused_and_untouched(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InvalidRequestError, match="already exists") as error:
        run_launch(spec_for(out), out, resume=False, dry_run=False)
    assert "\n" not in str(error.value)
    assert snapshot(out) == {"notes.txt": "mine"}


def test_resume_needs_the_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="does not exist"):
        prepare_output_dir(spec_for(tmp_path / "run"), tmp_path / "run", resume=True)
    assert list(tmp_path.iterdir()) == []


def test_resume_keeps_identical_files_and_adds_missing_ones(tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = spec_for(out, sharding="zero2", gpus=2)
    prepare_output_dir(spec, out, resume=False)
    (out / "deepspeed_config.json").unlink()
    (out / "checkpoints").mkdir()
    written = prepare_output_dir(spec, out, resume=True)
    assert [path.name for path in written] == ["deepspeed_config.json"]
    assert snapshot(out) == spec.files


def test_resume_accepts_a_reformatted_plan_file(tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = spec_for(out)
    prepare_output_dir(spec, out, resume=False)
    edited = "# my comment\n" + (out / "plan.yaml").read_text()
    (out / "plan.yaml").write_text(edited)
    assert prepare_output_dir(spec, out, resume=True) == []
    assert (out / "plan.yaml").read_text() == edited


def test_resume_with_a_different_plan_is_refused_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "run"
    prepare_output_dir(spec_for(out, sharding="ddp", gpus=2), out, resume=False)
    before = snapshot(out)
    other = spec_for(out, sharding="zero3", gpus=2, micro_batch_size=4)
    with pytest.raises(InvalidRequestError, match=r"plan\.yaml differs"):
        prepare_output_dir(other, out, resume=True)
    assert snapshot(out) == before  # deepspeed_config.json was not added either


def test_resolve_argv_uses_this_interpreter() -> None:
    assert resolve_argv(["python", "-m", "x"]) == [sys.executable, "-m", "x"]
    wrapper = "autotune.trainer.distributed_run"
    assert resolve_argv(["torchrun", "--standalone"])[:5] == [sys.executable, "-m", wrapper, "torchrun", "--standalone"]
    assert resolve_argv(["accelerate", "launch"])[:5] == [sys.executable, "-m", wrapper, "accelerate", "launch"]
    assert resolve_argv(["sbatch", "x"]) == ["sbatch", "x"]


def test_missing_program_is_refused_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = spec_for(out).model_copy(update={"argv": ["surely-not-a-program-4711", "x"]})
    with pytest.raises(InvalidRequestError, match="not found"):
        run_launch(spec, out, resume=False, dry_run=False)
    assert not out.exists()


def test_exit_code_and_env_reach_the_child(tmp_path: Path) -> None:
    code = "import os, sys; sys.exit(int(os.environ['AUTOTUNE_TEST_CODE']))"
    assert run_command(["python", "-c", code], {"AUTOTUNE_TEST_CODE": "3"}) == 3


def test_child_killed_by_a_signal_gives_128_plus_n() -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert run_command(["python", "-c", code], {}) == 128 + signal.SIGKILL


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.usefixtures("sends_itself_sigint")  # the SIGINT this test sends itself does not end the session
def test_signals_are_forwarded_once_to_the_child(tmp_path: Path, signum: int) -> None:
    ready = tmp_path / "ready"
    child = (
        "import signal, sys, time, pathlib\n"
        "count = []\n"
        "signal.signal(signal.SIGINT, lambda s, f: count.append(s))\n"
        "signal.signal(signal.SIGTERM, lambda s, f: count.append(s))\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "deadline = time.time() + 20\n"
        "while not count and time.time() < deadline:\n"
        "    time.sleep(0.01)\n"
        "time.sleep(0.2)\n"
        "sys.exit(40 + len(count) if count and count[0] == %d else 99)\n" % signum
    )
    previous = signal.getsignal(signum)

    def send_when_ready() -> None:
        deadline = time.time() + 20
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signum)

    sender = threading.Thread(target=send_when_ready)
    sender.start()
    code = run_command(["python", "-c", child], {})
    sender.join()
    assert code == 41  # the child saw exactly one signal, the one we received
    assert signal.getsignal(signum) == previous
