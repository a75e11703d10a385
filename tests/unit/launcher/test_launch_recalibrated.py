"""``launch --set`` re-estimates with the plan's own calibration, and prints the planner's GPU need.

Both were wrong answers: ``launch`` re-estimated with the shipped calibration whatever the plan used
(a no-op ``--set`` moved a plan made with ``calibration: mine``), and its warning added the ± band where
the planner adds the headroom, so ``launch`` and ``plan`` printed different needs for one setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from plan_requests import plan_request
from plans import estimate

from autotune import planner
from autotune.cli.app import main
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import estimate_setting
from autotune.errors import ConfigError
from autotune.launcher import apply_overrides
from autotune.launcher import checks as launch_checks
from autotune.planner.fit import fit_shortfall
from autotune.profiles.catalog import resolve_gpu
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import save_plan
from autotune.session.calibration_choice import plan_coefficients


@pytest.fixture
def user_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user calibration 'mine' that predicts other times and headroom than the shipped one."""
    shipped = default_coefficients()
    mine = shipped.model_copy(
        update={
            "name": "mine",
            "lora_target_cpu_s": shipped.lora_target_cpu_s * 2,
            "bandwidth_efficiency": 0.5,
            "memory_headroom_band": {key: value * 2 + 0.1 for key, value in shipped.memory_headroom_band.items()},
        }
    )
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("AUTOTUNE_CONFIG_DIR", str(config))
    path = config / "calibration.yaml"
    path.write_text(yaml.safe_dump(mine.model_dump(mode="json")), encoding="utf-8")
    return path


def _plan(**overrides: Any) -> PlanFile:
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048, method="lora", **overrides)
    return planner.plan(request)[0]


def _launched_plan(monkeypatch: pytest.MonkeyPatch, *argv: str) -> PlanFile:
    """Run ``autotune launch ... --dry-run`` and return the plan it would run."""
    seen: list[PlanFile] = []
    real = launch_checks.build_launch_spec

    def capture(plan: PlanFile, options: Any, gpu: Any = None) -> Any:
        seen.append(plan)
        return real(plan, options, gpu)

    monkeypatch.setattr(launch_checks, "build_launch_spec", capture)
    try:
        main(["launch", *argv, "--dry-run"])
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    assert len(seen) == 1
    return seen[0]


def test_a_no_op_set_keeps_the_prediction_of_a_plan_made_with_a_user_calibration(
    user_calibration: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan()
    assert plan.calibration == "mine"
    path = save_plan(plan, tmp_path / "plan.yaml")
    same = f"grad_accum={plan.setting.grad_accum}"
    args = (str(path), "--dataset", "d", "--output-dir", str(tmp_path / "run"), "--set", same)
    launched = _launched_plan(monkeypatch, *args)
    assert launched.prediction == plan.prediction
    shipped = apply_overrides(plan, [same], estimate=estimate_setting, resolve_gpu=lambda key: resolve_gpu(key)[0])
    assert shipped.prediction != plan.prediction  # what the shipped calibration gave: the test can fail
    assert launched.calibration == "mine"


def test_a_plan_whose_calibration_cannot_be_found_is_refused(
    user_calibration: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan()
    user_calibration.unlink()
    with pytest.raises(ConfigError, match="calibration 'mine'"):
        plan_coefficients(plan)
    path = save_plan(plan, tmp_path / "plan.yaml")
    with pytest.raises(SystemExit) as exit_:
        main(["launch", str(path), "--dataset", "d", "--output-dir", str(tmp_path / "run"), "--set", "grad_accum=2"])
    assert exit_.value.code == 2
    assert "--calibration FILE" in capsys.readouterr().err


def test_the_calibration_option_must_be_the_plans(user_calibration: Path, tmp_path: Path) -> None:
    plan = _plan()
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(default_coefficients().model_dump(mode="json")), encoding="utf-8")
    with pytest.raises(ConfigError, match="the plan was made with 'mine'"):
        plan_coefficients(plan, other)
    assert plan_coefficients(plan, user_calibration).name == "mine"


def test_launch_and_plan_print_the_same_gpu_need() -> None:
    """The need is Estimate.gpu_memory_need_gib (peak + context + headroom), not peak + context + band."""
    prediction = estimate(fits=False, peak_gib=23.0, gpu_gib=24.0, memory_headroom_gib=2.0)
    assert prediction.memory_uncertainty_gib != prediction.memory_headroom_gib
    line = fit_shortfall(prediction)
    assert f"= {prediction.gpu_memory_need_gib:.1f} GiB > 24.0 GiB" in line
    assert (
        f"{prediction.peak_memory_gib + prediction.cuda_context_gib + prediction.memory_uncertainty_gib:.1f} GiB"
        not in line
    )


def test_the_launch_warning_shows_the_planners_need(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end with the real cost model: a micro batch that no longer fits."""
    plan = _plan(micro_batch_size=1, grad_ckpt=True)
    path = save_plan(plan, tmp_path / "plan.yaml")
    try:
        main(
            [
                "launch",
                str(path),
                "--dataset",
                "d",
                "--output-dir",
                str(tmp_path / "run"),
                "--dry-run",
                "--set",
                "micro_batch_size=32",
                "--set",
                "grad_ckpt=false",
            ]
        )
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "headroom" in warning[0] and "band" not in warning[0]
