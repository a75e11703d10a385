"""``autotune export``'s checks before anything is written (src/autotune/cli/export_cmd.py); the export itself runs
the training core (tests/integration/test_export.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from plans import make_plan

from autotune.cli import export_cmd
from autotune.cli.export_cmd import check_export
from autotune.errors import InvalidRequestError
from autotune.schemas.plan_io import save_plan
from autotune.units import GIB


def _run_dir(tmp_path: Path, final: tuple[str, ...] = (), checkpoint: tuple[str, ...] = ()) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    save_plan(make_plan(method="lora"), run_dir / "plan.yaml")
    for folder, names in ((run_dir / "final", final), (run_dir / "checkpoints" / "checkpoint-2", checkpoint)):
        if names:
            folder.mkdir(parents=True)
            for name in names:
                (folder / name).write_bytes(b"x")
    return run_dir


@pytest.mark.parametrize(
    "files",
    [
        ("adapter_model.safetensors", "adapter_config.json"),
        ("adapter_model.bin", "adapter_config.json"),  # peft's pickled save
        ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"),
        ("pytorch_model.bin", "config.json"),
    ],
)
def test_weights_are_found_by_the_launch_pre_flight_rule(tmp_path: Path, files: tuple[str, ...]) -> None:
    run_dir = _run_dir(tmp_path, final=files)
    assert check_export(run_dir, tmp_path / "out", merge=False, checkpoint=None)[0] == run_dir / "final"


def test_a_checkpoint_of_optimizer_state_alone_has_no_weights(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, checkpoint=("optimizer.pt", "training_args.bin", "trainer_state.json"))
    with pytest.raises(InvalidRequestError, match="has no weights in checkpoint-2/; checkpoints: checkpoint-2"):
        check_export(run_dir, tmp_path / "out", merge=False, checkpoint="checkpoint-2")


def test_a_merge_larger_than_the_available_memory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    psutil = pytest.importorskip("psutil")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=1 * GIB))
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: SimpleNamespace(free=1000 * GIB))  # the disk holds it
    run_dir = _run_dir(tmp_path, final=("adapter_model.safetensors",))
    with pytest.raises(InvalidRequestError, match=r"in memory \(about [\d.]+ GiB\), and 1\.0 GiB is available"):
        check_export(run_dir, tmp_path / "out", merge=True, checkpoint=None)
    check_export(run_dir, tmp_path / "out", merge=False, checkpoint=None)  # the adapter alone needs no such memory


def test_without_psutil_the_merge_is_not_checked_against_memory_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil raises ImportError
    assert export_cmd.available_memory_bytes() is None
    assert "memory not checked before the merge: psutil is not installed" in capsys.readouterr().err


def test_a_merged_models_dtype_is_the_plans_compute_dtype_or_dtype_and_priced_on_disk_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.costmodel.params import count_params
    from autotune.schemas.plan_io import load_plan

    run_dir = _run_dir(tmp_path, final=("adapter_model.safetensors",))
    monkeypatch.setattr(export_cmd, "available_memory_bytes", lambda: None)
    assert check_export(run_dir, tmp_path / "out", merge=True, checkpoint=None)[1] == "bf16"  # make_plan: bf16
    assert check_export(run_dir, tmp_path / "out", merge=True, checkpoint=None, dtype="fp32")[1] == "fp32"
    t4_run = tmp_path / "t4"  # a card without bf16 computes a bf16 plan in fp16 (costmodel.precision)
    shutil.copytree(run_dir, t4_run)
    save_plan(make_plan(method="lora", gpu="t4"), t4_run / "plan.yaml", overwrite=True)
    assert check_export(t4_run, tmp_path / "out", merge=True, checkpoint=None)[1] == "fp16"
    params = count_params(load_plan(run_dir / "plan.yaml").model).total_params
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: SimpleNamespace(free=params * 3))  # bf16 fits, fp32 not
    check_export(run_dir, tmp_path / "out", merge=True, checkpoint=None, dtype="bf16")
    with pytest.raises(InvalidRequestError, match=r"export needs about [\d.]+ GiB"):
        check_export(run_dir, tmp_path / "out", merge=True, checkpoint=None, dtype="fp32")


@pytest.mark.parametrize(
    ("dtype", "merge", "message"),
    [("float8", True, "--dtype float8: choose one of bf16, fp16, fp32"), ("fp32", False, "--dtype sets a merged")],
)
def test_a_bad_dtype_is_refused(tmp_path: Path, dtype: str, merge: bool, message: str) -> None:
    run_dir = _run_dir(tmp_path, final=("adapter_model.safetensors",))
    with pytest.raises(InvalidRequestError, match=message):
        check_export(run_dir, tmp_path / "out", merge=merge, checkpoint=None, dtype=dtype)


def test_the_cli_offers_the_dtypes_the_export_writes() -> None:
    from autotune.trainer.export import TORCH_DTYPES

    assert set(export_cmd.EXPORT_DTYPES) == set(TORCH_DTYPES)
