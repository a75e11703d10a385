"""``autotune probe``: GPU detection, neighbours, the no-GPU refusal, and the GPU path with a fake runner."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runner import run
from plan_requests import plan_request

from autotune import planner
from autotune.cli import probe_cmd
from autotune.launcher import LaunchSpec, gpus, prepare_output_dir
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan, plan_from_yaml, save_plan
from autotune.schemas.run_report import RunReport

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config"
    monkeypatch.setenv("AUTOTUNE_CONFIG_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables one line per row, so that rows can be read back from the output."""
    from autotune.cli.console import console

    monkeypatch.setattr(console(), "width", 200)


@pytest.fixture(scope="module")
def plan() -> PlanFile:
    request, _ = plan_request(
        model="llama3.2-1b",
        gpu="rtx-4090",
        seq_len=1024,
        global_batch_size=16,
        method="lora",
        micro_batch_size=2,
        grad_ckpt=True,
        compile=False,
    )
    return planner.plan(request)[0]


@pytest.fixture
def plan_path(plan: PlanFile, tmp_path: Path) -> Path:
    return save_plan(plan, tmp_path / "plan.yaml")


# --- detection ------------------------------------------------------------------------------------


def test_detects_nvidia_then_rocm_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = {
        "nvidia-smi": [
            "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1234)",
            "GPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-5)",
        ],
        "rocm-smi": [
            "===== Product Info =====",
            "GPU[0]\t\t: Card series: \t\tRadeon RX 7900 XTX",
            "GPU[0]\t\t: Card model: \t\t0x744c",
        ],
    }
    monkeypatch.setattr(gpus, "_command_lines", lambda argv: outputs.get(argv[0], []))
    assert gpus.detect_gpus() == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"]
    outputs["nvidia-smi"] = []
    assert gpus.detect_gpus() == ["Radeon RX 7900 XTX"]
    outputs["rocm-smi"] = []
    assert gpus.detect_gpus() == []


def test_missing_tools_mean_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert gpus.detect_gpus() == []


# --- refusals -------------------------------------------------------------------------------------


