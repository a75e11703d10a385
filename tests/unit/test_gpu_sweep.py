"""benchmarks/gpu_sweep.py on the CPU: --dry-run lists every setting without torch; each entry's plan flags and
launch overrides are accepted by the real CLI; the table's errors and MFU come from the run report."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_sweep.py"
FIXTURE_MODEL = ROOT / "tests" / "fixtures" / "configs" / "llama3-8b"

_spec = importlib.util.spec_from_file_location("gpu_sweep", SCRIPT)
assert _spec is not None and _spec.loader is not None
gpu_sweep = importlib.util.module_from_spec(_spec)
sys.modules["gpu_sweep"] = gpu_sweep
_spec.loader.exec_module(gpu_sweep)


@pytest.mark.slow  # the script plans every entry in its own autotune process, the dataset entries with the scan
def test_dry_run_lists_every_setting_without_torch(tmp_path: Path) -> None:
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['gpu_sweep.py', '--dry-run', '--results', {str(tmp_path / 'results')!r}]\n"
        "try:\n"
        f"    runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
        "except SystemExit as exit_:\n"
        "    assert not exit_.code, exit_.code\n"
        "heavy = [name for name in ('torch', 'transformers', 'peft') if name in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for entry in gpu_sweep.SETTINGS:
        assert f"[{entry.name}]" in out
    assert out.count("  baseline: ") == sum(entry.baseline is not None for entry in gpu_sweep.SETTINGS)
    assert out.count("autotune plan ") == out.count("autotune launch ") == len(gpu_sweep.SETTINGS)
    assert "--max-steps" in out and "plain_hf.py" in out
    assert out.count("  predicted on h100 (") == len(gpu_sweep.SETTINGS)  # each entry with its prediction
    assert not (tmp_path / "results").exists()  # a dry run writes nothing


def test_the_offload_entries_a_one_gpu_machine_can_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27 item 4: full fine-tuning of a 1B-3B model with FSDP and ZeRO-3 CPU offload, LoRA of the 8B model
    with FSDP CPU offload, at world size 1, each listed with its prediction and its PCIe streaming terms."""
    entries = {entry.name: entry for entry in gpu_sweep.selected(",".join(gpu_sweep.OFFLOAD_ENTRIES))}
    assert list(entries) == list(gpu_sweep.OFFLOAD_ENTRIES)
    wanted = {
        "full-1b-fsdp-offload": ("full", "fsdp-offload", "llama3.2-1b"),
        "full-1b-zero3-offload": ("full", "zero3-offload", "llama3.2-1b"),
        "lora-8b-fsdp-offload": ("lora", "fsdp-offload", "llama3-8b"),
    }
    for name, (method, sharding, model) in wanted.items():
        flags = list(entries[name].plan)
        assert flags[flags.index("--method") + 1] == method and flags[flags.index("--sharding") + 1] == sharding
        assert entries[name].model == model and "--num-gpus" not in flags  # world size 1
        line = gpu_sweep.predict(entries[name], model, "h100")
        assert line.startswith(f"predicted on h100 ({model}, {method}, {sharding}):"), line
        assert "pcie weight streaming" in line and "tokens/s" in line
    assert gpu_sweep.main(["--dry-run", "--only", "full-1b-zero3-offload"]) == 0
    out = capsys.readouterr().out
    assert "[full-1b-zero3-offload] llama3.2-1b" in out and "[lora-m2-noc]" not in out
    assert "configs/llama3.2-1b.json" in out and "configs/llama3-8b.json" not in out  # only the model it needs


def test_only_runs_the_entries_in_the_order_named() -> None:
    """A short lease runs what it names first: ``--only b,a`` runs b before a, each once."""
    names = ["lora-8b-fsdp-offload", "lora-m2-noc", "full-1b-fsdp-offload"]
    assert [entry.name for entry in gpu_sweep.selected(",".join([*names, "lora-m2-noc"]))] == names


def test_only_refuses_an_unknown_entry() -> None:
    with pytest.raises(SystemExit, match="no entry nope"):
        gpu_sweep.selected("lora-m2-noc,nope")


