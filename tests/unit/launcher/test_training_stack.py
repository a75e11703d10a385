"""The training stack's tested versions: pyproject's ``train`` extra, the lock and the launch refusal agree."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from plans import make_plan

import autotune.launcher.preflight as launcher_preflight
from autotune.schemas.plan_io import save_plan
from autotune.schemas.training_stack import (
    TESTED_TRAINING_STACK,
    installed_versions,
    release,
    untested_stack_error,
)

from .test_launch_cmd import run_cli

tomllib = pytest.importorskip("tomllib")
ROOT = Path(__file__).resolve().parents[3]


def _train_extra() -> dict[str, str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["train"]
    out: dict[str, str] = {}
    for text in extra:
        name, _, spec = text.partition(">=")
        out[name.strip()] = ">=" + spec.strip()
    return out


def test_pyproject_train_extra_is_the_tested_table() -> None:
    declared = _train_extra()
    for name, (low, high) in TESTED_TRAINING_STACK.items():
        assert declared[name] == f">={low},<{high}", name


def test_the_lock_pins_the_lowest_tested_version() -> None:
    """The lower bound is what CI installs: a fresh install at the lowest allowed versions is the tested one."""
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    for name, (low, _) in TESTED_TRAINING_STACK.items():
        assert pins[name] == low, name


def test_release_numbers() -> None:
    assert release("2.13.0+cu128") == (2, 13)
    assert release("5.23.1") == (5, 23, 1)
    assert release("5.24.0rc1") == (5, 24)
    with pytest.raises(ValueError):
        release("abc")


def test_the_issue_21_version_is_refused_in_one_line() -> None:
    versions = {name: low for name, (low, _) in TESTED_TRAINING_STACK.items()}
    assert untested_stack_error(versions) is None
    assert untested_stack_error({**versions, "transformers": "5.23.4", "torch": "2.13.1+cu128"}) is None
    error = untested_stack_error({**versions, "transformers": "5.17.0", "peft": "0.22.0", "datasets": None})
    assert error is not None and "\n" not in error
    assert "transformers 5.17.0 (tested: >=5.23.0,<5.24)" in error and "peft 0.22.0" in error
    assert "datasets" not in error  # missing: reported by the pre-flight, not here


def test_installed_versions_reads_metadata() -> None:
    versions = installed_versions(("pydantic", "no-such-distribution-xyz"))
    assert versions["pydantic"] and versions["no-such-distribution-xyz"] is None


def test_launch_refuses_an_untested_stack_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = {name: low for name, (low, _) in TESTED_TRAINING_STACK.items()} | {"transformers": "5.17.0"}
    monkeypatch.setattr(launcher_preflight, "installed_versions", lambda: fake)
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    code = run_cli("launch", str(plan), "--dataset", "org/data", "--output-dir", str(out))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "transformers 5.17.0" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("kernels", "flags", "expected"),
    [("liger", ["--cpu"], "cannot run on the CPU"), ("liger", ["--dry-run", "--cpu"], "cannot run on the CPU")],
)
def test_launch_refuses_liger_on_the_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kernels: str, flags: list[str], expected: str
) -> None:
    plan = save_plan(make_plan(kernels=kernels), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    code = run_cli("launch", str(plan), "--dataset", "org/data", "--output-dir", str(out), *flags)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"kernels={kernels}" in err and expected in err
    assert not out.exists()


def test_launch_refuses_liger_without_the_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "liger_kernel" else real(name, *a),
    )
    plan = save_plan(make_plan(kernels="liger"), tmp_path / "plan.yaml")
    code = run_cli("launch", str(plan), "--dataset", "org/data", "--output-dir", str(tmp_path / "run"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and '".[liger]"' in err, err


def test_kernels_rule() -> None:
    from autotune.schemas.setting import kernels_run_error

    assert kernels_run_error("none", "chunked", cpu=True, installed=False) is None
    assert kernels_run_error("liger", "fp32-upcast", cpu=False, installed=True) is None
    error = kernels_run_error("liger", "chunked", cpu=False, installed=True)
    assert error is not None and "loss_impl=chunked" in error


def test_an_untested_stack_runs_when_the_user_opts_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = {name: low for name, (low, _) in TESTED_TRAINING_STACK.items()} | {"torch": "2.11.0+cu130"}
    monkeypatch.setattr(launcher_preflight, "installed_versions", lambda: fake)
    monkeypatch.setenv("AUTOTUNE_ALLOW_UNTESTED_STACK", "1")
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    code = run_cli("launch", str(plan), "--dataset", "org/data", "--output-dir", str(tmp_path / "run"), "--dry-run")
    assert code == 0, capsys.readouterr().err
    monkeypatch.setenv("AUTOTUNE_ALLOW_UNTESTED_STACK", "0")
    code = run_cli("launch", str(plan), "--dataset", "org/data", "--output-dir", str(tmp_path / "run"), "--dry-run")
    assert code == 2 and "torch 2.11.0+cu130" in capsys.readouterr().err