def test_without_gpu_probe_explains_in_one_line_and_exits_2(
    plan_path: Path, config_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(probe_cmd, "detect_gpus", lambda: [])

    def runner(spec: LaunchSpec, out: Path) -> int:
        raise AssertionError("nothing may run without a GPU")

    monkeypatch.setattr(probe_cmd, "launch_run", runner)
    code, _, err = run(capsys, "probe", str(plan_path), "--dataset", "data.jsonl")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA or ROCm GPU" in lines[0] and "autotune calibrate" in lines[0]
    assert not config_dir.exists()


def test_multi_node_plan_is_refused(
    plan: PlanFile, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    two_nodes = plan.model_copy(update={"cluster": plan.cluster.model_copy(update={"num_nodes": 2})})
    path = save_plan(two_nodes, tmp_path / "two.yaml")
    monkeypatch.setattr(probe_cmd, "detect_gpus", lambda: ["NVIDIA GeForce RTX 4090"])
    code, _, err = run(capsys, "probe", str(path), "--dataset", "d.jsonl")
    assert code == 2 and "one node" in err


# --- neighbours -----------------------------------------------------------------------------------


def test_neighbours_keep_the_global_batch_and_whole_accumulation(plan: PlanFile) -> None:
    from autotune.costmodel.calibration import default_coefficients

    assert (plan.setting.micro_batch_size, plan.setting.grad_accum) == (2, 8)
    neighbours = probe_cmd.neighbour_plans(plan, default_coefficients())
    assert [(n.setting.micro_batch_size, n.setting.grad_accum) for n in neighbours] == [(4, 4), (1, 16)]
    assert all(n.workload.global_batch_size == plan.workload.global_batch_size for n in neighbours)
    assert neighbours[0].prediction.peak_memory_gib > plan.prediction.peak_memory_gib  # re-estimated
    odd = plan.model_copy(update={"setting": plan.setting.model_copy(update={"micro_batch_size": 1, "grad_accum": 3})})
    assert probe_cmd.neighbour_plans(odd, default_coefficients()) == []


# --- the GPU path with fakes ----------------------------------------------------------------------


class FakeRunner:
    """Writes the run directory as the launcher would, then a run report measuring scale × prediction.

    The micro batch ×2 neighbour "runs out of memory" (a failed report, as the trainer writes it).
    """

    def __init__(self, memory_scale: float, time_scale: float) -> None:
        self.memory_scale, self.time_scale = memory_scale, time_scale
        self.runs: list[tuple[list[str], Path]] = []

    def __call__(self, spec: LaunchSpec, out: Path) -> int:
        self.runs.append((spec.argv, out))
        prepare_output_dir(spec, out, resume=False)
        planned = plan_from_yaml(spec.files["plan.yaml"], "plan.yaml")
        p = planned.prediction
        oom = planned.setting.micro_batch_size == 4
        values: dict[str, Any] = {
            "status": "failed" if oom else "completed",
            "message": "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB" if oom else "",
            "steps": 0 if oom else 5,
            "max_steps": 5,
            "losses": [],
            "loss_steps": [],
            "tokens_seen": 0,
            "peak_memory_gib_measured": 23.5 if oom else p.peak_memory_gib * self.memory_scale,
            "memory_kind": "allocated",
            "micro_step_time_s_measured": None if oom else p.micro_step_time_s * self.time_scale,
            "step_time_s_measured": None if oom else p.step_time_s * self.time_scale,
            "prediction": p,
            "model": planned.model.key,
            "model_source": planned.model_source,
            "gpu": planned.cluster.gpu,
            "world_size": 1,
            "device": "cuda:0 (NVIDIA GeForce RTX 4090)",
            "setting": planned.setting,
            "workload": planned.workload,
            "started_at": NOW,
            "finished_at": NOW,
            "autotune_version": "0.1.0",
        }
        (out / "run_report.json").write_text(RunReport.model_validate(values).model_dump_json(), encoding="utf-8")
        return 1 if oom else 0


def test_probe_with_fake_gpu_runs_plan_and_neighbours_and_writes_a_calibration(
    plan: PlanFile,
    plan_path: Path,
    tmp_path: Path,
    config_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runner = FakeRunner(memory_scale=1.1, time_scale=1.3)
    monkeypatch.setattr(probe_cmd, "detect_gpus", lambda: ["NVIDIA GeForce RTX 4090"])
    monkeypatch.setattr(probe_cmd, "launch_run", runner)
    runs_dir = tmp_path / "runs"
    code, out, err = run(
        capsys,
        "probe",
        str(plan_path),
        "--dataset",
        str(tmp_path / "data.jsonl"),
        "--steps",
        "5",
        "--runs-dir",
        str(runs_dir),
    )
    assert code == 0, err
    assert len(runner.runs) == 3
    for argv, run_dir in runner.runs:
        assert "autotune.trainer" in argv and argv[argv.index("--max-steps") + 1] == "5"
        assert load_plan(run_dir / "plan.yaml").workload.global_batch_size == 16
    calibration = yaml.safe_load((config_dir / "calibration.yaml").read_text(encoding="utf-8"))
    assert "3 user measurements" in calibration["source"] and "rtx-4090" in calibration["source"]
    flat = " ".join(out.split())
    # The OOM neighbour is a verdict row (validated, not fitted: its verdict stays what the model says).
    oom_row = next(line for line in out.splitlines() if "probe-1-mbs4-ga4" in line and "│" in line)
    assert "OOM: fits → fits" in oom_row and "verdicts correct 2/3 → 2/3" in flat
    assert "The plan's prediction" in flat
    # The planned setting's prediction moved up toward what the fake GPU measured.
    from autotune.costmodel.calibration import load_coefficients
    from autotune.costmodel.estimate import estimate_setting
    from autotune.profiles.catalog import resolve_gpu
    from autotune.schemas.hardware import ClusterSpec

    cluster = ClusterSpec(
        gpu=resolve_gpu("rtx-4090")[0], host_memory_gib_per_node=plan.cluster.host_memory_gib_per_node
    )
    after = estimate_setting(
        plan.model, cluster, plan.workload, plan.setting, load_coefficients(config_dir / "calibration.yaml")
    )
    p = plan.prediction
    assert abs(after.micro_step_time_s / (p.micro_step_time_s * 1.3) - 1) < abs(
        p.micro_step_time_s / (p.micro_step_time_s * 1.3) - 1
    )
    # allocated memory is derived, not fitted: allocated-only probe runs leave it where it was
    assert after.peak_memory_gib == pytest.approx(p.peak_memory_gib, abs=1e-3)
    assert sorted(path.name for path in runs_dir.iterdir()) == [
        "probe-0-mbs2-ga8",
        "probe-1-mbs4-ga4",
        "probe-2-mbs1-ga16",
    ]


def test_probe_without_neighbours_uses_a_temporary_dir_and_removes_it(
    plan_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = FakeRunner(memory_scale=1.0, time_scale=1.2)
    monkeypatch.setattr(probe_cmd, "detect_gpus", lambda: ["NVIDIA GeForce RTX 4090"])
    monkeypatch.setattr(probe_cmd, "launch_run", runner)
    code, _, err = run(
        capsys, "probe", str(plan_path), "--dataset", "org/data", "--no-neighbours", "-o", str(tmp_path / "probe.yaml")
    )
    assert code == 0, err
    assert len(runner.runs) == 1 and (tmp_path / "probe.yaml").is_file()
    assert not runner.runs[0][1].parent.exists()
