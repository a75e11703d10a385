"""The plan's GPUs against this machine's (autotune.launcher.plan_gpus) and the launch check that uses them."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run
from plans import make_plan

from autotune.launcher import gpus
from autotune.launcher.plan_gpus import machine_gpus, too_few_gpus
from autotune.schemas.plan_io import save_plan
from autotune.session.resolve import catalog_gpu

from .test_launch_refusals import snapshot

FOUR_4090S = ["NVIDIA GeForce RTX 4090"] * 4


def test_the_visible_devices_variable_narrows_the_count() -> None:
    assert machine_gpus(FOUR_4090S, catalog_gpu, {}).visible == 4
    found = machine_gpus(FOUR_4090S, catalog_gpu, {"CUDA_VISIBLE_DEVICES": "0,2"})
    assert found.visible == 2 and found.narrowed_by == "CUDA_VISIBLE_DEVICES=0,2" and found.spec is not None
    assert found.spec.key == "rtx-4090"
    assert machine_gpus(FOUR_4090S, catalog_gpu, {"CUDA_VISIBLE_DEVICES": ""}).visible == 0
    assert machine_gpus(FOUR_4090S, catalog_gpu, {"HIP_VISIBLE_DEVICES": "0,1,2,3,4,5"}).visible == 4  # at most all
    assert machine_gpus(["Some Card 9000"], catalog_gpu, {}).spec is None
    assert machine_gpus([], catalog_gpu, {}).name == ""


def test_too_few_names_the_count_and_what_narrowed_it() -> None:
    found = machine_gpus(FOUR_4090S, catalog_gpu, {"CUDA_VISIBLE_DEVICES": "1"})
    cluster = make_plan(sharding="ddp", gpus=2).cluster
    assert too_few_gpus(cluster, found) == (
        "the plan runs 2 GPUs per node, this machine shows 1 (NVIDIA GeForce RTX 4090, CUDA_VISIBLE_DEVICES=1)"
    )
    assert too_few_gpus(cluster, machine_gpus(FOUR_4090S, catalog_gpu, {})) is None


def _launch(tmp_path: Path, capsys: pytest.CaptureFixture[str], gpu: str, *extra: str) -> tuple[int, str]:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    plan = save_plan(make_plan(gpu=gpu), tmp_path / "plan.yaml")
    code, _, err = run(capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "run"),
                       "--dry-run", *extra)  # fmt: skip
    return code, err


def test_another_card_with_room_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpus, "detect_gpus", lambda: ["NVIDIA H100 80GB HBM3"])
    code, err = _launch(tmp_path, capsys, "rtx-4090")
    assert code == 0, err
    assert "the plan is for rtx-4090, this machine has h100-80gb" in err and "--gpu h100-80gb" in err


def test_a_card_smaller_than_the_predicted_peak_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpus, "detect_gpus", lambda: ["Tesla T4"])
    code, err = _launch(tmp_path, capsys, "rtx-4090")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "this machine's t4 has 16 GiB, less than the 21.5 GiB its predicted peak needs" in err
    assert "--gpu t4" in err and sorted(snapshot(tmp_path)) == sorted(
        str(tmp_path / f) for f in ("d.jsonl", "plan.yaml")
    )


def test_the_plans_own_card_and_cpu_launches_say_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpus, "detect_gpus", lambda: ["NVIDIA GeForce RTX 4090"])
    code, err = _launch(tmp_path, capsys, "rtx-4090")
    assert code == 0 and "the plan is for" not in err, err
    monkeypatch.setattr(gpus, "detect_gpus", lambda: ["Tesla T4"])
    (tmp_path / "cpu").mkdir()
    code, err = _launch(tmp_path / "cpu", capsys, "rtx-4090", "--cpu")
    assert code == 0 and "the plan is for" not in err, err


def test_an_unknown_card_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpus, "detect_gpus", lambda: ["Some Card 9000"])
    code, err = _launch(tmp_path, capsys, "rtx-4090")
    assert code == 0 and "GPU 'Some Card 9000' is not in the catalog" in err, err
