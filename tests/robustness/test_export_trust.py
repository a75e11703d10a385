"""``autotune export`` trusts nothing it is given (issue 41 item 2).

``--checkpoint`` is a checkpoint's name under the run's ``checkpoints/`` (``..``, absolute paths, empty names and links
out of the run are refused in one line); the weights are checked against the trainer's manifest (sizes, formats,
SHA-256) before anything is written; an output folder inside the run is refused; SIGTERM to the CLI stops the export
child too and leaves no output folder; the exported folder and files get the umask's modes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run
from plans import make_plan

from autotune.schemas.plan_io import save_plan
from autotune.trainer.checkpoints import verify_weights, write_manifest

PLAN = make_plan(method="lora")
HAS_TRAINING_STACK = all(importlib.util.find_spec(name) for name in ("torch", "transformers", "peft"))
needs_training_stack = pytest.mark.skipif(not HAS_TRAINING_STACK, reason="the export process loads the tokenizer")


def _safetensors(tensor_bytes: int) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [tensor_bytes // 4], "data_offsets": [0, tensor_bytes]}})
    return struct.pack("<Q", len(header)) + header.encode() + b"\x01" * tensor_bytes


def _weights(folder: Path, step: int, tensor_bytes: int = 64) -> Path:
    """An adapter folder as the trainer leaves it: adapter, config, trainer state, and its manifest."""
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(_safetensors(tensor_bytes))
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    write_manifest(folder, step, PLAN)
    return folder


def _run_dir(root: Path, plan: Path | None = None) -> Path:
    run_dir = root / "run"
    run_dir.mkdir()
    if plan is None:
        save_plan(PLAN, run_dir / "plan.yaml")
    else:
        (run_dir / "plan.yaml").write_bytes(plan.read_bytes())
    _weights(run_dir / "final", 4)
    _weights(run_dir / "checkpoints" / "checkpoint-2", 2)
    return run_dir


def _listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def _refused(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> str:
    before = _listing(root)
    code, _, err = run(capsys, "export", *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert _listing(root) == before  # nothing written
    return err


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "--checkpoint is empty"),
        ("   ", "--checkpoint is empty"),
        ("../final", "is not a checkpoint name"),
        ("..", "is not a checkpoint name"),
        ("checkpoint-2/../../final", "is not a checkpoint name"),
        ("/etc", "is not a checkpoint name"),
        ("final", "is not a checkpoint name"),
        (".staging", "is not a checkpoint name"),
        ("checkpoint-7", "has no checkpoint checkpoint-7; checkpoints: checkpoint-2"),
    ],
)
def test_checkpoint_names_that_are_not_the_runs_checkpoints_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, message: str
) -> None:
    run_dir = _run_dir(tmp_path)
    err = _refused(capsys, tmp_path, str(run_dir), "-o", str(tmp_path / "out"), "--checkpoint", name)
    assert message in err, err


def test_an_absolute_path_to_another_runs_weights_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_dir = _run_dir(tmp_path)
    other = _weights(tmp_path / "other" / "checkpoints" / "checkpoint-9", 9)
    err = _refused(capsys, tmp_path, str(run_dir), "-o", str(tmp_path / "out"), "--checkpoint", str(other))
    assert "is not a checkpoint name" in err


def test_a_checkpoint_linking_out_of_the_run_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    other = _weights(tmp_path / "other" / "checkpoints" / "checkpoint-9", 9)
    (run_dir / "checkpoints" / "checkpoint-9").symlink_to(other)
    err = _refused(capsys, tmp_path, str(run_dir), "-o", str(tmp_path / "out"), "--checkpoint", "checkpoint-9")
    assert "leads outside the run's checkpoints/" in err


@pytest.mark.parametrize("inside", ["final/export", "export", "checkpoints/mine"])
def test_an_output_inside_the_run_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, inside: str) -> None:
    run_dir = _run_dir(tmp_path)
    err = _refused(capsys, tmp_path, str(run_dir), "-o", str(run_dir / inside))
    assert "is inside the run" in err


def test_weights_are_checked_against_the_manifest(tmp_path: Path) -> None:
    """Sizes, formats and hashes: a truncated adapter, a same-size replacement, a missing file (no torch needed)."""
    final = _weights(tmp_path / "final", 4)
    assert verify_weights(final) is None
    adapter = final / "adapter_model.safetensors"
    original = adapter.read_bytes()
    adapter.write_bytes(original[:100])
    assert "adapter_model.safetensors has 100 bytes" in (verify_weights(final) or "")
    adapter.write_bytes(original[:-1] + b"\x02")  # same size, complete header: another file
    assert "another SHA-256" in (verify_weights(final) or "")
    adapter.unlink()
    assert "adapter_model.safetensors is missing" in (verify_weights(final) or "")
    legacy = tmp_path / "legacy" / "final"  # a run from before final/ had a manifest: formats are still checked
    legacy.mkdir(parents=True)
    (legacy / "adapter_model.safetensors").write_bytes(original[:100])
    assert "truncated safetensors" in (verify_weights(legacy) or "")


@needs_training_stack
@pytest.mark.slow  # starts the export child (autotune.trainer.export), which imports the training stack
@pytest.mark.parametrize("checkpoint", [None, "checkpoint-2"])
def test_a_truncated_adapter_is_refused_before_anything_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, checkpoint: str | None
) -> None:
    run_dir = _run_dir(tmp_path)
    folder = run_dir / "checkpoints" / checkpoint if checkpoint else run_dir / "final"
    adapter = folder / "adapter_model.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:100])
    extra = ["--checkpoint", checkpoint] if checkpoint else []
    err = _refused(capsys, tmp_path, str(run_dir), "-o", str(tmp_path / "out"), *extra)
    assert "is not what the trainer wrote (adapter_model.safetensors has 100 bytes" in err, err


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory of the tiny model whose ``final/`` holds a 256 MiB adapter (the copy takes a while)."""
    from trainer_helpers import build_plan_file, save_tiny_model

    root = tmp_path_factory.mktemp("export-run")
    model = save_tiny_model(root / "tiny")
    plan = build_plan_file(model, root / "plan.yaml", method="lora")
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "plan.yaml").write_bytes(plan.read_bytes())
    final = _weights(run_dir / "final", 4, tensor_bytes=256 << 20)
    (final / "adapter_model.safetensors").chmod(0o600)  # as safetensors writes it
    return run_dir


