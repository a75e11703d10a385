"""Resume takes the newest intact checkpoint, sets broken ones aside and says so; the plan must match.

Checkpoints here are built from bytes in the real formats (safetensors header + data, torch's zip
archive, JSON), so the checks run without torch.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from plans import make_plan

from autotune.errors import ConfigError
from autotune.schemas.plan_changes import plan_changes, plan_fingerprint
from autotune.trainer.checkpoints import (
    IGNORED_DIR,
    MANIFEST,
    find_resume_checkpoint,
    resolve_start,
    verify_checkpoint,
    write_manifest,
)
from autotune.trainer.consistency import check_model_matches_plan, check_resume_plan

PLAN = make_plan()


def _safetensors(tensor_bytes: int = 64) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [tensor_bytes // 4], "data_offsets": [0, tensor_bytes]}})
    raw = header.encode()
    return struct.pack("<Q", len(raw)) + raw + b"\x01" * tensor_bytes


def _torch_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00." * 20)


def make_checkpoint(root: Path, step: int, *, manifest: bool = True, plan: object = PLAN) -> Path:
    checkpoint = root / "checkpoints" / f"checkpoint-{step}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "adapter_model.safetensors").write_bytes(_safetensors())
    _torch_zip(checkpoint / "optimizer.pt")
    _torch_zip(checkpoint / "rng_state.pth")
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    if manifest:
        write_manifest(checkpoint, step, plan)  # type: ignore[arg-type]
    return checkpoint


def _truncate(file: Path, keep: float = 0.5) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: int(len(data) * keep)])


def test_intact_checkpoint_verifies(tmp_path: Path) -> None:
    assert verify_checkpoint(make_checkpoint(tmp_path, 4)) is None


BREAKAGES = {
    "no-manifest": lambda c: (c / MANIFEST).unlink(),
    "truncated-safetensors": lambda c: _truncate(c / "adapter_model.safetensors"),
    "truncated-header": lambda c: _truncate(c / "adapter_model.safetensors", 0.05),
    "truncated-state": lambda c: _truncate(c / "trainer_state.json"),
    "truncated-optimizer": lambda c: _truncate(c / "optimizer.pt"),
    "missing-rng": lambda c: (c / "rng_state.pth").unlink(),
    "garbage-manifest": lambda c: (c / MANIFEST).write_text("{not json"),
    "wrong-step-state": lambda c: (c / "trainer_state.json").write_text('{"global_step": 99}'),
    "empty-safetensors": lambda c: (c / "adapter_model.safetensors").write_bytes(b""),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_broken_newest_checkpoint_is_skipped_and_kept_aside(tmp_path: Path, breakage: str) -> None:
    make_checkpoint(tmp_path, 2)
    BREAKAGES[breakage](make_checkpoint(tmp_path, 4))
    point = find_resume_checkpoint(tmp_path / "checkpoints")
    assert point.checkpoint == tmp_path / "checkpoints" / "checkpoint-2" and point.step == 2
    assert len(point.skipped) == 1 and point.skipped[0].startswith("checkpoint-4 (")
    assert (tmp_path / "checkpoints" / IGNORED_DIR / "checkpoint-4").is_dir()  # kept, not deleted
    assert not (tmp_path / "checkpoints" / "checkpoint-4").exists()


def test_partial_checkpoint_from_kill_during_save_is_ignored(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 3)
    make_checkpoint(tmp_path, 6, manifest=False)  # kill -9 before the save finished
    point = find_resume_checkpoint(tmp_path / "checkpoints")
    assert point.step == 3 and "partial" in point.skipped[0]


def test_same_name_set_aside_twice_gets_a_free_name(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 1)
    for _ in range(2):
        make_checkpoint(tmp_path, 5, manifest=False)
        find_resume_checkpoint(tmp_path / "checkpoints")
    assert sorted(p.name for p in (tmp_path / "checkpoints" / IGNORED_DIR).iterdir()) == [
        "checkpoint-5",
        "checkpoint-5.1",
    ]


def test_no_intact_checkpoint_refused_naming_each(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 2, manifest=False)
    make_checkpoint(tmp_path, 4, manifest=False)
    with pytest.raises(ConfigError) as caught:
        find_resume_checkpoint(tmp_path / "checkpoints")
    assert "checkpoint-2" in str(caught.value) and "checkpoint-4" in str(caught.value)


def test_resume_without_checkpoints_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no checkpoint"):
        resolve_start(tmp_path, tmp_path / "checkpoints", tmp_path / "run_report.json", resume=True)


def test_resume_of_completed_run_refused(tmp_path: Path) -> None:
    make_checkpoint(tmp_path, 4)
    report = tmp_path / "run_report.json"
    report.write_text(json.dumps({"status": "completed", "steps": 4}))
    with pytest.raises(ConfigError, match="already completed"):
        resolve_start(tmp_path, tmp_path / "checkpoints", report, resume=True)
    assert json.loads(report.read_text())["status"] == "completed"


@pytest.mark.parametrize("status", ["interrupted", "failed"])
def test_resume_of_stopped_run_continues(tmp_path: Path, status: str) -> None:
    make_checkpoint(tmp_path, 4)
    report = tmp_path / "run_report.json"
    report.write_text(json.dumps({"status": status, "steps": 4}))
    assert resolve_start(tmp_path, tmp_path / "checkpoints", report, resume=True).step == 4


@pytest.mark.parametrize("existing", ["report", "checkpoint"])
def test_new_run_into_a_run_directory_refused(tmp_path: Path, existing: str) -> None:
    if existing == "report":
        (tmp_path / "run_report.json").write_text("{}")
    else:
        make_checkpoint(tmp_path, 1)
    with pytest.raises(ConfigError, match="already holds a run"):
        resolve_start(tmp_path, tmp_path / "checkpoints", tmp_path / "run_report.json", resume=False)


@pytest.mark.parametrize(
    "edit,field",
    [
        ({"lora_rank": 8}, "setting.lora_rank"),
        ({"micro_batch_size": 1, "grad_accum": 8}, "setting.micro_batch_size"),
        ({"method": "qlora"}, "setting.method"),
        ({"workload": {"seq_len": 4096}}, "seq_len"),
    ],
)
def test_edited_plan_refused_on_resume(tmp_path: Path, edit: dict[str, object], field: str) -> None:
    checkpoint = make_checkpoint(tmp_path, 4)
    edited = make_plan(**edit)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="differs") as caught:
        check_resume_plan(checkpoint, edited)
    assert field in str(caught.value)


def test_same_plan_resumes(tmp_path: Path) -> None:
    check_resume_plan(make_checkpoint(tmp_path, 4), make_plan())


def test_plan_changes_lists_leaves() -> None:
    old = plan_fingerprint(make_plan())
    new = plan_fingerprint(make_plan(lora_rank=8))
    assert plan_changes(old, new) == ["setting.lora_rank 16 → 8"]


def test_model_with_other_architecture_refused() -> None:
    config = SimpleNamespace(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=32)
    with pytest.raises(ConfigError, match="hidden_size 4096 planned, 64 loaded"):
        check_model_matches_plan(config, PLAN)


def test_model_matching_plan_accepted_incl_text_config() -> None:
    model = PLAN.model
    text = SimpleNamespace(
        hidden_size=model.hidden_size,
        num_hidden_layers=model.num_hidden_layers,
        num_attention_heads=model.num_attention_heads,
        vocab_size=model.vocab_size,
    )
    check_model_matches_plan(text, PLAN)
    check_model_matches_plan(SimpleNamespace(text_config=text, hidden_size=1), PLAN)


def test_publish_writes_manifest_then_renames(tmp_path: Path) -> None:
    from autotune.trainer.checkpoints import STAGING_DIR, publish_checkpoint

    staged = make_checkpoint(tmp_path / "x", 7, manifest=False)
    target_dir = tmp_path / "checkpoints"
    target_dir.mkdir()
    (target_dir / STAGING_DIR).mkdir()
    staged = staged.rename(target_dir / STAGING_DIR / "checkpoint-7")
    publish_checkpoint(staged, target_dir / "checkpoint-7", 7, PLAN)
    assert not staged.exists() and verify_checkpoint(target_dir / "checkpoint-7") is None


def test_staging_leftover_of_killed_save_reported_on_resume(tmp_path: Path) -> None:
    from autotune.trainer.checkpoints import STAGING_DIR

    make_checkpoint(tmp_path, 3)
    leftover = tmp_path / "checkpoints" / STAGING_DIR / "checkpoint-6"
    leftover.mkdir(parents=True)
    (leftover / "optimizer.pt").write_bytes(b"PK\x03\x04half")
    point = find_resume_checkpoint(tmp_path / "checkpoints")
    assert point.step == 3 and point.skipped[0].startswith("checkpoint-6 (partial")
    assert (tmp_path / "checkpoints" / IGNORED_DIR / "checkpoint-6" / "optimizer.pt").is_file()
