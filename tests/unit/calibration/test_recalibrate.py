"""Run reports and CSV rows → measurements, and the recalibration fit (autotune.calibration.recalibrate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from plan_requests import plan_request
from run_reports import NOW, make_report
from time_rows import START, row

from autotune import planner
from autotune.calibration.recalibrate import (
    USER_STACK,
    RefitRefused,
    case_from_run,
    check_not_worse,
    collect,
    recalibrate,
    widest_bands,
)
from autotune.costmodel.calibration import default_coefficients
from autotune.errors import ConfigError
from autotune.profiles.measurement_csv import CSV_COLUMNS, measurements_from_csv
from autotune.profiles.run_reports import UnusableRunError, measurement_from_run_report
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan, save_plan
from autotune.schemas.run_report import RunReport


def make_plan(**overrides: Any) -> PlanFile:
    """A real plan (cost model + planner) for Llama 3.2 1B LoRA on one RTX 4090."""
    options: dict[str, Any] = {
        "model": "llama3.2-1b",
        "gpu": "rtx-4090",
        "seq_len": 1024,
        "global_batch_size": 16,
        "method": "lora",
        "micro_batch_size": 2,
        "grad_ckpt": True,
        "compile": False,
        "sharding": "none",
    }
    options.update(overrides)
    request, _ = plan_request(**options)
    return planner.plan(request)[0]


def write_run(run_dir: Path, plan: PlanFile | None, report: RunReport) -> Path:
    """A run directory as ``autotune launch`` leaves it: plan.yaml (optional) and run_report.json."""
    run_dir.mkdir(parents=True)
    if plan is not None:
        save_plan(plan, run_dir / "plan.yaml")
    (run_dir / "run_report.json").write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return run_dir


@pytest.fixture(scope="module")
def plan() -> PlanFile:
    return make_plan()


# --- run reports -----------------------------------------------------------------------------------


def test_gpu_report_becomes_an_allocated_measurement(plan: PlanFile, tmp_path: Path) -> None:
    report = make_report(plan, memory_scale=1.2, time_scale=1.5)
    m = measurement_from_run_report(report, tmp_path / "run-a")
    assert m.id == "run-a" and m.source == str((tmp_path / "run-a").resolve())
    assert m.memory_kind == "allocated"
    assert m.peak_memory_gib == pytest.approx(plan.prediction.peak_memory_gib * 1.2)
    assert m.micro_step_time_s == pytest.approx(plan.prediction.micro_step_time_s * 1.5)
    assert m.step_time_s == pytest.approx(plan.prediction.step_time_s * 1.5)
    assert (m.model, m.gpu, m.num_gpus_per_node) == ("llama3.2-1b", "rtx-4090", 1)
    assert m.setting == plan.setting and m.workload == plan.workload and not m.oom


def test_cpu_report_is_refused_with_the_reason(plan: PlanFile, tmp_path: Path) -> None:
    report = make_report(plan, memory_kind="cpu-rss", peak_reserved_gib_measured=None, device="cpu")
    with pytest.raises(UnusableRunError, match="CPU run") as error:
        measurement_from_run_report(report, tmp_path / "cpu-run")
    assert "\n" not in str(error.value)


def test_collect_skips_cpu_runs_with_one_line_and_keeps_gpu_runs(plan: PlanFile, tmp_path: Path) -> None:
    cpu = write_run(tmp_path / "cpu", plan, make_report(plan, memory_kind="cpu-rss", device="cpu"))
    gpu = write_run(tmp_path / "gpu", plan, make_report(plan))
    collected = collect([cpu, gpu], load_plan)
    assert [c.measurement.id for c in collected.cases] == ["gpu"]
    assert len(collected.skipped) == 1 and "cpu" in collected.skipped[0] and "GPU" in collected.skipped[0]


def test_out_of_memory_failure_is_an_oom_row_other_failures_are_skipped(plan: PlanFile, tmp_path: Path) -> None:
    oom = make_report(plan, status="failed", message="OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
    m = measurement_from_run_report(oom, tmp_path / "oom")
    assert m.oom and m.peak_memory_gib is None and m.micro_step_time_s is None
    other = make_report(plan, status="failed", message="ValueError: dataset has no 'text' column")
    with pytest.raises(UnusableRunError, match="failed"):
        measurement_from_run_report(other, tmp_path / "bad")


def test_device_decides_the_gpu_measured(plan: PlanFile, tmp_path: Path) -> None:
    report = make_report(plan, device="cuda:0 (NVIDIA H100 80GB HBM3)")
    m = measurement_from_run_report(report, tmp_path / "r")
    assert m.gpu == "h100-80gb" and "planned for rtx-4090" in m.notes


def test_local_model_needs_the_plan_file(plan: PlanFile, tmp_path: Path) -> None:
    local_model = plan.model.model_copy(update={"key": "my-finetune", "hf_repo_id": None})
    local_plan = plan.model_copy(update={"model": local_model})
    report = make_report(local_plan)
    case = case_from_run(report, tmp_path / "r", local_plan)
    assert case.model == local_model and case.cluster.gpu.key == "rtx-4090"
    with pytest.raises(ConfigError, match=r"my-finetune.*plan\.yaml"):
        case_from_run(report, tmp_path / "r", None)
    run = write_run(tmp_path / "with-plan", local_plan, report)
    assert collect([run], load_plan).cases[0].model.key == "my-finetune"


def test_plan_cluster_layout_is_used_when_world_size_matches(tmp_path: Path) -> None:
    ddp = make_plan(num_gpus=2, sharding="ddp", host_memory_gib=128)
    case = case_from_run(make_report(ddp, world_size=2), tmp_path / "r", ddp)
    assert case.cluster.world_size == 2 and case.cluster.host_memory_gib_per_node == 128
    assert case.measurement.num_gpus_per_node == 2


def test_directory_without_report_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no run_report\.json"):
        collect([tmp_path / "empty"], load_plan)
    with pytest.raises(ConfigError, match="not found"):
        collect([tmp_path / "missing"], load_plan)


# --- CSV -------------------------------------------------------------------------------------------


def write_csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runs.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_rows_become_measurements_with_defaults(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path,
        "model,gpu,method,seq_len,micro_batch_size,grad_accum,peak_memory_gib,memory_kind,micro_step_time_s,oom\n"
        "llama3.1-8b,4090,qlora,2048,2,8,14.5,allocated,1.25,\n"
        "llama3.1-8b,v100-32gb,lora,4096,4,1,,,,true\n",
    )
    first, second = measurements_from_csv(path)
    assert (first.model, first.gpu, first.setting.method) == ("llama3.1-8b", "rtx-4090", "qlora")
    assert first.setting.sharding == "none" and first.setting.precision == "bf16"
    assert first.workload.global_batch_size == 16 and first.peak_memory_gib == 14.5
    assert first.memory_kind == "allocated" and first.micro_step_time_s == 1.25 and not first.oom
    assert second.oom and second.peak_memory_gib is None
    assert second.setting.precision == "fp16-mixed"  # V100 has no bf16
    assert first.id == "runs-row1" and "row 2" in second.source


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model,gpu,method,seq_len,batch\nllama3.1-8b,4090,lora,2048,2\n", r"unknown column 'batch'"),
        ("model,gpu,method\nllama3.1-8b,4090,lora\n", r"missing required column\(s\) seq_len"),
        (
            "model,gpu,method,seq_len\nllama3.1-8b,4090,lora,2048\nllama3.1-8b,4090,lora,long\n",
            r"row 2 \(line 3\), column seq_len: .*'long'",
        ),
        ("model,gpu,method,seq_len\nllama3.1-8b,4090,dora,2048\n", r"row 1 \(line 2\), column method"),
        ("model,gpu,method,seq_len,peak_memory_gib\nllama3.1-8b,4090,lora,2048,12\n", r"column memory_kind"),
        (
            "model,gpu,method,seq_len,peak_memory_gib,memory_kind,oom\nllama3.1-8b,4090,lora,2048,12,allocated,yes\n",
            r"column oom",
        ),
        ("model,gpu,method,seq_len\nllama-99b,4090,lora,2048\n", r"column model: unknown model"),
        ("model,gpu,method,seq_len\nllama3.1-8b,4090,lora,2048,7\n", r"row 1 \(line 2\).*more cells"),
        ("model,gpu,method,seq_len,precision\nllama3.1-8b,4090,qlora,2048,fp32\n", r"column method/precision"),
    ],
)
def test_csv_errors_name_file_row_and_column(tmp_path: Path, text: str, expected: str) -> None:
    path = write_csv(tmp_path, text)
    with pytest.raises(ConfigError, match=expected) as error:
        measurements_from_csv(path)
    message = str(error.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_csv_columns_are_the_documented_ones() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "calibration.md").read_text(encoding="utf-8")
    for column in CSV_COLUMNS:
        assert f"`{column}`" in doc


# --- fitting ---------------------------------------------------------------------------------------


def test_widest_bands_never_narrow() -> None:
    assert widest_bands({"lora": 0.2, "default": 0.3}, {"lora": 0.1, "full": 0.4, "default": 0.5}) == {
        "lora": 0.2,
        "full": 0.4,
        "default": 0.5,
    }


def test_recalibrate_without_seeds_matches_a_shifted_row_and_keeps_unmeasured_coefficients(
    plan: PlanFile, tmp_path: Path
) -> None:
    run = write_run(tmp_path / "run", plan, make_report(plan, memory_scale=1.2, time_scale=2.5))
    collected = collect([run], load_plan)
    start = default_coefficients()
    result = recalibrate(
        collected.cases, start, start_name="seeds", sources=collected.sources, with_seeds=False, name="mine", when=NOW
    )
    fitted = result.coefficients
    assert fitted.name == "mine"
    assert (
        "2026-01-02T03:04:05" in fitted.source and "rtx-4090" in fitted.source and str(run.resolve()) in fitted.source
    )
    # One row identifies one number: the stack factor (shrunk a little: one setting's own error could be part of it).
    # Every efficiency and per-call cost stays the start's.
    assert fitted.time_scale == pytest.approx(2.5, rel=0.1)
    assert fitted.matmul_efficiency == start.matmul_efficiency
    assert fitted.attention_efficiency == start.attention_efficiency
    assert fitted.lora_target_cpu_s == start.lora_target_cpu_s
    assert result.fitted_terms == ("time_scale",)
    # Only allocated memory was measured: the allocator overhead is not identified and stays.
    assert fitted.allocator_overhead_fraction == start.allocator_overhead_fraction
    for family, band in start.memory_error_band.items():
        assert fitted.memory_error_band[family] >= band
    (before,), (after,) = result.before, result.after
    assert before.memory_error == pytest.approx(1 / 1.2 - 1, rel=1e-3)
    assert before.time_error == pytest.approx(1 / 2.5 - 1, rel=1e-3)
    # Allocated memory is derived, not fitted: its error stays; the time is fitted.
    assert after.memory_error == pytest.approx(before.memory_error, abs=1e-6)
    # the stack factor's shrinkage is what is left; one row shows no setting-dependent error to carry it
    # (coverage.setting_error_probability): the local correction takes part of it
    assert abs(after.time_error) < 0.03


def test_a_users_runs_are_one_stack_the_reference(plan: PlanFile, tmp_path: Path) -> None:
    """Two run directories are two sources but one stack (time_fit's stack factors): never a factor per run."""
    scales = (("a", 1.2), ("b", 1.3))
    runs = [write_run(tmp_path / name, plan, make_report(plan, time_scale=scale)) for name, scale in scales]
    collected = collect(runs, load_plan)
    result = recalibrate(
        collected.cases,
        default_coefficients(),
        start_name="seeds",
        sources=collected.sources,
        with_seeds=False,
        name="mine",
        when=NOW,
    )
    assert result.coefficients.stack_time_factor == {USER_STACK: 1.0}
    assert [r.case.measurement.source for r in result.before] == [str(run.resolve()) for run in runs]


def test_a_row_far_off_the_others_is_named_and_left_out(plan: PlanFile, tmp_path: Path) -> None:
    """Three rows of one setting 1.3× slow and one 17× off: the fit follows the three, the fourth is named."""
    scales = (("a", 1.3), ("b", 1.31), ("c", 1.29), ("d", 17.0))
    runs = [write_run(tmp_path / name, plan, make_report(plan, time_scale=scale)) for name, scale in scales]
    collected = collect(runs, load_plan)
    result = recalibrate(
        collected.cases, default_coefficients(), start_name="seeds", sources=[], with_seeds=False, name="m", when=NOW
    )
    # one setting: the local correction (or the stack factor) brings the three within a few per cent, not the 17× row
    assert all(abs(after.time_error or 0) < 0.05 for after in result.after[:3])
    (line,) = result.outliers.values()
    assert list(result.outliers) == [collected.cases[3].measurement.id]
    assert line.startswith(collected.cases[3].measurement.id) and "2× off" in line
    # the bands do not come from the outlier (±1500 %): the three rows are replicates of one setting, which cannot
    # show the error at another setting (held_out), so the start's band stays; the band printed at their setting
    # (the local correction's) is theirs
    assert result.coefficients.time_error_band["default"] == default_coefficients().time_error_band["default"]
    assert result.after[0].estimate.time_uncertainty_fraction < 0.3


def test_a_refit_that_fits_its_own_rows_worse_is_refused() -> None:
    """Pooled with a 2.2× slower stack's rows, three of the core's runs end up fitted worse: refused, not written."""
    from autotune.calibration.cases import prepare_cases
    from autotune.profiles.measurements import list_measurement_sets

    sets = {s.name: s.measurements for s in list_measurement_sets()}
    core = prepare_cases(sets["autotune-core-h100"])[:3]
    seeds = prepare_cases(sets["seed-001-h100"])
    with pytest.raises(RefitRefused, match=r"worse than calibration 'seeds' .*time MAPE 1\.1% → 11\.\d%"):
        recalibrate(
            core, default_coefficients(), start_name="seeds", sources=[], with_seeds=True, name="x", seed_cases=seeds
        )
    # the same rows alone: the stack factor fit is never worse on them
    result = recalibrate(core, default_coefficients(), start_name="seeds", sources=[], with_seeds=False, name="x")
    assert result.coefficients.time_scale == pytest.approx(1.0, abs=0.01)


def test_a_refit_whose_printed_mape_rises_is_refused_though_its_squared_log_error_falls() -> None:
    """Two rows on the start and one 4× slower: a factor 4^(1/3) lowers the squared log error, raises the MAPE."""
    rows = [row(1.0), row(1.0, seq_len=1024), row(4.0, seq_len=512)]
    fitted = START.model_copy(update={"time_scale": START.time_scale * 4 ** (1 / 3)})
    with pytest.raises(RefitRefused, match=r"mean squared log error 0\.641 → 0\.427, time MAPE 25\.0% → 59\.3%"):
        check_not_worse(rows, START, fitted, "seeds")
    check_not_worse(rows, START, START, "seeds")  # the start itself is never worse


def test_recalibrate_needs_measurements() -> None:
    with pytest.raises(ConfigError, match="no measurements"):
        recalibrate([], default_coefficients(), start_name="seeds", sources=[], with_seeds=False, name="x")


def test_a_version_1_run_report_still_reads(tmp_path: Path) -> None:
    """Reports written before the prediction was embedded keep calibrating (their copied fields are dropped)."""
    from plan_requests import plan_request as plan_options
    from run_reports import make_report

    from autotune import planner
    from autotune.schemas.run_report import RUN_REPORT_SCHEMA_VERSION, V1_PREDICTION_FIELDS, RunReport

    request, _ = plan_options(model="llama3.2-1b", gpu="rtx-4090", seq_len=512, method="lora")
    plan = planner.plan(request)[0]
    data = make_report(plan).model_dump(mode="json")
    data.pop("prediction")
    data.update({name: getattr(plan.prediction, name) for name in V1_PREDICTION_FIELDS}, schema_version=1)
    report = RunReport.model_validate(data)
    assert report.schema_version == RUN_REPORT_SCHEMA_VERSION and report.prediction is None
    assert make_report(plan).prediction == plan.prediction


def test_version_2_report_without_adapter_dtype_ran_fp32_adapters() -> None:
    """Reports written before the setting recorded adapter_dtype ran peft's default (fp32 adapters): reading one must
    not describe it with today's default (compute), or calibrate fits the fast path's work to a slow run."""
    from plan_requests import plan_request as plan_options

    from autotune import planner
    from autotune.schemas.run_report import RunReport

    request, _ = plan_options(model="llama3.2-1b", gpu="rtx-4090", seq_len=512, method="lora")
    plan = planner.plan(request)[0]
    data = make_report(plan).model_dump(mode="json")
    assert data["setting"]["adapter_dtype"] == "compute"
    old = dict(data, schema_version=2, setting={k: v for k, v in data["setting"].items() if k != "adapter_dtype"})
    assert RunReport.model_validate(old).setting.adapter_dtype == "fp32"
    assert RunReport.model_validate(dict(data, schema_version=2)).setting.adapter_dtype == "compute"
    assert RunReport.model_validate(data).setting.adapter_dtype == "compute"


def test_shipped_core_runs_are_collected_with_the_adapters_they_ran() -> None:
    """The five H100 run directories (run report schema 2, plan schema 1) ran fp32 adapters with dropout 0.05."""
    import autotune.profiles.measurements as shipped
    from autotune.profiles.measurements import CORE_SOURCE

    runs = sorted(p for p in (Path(shipped.__file__).parent / "measurements" / CORE_SOURCE).iterdir() if p.is_dir())
    cases = collect(runs, load_plan).cases
    adapters = {c.measurement.setting.adapter_dtype for c in cases if c.measurement.setting.method != "full"}
    assert len(cases) == 5 and adapters == {"fp32"}