@needs_training_stack
@pytest.mark.slow  # its autotune export starts the export child (autotune.trainer.export, the training stack)
def test_sigterm_stops_the_export_child_and_leaves_no_output(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    code = "from autotune.cli.app import main; main()"
    cli = subprocess.Popen(
        [sys.executable, "-c", code, "export", str(tiny_run), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stderr is not None
    seen = []
    for line in cli.stderr:  # the marker: the child has made its folder and is writing
        seen.append(line)
        if line.startswith("writing "):
            break
    else:
        raise AssertionError(f"no 'writing' line: {''.join(seen)}")
    cli.send_signal(signal.SIGTERM)
    try:
        cli.wait(timeout=120)
    except subprocess.TimeoutExpired:
        cli.kill()
        raise AssertionError("autotune export did not end after SIGTERM") from None
    rest = cli.stderr.read()
    assert cli.returncode == 128 + signal.SIGTERM, rest
    assert "interrupted" in rest and "Traceback" not in rest, rest
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary folder left beside the output
    assert not _export_processes(out)  # the child ended with the CLI


def _export_processes(out: Path) -> list[int]:
    """Pids of live ``autotune.trainer.export`` processes writing ``out``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if b"autotune.trainer.export" in argv and str(out).encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


@needs_training_stack
@pytest.mark.slow  # starts the export child (autotune.trainer.export), which imports the training stack
def test_an_export_follows_the_umask(capsys: pytest.CaptureFixture[str], tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    mask = os.umask(0o022)
    try:
        code, _, err = run(capsys, "export", str(tiny_run), "-o", str(out))
    finally:
        os.umask(mask)
    assert code == 0, err
    assert out.stat().st_mode & 0o777 == 0o755
    modes = {path.name: path.stat().st_mode & 0o777 for path in out.iterdir()}
    assert modes["adapter_model.safetensors"] == 0o644 and set(modes.values()) == {0o644}, modes
