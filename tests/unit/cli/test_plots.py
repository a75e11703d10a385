"""``--plot`` pictures: the numbers handed to matplotlib, real PNG files, and one-line errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_runner import run as run_cli
from plan_requests import plan_request

from autotune.calibration.cases import prepare_cases
from autotune.calibration.results import evaluate
from autotune.calibration.validation import summarize
from autotune.cli import plot_data, plot_validation, plots
from autotune.errors import AutotuneError, ConfigError, InvalidRequestError
from autotune.planner.search import search
from autotune.profiles.measurements import all_measurements
from autotune.schemas.estimate import Estimate


@pytest.fixture
def cli() -> None:
    """The real ``autotune`` app (it imports a command's module only when that command runs)."""


def plan_estimates(model: str, gpu: str, num_gpus: int, **overrides: object) -> list[tuple[str, Estimate]]:
    """The chosen setting and the runner-ups of a real plan."""
    request, _ = plan_request(model=model, gpu=gpu, num_gpus=num_gpus, **overrides)
    result = search(request)
    return [(s.setting.short(), s.estimate) for s in [result.best, *result.alternatives]]


def assert_png(path: Path, width_in: float, height_in: float) -> None:
    """A real PNG of the figure's size (matplotlib reads it back)."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == plots.PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == (round(height_in * plots.DPI), round(width_in * plots.DPI))
    assert image.std() > 0.05  # not a blank canvas


# --- the numbers handed to matplotlib ---------------------------------------------------------------------


def test_stacked_bars_sum_to_each_estimate() -> None:
    estimates = plan_estimates("llama2-13b", "a100-80gb", 4, method="full")
    assert len(estimates) >= 3  # several shardings, so several kinds of parts
    bars = plot_data.memory_bars(estimates)
    assert bars.labels == [label for label, _ in estimates]
    for i, (_, estimate) in enumerate(estimates):
        nonzero = {k: v for k, v in estimate.memory_breakdown_gib.items() if v > 0}
        assert {p: bars.values_gib[p][i] for p in bars.parts if bars.values_gib[p][i] > 0} == nonzero
        # the breakdown is stored rounded to 1e-3 GiB per part
        assert bars.peaks_gib[i] == pytest.approx(estimate.peak_memory_gib, abs=1e-3 * len(nonzero) + 1e-9)
        need = estimate.peak_memory_gib + estimate.cuda_context_gib + estimate.memory_headroom_gib
        assert bars.needs_gib[i] == pytest.approx(need, abs=1e-3 * len(nonzero) + 1e-9)
        assert bars.capacity_gib[i] == estimate.gpu_memory_gib == 80
        assert bars.needs_gib[i] <= bars.capacity_gib[i]  # the planner only returns settings that fit


def test_parts_stack_in_a_fixed_order_with_fixed_colours_and_skip_empty_parts() -> None:
    lora = plan_estimates("llama3-8b", "4090", 1, method="lora")[:1]
    full = plan_estimates("llama2-13b", "a100-80gb", 4, method="full")
    order = list(plot_data.PART_COLOURS)
    for estimates in (lora, full):
        bars = plot_data.memory_bars(estimates)
        assert bars.parts == sorted(bars.parts, key=order.index)
        assert all(any(v > 0 for v in bars.values_gib[p]) for p in bars.parts)
    assert plot_data.colour_for("weights") == plot_data.PART_COLOURS["weights"]
    assert plot_data.colour_for("a part nobody knows") == plot_data.colour_for("a part nobody knows")
    assert len(set(plot_data.PART_COLOURS.values())) == len(plot_data.PART_COLOURS)


def test_memory_bars_needs_an_estimate() -> None:
    with pytest.raises(ValueError):
        plot_data.memory_bars([])


@pytest.fixture(scope="module")
def seed_results() -> list:
    from autotune.costmodel.calibration import default_coefficients

    return evaluate(prepare_cases(all_measurements()), default_coefficients())


def test_scatter_points_cover_every_row_with_numbers_and_every_oom_row(seed_results: list) -> None:
    rows = summarize(seed_results).rows
    data = plot_data.scatter_points(rows, plot_data.oom_needs(seed_results))
    with_memory = [r for r in rows if r.measured_memory_gib is not None and r.predicted_memory_gib is not None]
    with_time = [r for r in rows if r.measured_time_s is not None and r.predicted_time_s is not None]
    assert [(p.id, p.measured, p.predicted) for p in data.memory] == [
        (r.id, r.measured_memory_gib, r.predicted_memory_gib) for r in with_memory
    ]
    assert [(p.id, p.measured, p.predicted) for p in data.time] == [
        (r.id, r.measured_time_s, r.predicted_time_s) for r in with_time
    ]
    oom_rows = [r for r in rows if r.oom_measured]
    assert oom_rows and [p.id for p in data.oom] == [r.id for r in oom_rows]
    by_id = {r.id: r for r in seed_results}
    for point in data.oom:
        e = by_id[point.id].estimate
        assert point.gpu_memory_gib == e.gpu_memory_gib
        assert point.predicted_need_gib == pytest.approx(e.peak_memory_gib + e.cuda_context_gib + e.memory_headroom_gib)
        assert point.verdict_correct == (not e.fits)
        if e.host_memory_gib == 0:  # no offload: "above y = x" is exactly "predicted not to fit"
            assert (point.predicted_need_gib > point.gpu_memory_gib) == (not e.fits)
    assert plot_data.scatter_points(rows).oom == []  # without the needs, OOM rows have nothing to place


# --- PNG files ------------------------------------------------------------------------------------------


def test_memory_breakdown_png_is_a_real_png(tmp_path: Path) -> None:
    estimates = plan_estimates("llama3-8b", "4090", 1)
    path = plots.memory_breakdown_png(estimates, tmp_path / "mem.png", title="test")
    assert_png(path, max(7.5, 1.7 * len(estimates) + 3.2), 5.2)


def test_validation_scatter_png_is_a_real_png(tmp_path: Path, seed_results: list) -> None:
    rows = summarize(seed_results).rows
    path = plot_validation.validation_scatter_png(rows, tmp_path / "scatter.png", plot_data.oom_needs(seed_results))
    assert_png(path, 12.5, 5.6)


def test_plot_paths_are_checked_and_never_overwritten(tmp_path: Path) -> None:
    estimates = plan_estimates("llama3-8b", "4090", 1)[:1]
    existing = tmp_path / "mine.png"
    existing.write_bytes(b"the user's picture")
    with pytest.raises(InvalidRequestError, match="already exists"):
        plots.memory_breakdown_png(estimates, existing)
    assert existing.read_bytes() == b"the user's picture"
    with pytest.raises(InvalidRequestError, match=r"\.png"):
        plots.memory_breakdown_png(estimates, tmp_path / "mem.jpg")
    with pytest.raises(ConfigError, match="does not exist"):
        plots.memory_breakdown_png(estimates, tmp_path / "missing" / "mem.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.png"]


def test_missing_matplotlib_raises_the_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    with pytest.raises(AutotuneError, match=r"pip install 'autotune\[plot\]'"):
        plots.memory_breakdown_png(plan_estimates("llama3-8b", "4090", 1)[:1], tmp_path / "mem.png")
    assert not (tmp_path / "mem.png").exists()


# --- through the commands -------------------------------------------------------------------------------


@pytest.mark.usefixtures("cli")
def test_estimate_plot_writes_the_png_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "mem.png"
    code, out, _ = run_cli(capsys, "estimate", "llama3-8b", "--gpu", "4090", "--method", "qlora", "--plot", str(target))
    assert code == 0
    assert f"wrote {target}" in out.replace("\n", "")
    assert_png(target, 7.5, 5.2)


@pytest.mark.usefixtures("cli")
def test_plan_plot_draws_the_chosen_setting_and_runner_ups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[list[tuple[str, Estimate]]] = []
    original = plots.memory_breakdown_png

    def spy(estimates: list[tuple[str, Estimate]], path: Path, title: str | None = None) -> Path:
        drawn.append(list(estimates))
        return original(estimates, path, title)

    monkeypatch.setattr(plots, "memory_breakdown_png", spy)
    target = tmp_path / "plan.png"
    code, out, _ = run_cli(capsys, "plan", "llama3-8b", "--gpu", "4090", "--plot", str(target), "--json")
    assert code == 0
    import json

    data = json.loads(out)
    [bars] = drawn
    assert len(bars) == 1 + len(data["alternatives"])
    assert bars[0][0].startswith("chosen: ")
    assert bars[0][1].peak_memory_gib == data["plan"]["peak_memory_gib"]
    assert [e.peak_memory_gib for _, e in bars[1:]] == [a["peak_memory_gib"] for a in data["alternatives"]]
    assert target.read_bytes()[:8] == plots.PNG_SIGNATURE


@pytest.mark.usefixtures("cli")
def test_validate_plot_writes_the_scatter(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "validate.png"
    code, _, err = run_cli(capsys, "validate", "--plot", str(target), "--json")
    assert code == 0, err
    assert_png(target, 12.5, 5.6)


def few_rows_of_two_gpus(path: Path) -> Path:
    """A measurement set of 3 timed seed-001 rows on each of two GPUs (a leave-one-GPU-out in ~1 s)."""
    import yaml

    rows = [m for m in all_measurements() if m.id.startswith("001-") and not m.oom and m.micro_step_time_s]
    picked = [m for gpu in ("a100-80gb", "h100-80gb") for m in [r for r in rows if r.gpu == gpu][:3]]
    measurements = [m.model_dump(mode="json", exclude_defaults=True) for m in picked]
    data = {"name": "few", "source": "seed 001 subset", "conditions": "test", "measurements": measurements}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.usefixtures("cli")
def test_validate_cv_plot_draws_the_held_out_scatter(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Issue 19: `validate --cv --plot` was refused although the synopsis shows both.
    rows = few_rows_of_two_gpus(tmp_path / "few.yaml")
    target = tmp_path / "cv.png"
    argv = ["validate", "--measurements", str(rows), "--cv", "--cv-by", "gpu", "--plot", str(target)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert_png(target, 12.5, 5.6)
    assert f"wrote {target} (held-out predictions, leave-one-GPU-out)" in " ".join(out.split())
    code, _, err = run_cli(capsys, *argv)  # the PNG now exists: refused before any fit, one line
    assert code == 2 and len(err.strip().splitlines()) == 1 and "fitting" not in err


@pytest.mark.usefixtures("cli")
@pytest.mark.parametrize(
    "argv",
    [
        ("estimate", "llama3-8b", "--gpu", "4090"),
        ("plan", "llama3-8b", "--gpu", "4090"),
        ("validate",),
        ("sweep", "llama3-8b", "--gpu", "4090", "--seq-len", "512"),
    ],
    ids=["estimate", "plan", "validate", "sweep"],
)
def test_plot_without_matplotlib_is_one_line_and_exit_2(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    target = tmp_path / "out.png"
    plan_yaml = tmp_path / "plan.yaml"
    extra = ("-o", str(plan_yaml)) if argv[0] == "plan" else ()
    code, out, err = run_cli(capsys, *argv, *extra, "--plot", str(target))
    assert code == 2
    assert err.strip().count("\n") == 0
    # app.report_error prints with rich markup, which currently swallows "[plot]"; the exception's own text
    # is checked in full by test_missing_matplotlib_raises_the_install_hint.
    assert "--plot needs matplotlib: pip install 'autotune" in err
    assert out == ""  # failed before any work
    assert not target.exists() and not plan_yaml.exists()


@pytest.mark.usefixtures("cli")
def test_plot_to_an_existing_file_is_refused_before_planning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    existing = tmp_path / "mine.png"
    existing.write_bytes(b"keep me")
    plan_yaml = tmp_path / "plan.yaml"
    code, out, err = run_cli(
        capsys, "plan", "llama3-8b", "--gpu", "4090", "-o", str(plan_yaml), "--plot", str(existing)
    )
    assert code == 2 and "already exists" in err and out == ""
    assert existing.read_bytes() == b"keep me" and not plan_yaml.exists()