def _scans_data(entry: object) -> bool:
    """An entry that plans a dataset starts the dataset scan (autotune.trainer.lengths): slow."""
    return "--dataset" in entry.plan  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "entry",
    [pytest.param(e, marks=pytest.mark.slow if _scans_data(e) else (), id=e.name) for e in gpu_sweep.SETTINGS],
)
def test_each_entry_plans_what_it_says(entry: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_path = tmp_path / "plan.yaml"
    long_tailed = str(gpu_sweep.write_rows(tmp_path / "long-tailed.jsonl", 300))
    model = FIXTURE_MODEL.parent / entry.model if entry.model else FIXTURE_MODEL  # type: ignore[attr-defined]
    argv = gpu_sweep.plan_argv(entry, str(model), "h100", str(plan_path), long_tailed)
    code, out, err = run(capsys, *argv[len(gpu_sweep.AUTOTUNE) :])
    assert code == 0, err
    setting = json.loads(out)["plan"]["setting"]
    flags = list(entry.plan)  # type: ignore[attr-defined]
    if "--packing" in flags:  # the packing entries plan the long-tailed rows, laid out as they say
        assert json.loads(out)["plan_file"]["dataset"]["packing"] == flags[flags.index("--packing") + 1]
    if "--method" in flags:
        assert setting["method"] == flags[flags.index("--method") + 1]
        assert setting["micro_batch_size"] == int(flags[flags.index("--micro-batch-size") + 1])
        assert setting["grad_ckpt"] == ("--grad-ckpt" in flags)
    if "--sharding" in flags:
        assert setting["sharding"] == flags[flags.index("--sharding") + 1]
    if entry.baseline is not None:  # type: ignore[attr-defined]
        method, mbs, ga, ckpt = entry.baseline  # type: ignore[attr-defined]
        assert (setting["method"], setting["micro_batch_size"], setting["grad_accum"], setting["grad_ckpt"]) == (
            method,
            mbs,
            ga,
            ckpt,
        )


def test_the_fast_path_overrides_are_accepted_by_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.launcher import preflight

    monkeypatch.setattr(preflight, "check_gpu_visible", lambda: None)  # the sweep runs on a GPU machine
    entry = gpu_sweep.SETTINGS[0]
    model = tmp_path / "model"  # what make_model.py writes, as far as the launch's pre-flight looks (file names)
    model.mkdir()
    (model / "config.json").write_text((FIXTURE_MODEL / "config.json").read_text())
    for name in ("model.safetensors", *(path.name for path in (ROOT / "benchmarks" / "gpu_kit" / "tok").iterdir())):
        (model / name).write_text("")
    plan_path = tmp_path / "plan.yaml"
    argv = gpu_sweep.plan_argv(entry, str(model), "h100", str(plan_path))[len(gpu_sweep.AUTOTUNE) :]
    assert run(capsys, *argv)[0] == 0
    data = gpu_sweep.write_data(tmp_path / "data.jsonl", rows=3, chars=50)
    assert len(data.read_text().splitlines()) == 3
    launch = gpu_sweep.launch_argv(entry, str(plan_path), str(data), str(tmp_path / "run"))[len(gpu_sweep.AUTOTUNE) :]
    code, out, err = run(capsys, *launch, "--dry-run")
    assert code == 0, err
    from autotune.schemas.setting import TrainingSetting

    if TrainingSetting().adapter_dtype != "compute":  # the override is printed while the default differs
        assert "setting.adapter_dtype fp32 → compute" in out + err


def test_summary_errors_and_mfu() -> None:
    report = {
        "status": "completed",
        "peak_memory_gib_measured": 20.0,
        "tokens_per_s_measured": 11_000.0,
        "prediction": {"peak_memory_gib": 19.0, "tokens_per_s": 10_000.0, "mfu": 0.5},
    }
    summary = gpu_sweep.summarize(report)
    assert summary["memory_error"] == pytest.approx(20 / 19 - 1)
    assert summary["tokens_per_s_error"] == pytest.approx(0.1)
    assert summary["mfu"] == pytest.approx(0.55)
    text = gpu_sweep.table([{"name": "lora-m2-noc", "status": "completed", "summary": summary}])
    assert "| lora-m2-noc | completed | 20.00 (19.00, +5.3%) | 11,000 (10,000, +10.0%) | 55.0% (50.0%) |" in text
    missing = gpu_sweep.summarize({"status": "failed", "prediction": None})
    assert missing["mfu"] is None and missing["memory_error"] is None


def test_the_host_link_probe_runs_and_says_why_it_skipped_without_a_gpu() -> None:
    """The probe's code runs in a subprocess of this interpreter: on a CPU build it reports the skip (on a GPU it
    reports GB/s per direction and host memory kind; not testable here)."""
    pytest.importorskip("torch")
    row = gpu_sweep.probe_host_link()
    assert row["name"] == "host-link probe" and row["status"] == "skipped: no CUDA device", row


def test_the_packing_entries_differ_only_in_the_layout() -> None:
    """Issue 26's packed vs padded ratio on a GPU: the same long-tailed rows, model, setting and steps; only
    ``--packing`` differs, so their tokens/s ratio is the one the two plans predict."""
    packed, padded = (next(e for e in gpu_sweep.SETTINGS if e.name == name) for name in gpu_sweep.PACKING_ENTRIES)
    assert packed.data == padded.data == "long-tailed"
    assert (packed.model, packed.sets, packed.steps) == (padded.model, padded.sets, padded.steps)
    assert [(a, b) for a, b in zip(packed.plan, padded.plan, strict=True) if a != b] == [("packed", "padded")]
