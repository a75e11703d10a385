"""``autotune sweep``: the planner per method × sequence length, its table / JSON / plot, and bad lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run as run_cli
from plan_requests import plan_request

from autotune.cli import plot_data, plot_sweep, plots, sweep_cmd
from autotune.errors import InfeasibleError, InvalidRequestError
from autotune.planner.request import PlanRequest
from autotune.planner.search import search
from autotune.planner.sweep import SweepResult, sweep

SEQ_LENS = [512, 1024, 2048, 4096, 8192]
METHODS = ["full", "lora", "qlora"]


def factory(model: str, gpu: str, num_gpus: int = 1, **options: object):
    def make(method: str, seq_len: int) -> PlanRequest:  # the global batch stated, as ``autotune sweep`` does
        values = {"global_batch_size": 32, **options}
        request, _ = plan_request(model=model, gpu=gpu, num_gpus=num_gpus, seq_len=seq_len, method=method, **values)
        return request

    return make


ON_ONE_WORKER = pytest.mark.xdist_group("test_sweep::llama_on_4090")
"""The tests of :func:`llama_on_4090` run on one pytest-xdist worker: its sweep (~10 s) is built once per session."""


@pytest.fixture(scope="module")
def llama_on_4090() -> SweepResult:
    """llama3-8b on one RTX 4090: full fine-tuning never fits, LoRA and QLoRA do at short lengths."""
    return sweep(factory("llama3-8b", "4090"), METHODS, SEQ_LENS)


@pytest.mark.parametrize(
    ("model", "gpu", "num_gpus"),
    [("llama3-8b", "4090", 1), ("qwen2.5-0.5b", "4090", 1), ("llama2-13b", "a100-80gb", 4)],
)
def test_lowest_memory_grows_with_seq_len_and_feasibility_only_shrinks(model: str, gpu: str, num_gpus: int) -> None:
    # With objective=memory the best setting is the lowest peak among those that fit, which must not fall
    # when sequences get longer (every setting needs at least as much memory for longer sequences).
    lens = [*SEQ_LENS, 16384]
    result = sweep(factory(model, gpu, num_gpus, objective="memory"), METHODS, lens)
    assert result.seq_lens == tuple(lens)
    for method in METHODS:
        cells = result.for_method(method)
        peaks = [c.estimate.peak_memory_gib for c in cells if c.estimate is not None]
        assert peaks == sorted(peaks)
        assert len(set(peaks)) == len(peaks)  # strictly: activations and logits scale with seq_len
        statuses = [c.status for c in cells]
        first_infeasible = statuses.index("infeasible") if "infeasible" in statuses else len(statuses)
        assert all(s == "fits" for s in statuses[:first_infeasible])
        assert all(s == "infeasible" for s in statuses[first_infeasible:])


@ON_ONE_WORKER
def test_each_cell_is_the_planner_answer_with_the_method_forced(llama_on_4090: SweepResult) -> None:
    make = factory("llama3-8b", "4090")
    for cell in llama_on_4090.cells:
        request = make(cell.method, cell.seq_len)
        if cell.fits:
            best = search(request).best
            assert cell.setting == best.setting and cell.setting.method == cell.method
            assert cell.estimate == best.estimate and cell.estimate.fits
        else:
            with pytest.raises(InfeasibleError) as error:
                search(request)
            assert cell.reason == str(error.value)


@ON_ONE_WORKER
def test_infeasible_cells_say_what_is_short(llama_on_4090: SweepResult) -> None:
    full = llama_on_4090.for_method("full")
    assert [c.status for c in full] == ["infeasible"] * len(SEQ_LENS)  # 8B × 16 bytes/param ≫ 24 GiB
    host = llama_on_4090.host_memory_gib_per_node
    for cell in full:
        assert cell.reason and cell.reason.startswith("nothing fits on 1× rtx-4090")
        assert cell.short_reason and cell.as_dict()["short_reason"] == cell.short_reason
        assert cell.closest_setting is not None and cell.closest_setting.method == "full"
        assert cell.closest_need_gib is not None and cell.closest_short_of
        if "GPU memory" in cell.closest_short_of:
            assert cell.closest_need_gib > llama_on_4090.gpu_memory_gib
            assert f"needs {cell.closest_need_gib:.1f} GiB/GPU > 24 GiB" in cell.short_reason
        else:
            assert cell.closest_need_gib <= llama_on_4090.gpu_memory_gib
        if "host RAM" in cell.closest_short_of:
            assert host is not None and f"> {host:.0f} GiB" in cell.short_reason


def test_unsupported_method_is_its_own_status() -> None:
    result = sweep(factory("llama3-8b", "rx-7900-xtx"), ["lora", "qlora"], [1024])
    qlora = result.cell("qlora", 1024)
    assert qlora.status == "unsupported" and not qlora.fits
    assert qlora.short_reason is not None and "bitsandbytes" in qlora.short_reason
    assert result.cell("lora", 1024).fits


def test_sweep_orders_lengths_and_drops_repeats() -> None:
    result = sweep(factory("qwen2.5-0.5b", "4090"), ["lora", "lora"], [2048, 512, 2048])
    assert result.methods == ("lora",) and result.seq_lens == (512, 2048)
    assert [c.seq_len for c in result.cells] == [512, 2048]
    with pytest.raises(InvalidRequestError):
        sweep(factory("qwen2.5-0.5b", "4090"), [], [512])


@ON_ONE_WORKER
def test_plot_series_follow_the_cells(llama_on_4090: SweepResult, tmp_path: Path) -> None:
    series = {s.method: s for s in plot_data.sweep_series(llama_on_4090)}
    for method in METHODS:
        for i, cell in enumerate(llama_on_4090.for_method(method)):
            s = series[method]
            assert s.seq_lens[i] == cell.seq_len
            assert s.tokens_per_s[i] == (cell.estimate.tokens_per_s if cell.estimate else None)
            assert s.peak_memory_gib[i] == (cell.estimate.peak_memory_gib if cell.estimate else None)
            assert s.closest_need_gib[i] == cell.closest_need_gib
    path = plot_sweep.sweep_png(llama_on_4090, tmp_path / "sweep.png")
    import matplotlib.image

    assert path.read_bytes()[:8] == plots.PNG_SIGNATURE
    assert matplotlib.image.imread(path).shape[:2] == (round(5.0 * plots.DPI), round(12.5 * plots.DPI))


# --- the command ----------------------------------------------------------------------------------------


@pytest.fixture
def cli() -> None:
    """The real ``autotune`` app (it imports a command's module only when that command runs)."""


@pytest.mark.usefixtures("cli")
def test_json_structure(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        capsys, "sweep", "llama3-8b", "--gpu", "4090", "--seq-len", "2048,512", "--methods", "full,qlora", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == "llama3-8b" and data["gpu"] == "rtx-4090" and data["gpu_memory_gib"] == 24
    assert data["methods"] == ["full", "qlora"] and data["seq_lens"] == [512, 2048]
    assert [(c["method"], c["seq_len"]) for c in data["cells"]] == [
        ("full", 512), ("full", 2048), ("qlora", 512), ("qlora", 2048)
    ]  # fmt: skip
    assert isinstance(data["notes"], list) and data["plot"] is None
    for cell in data["cells"]:
        assert cell["fits"] == (cell["status"] == "fits")
        if cell["fits"]:
            assert cell["setting"]["method"] == cell["method"]
            assert cell["peak_memory_gib"] > 0 and cell["tokens_per_s"] > 0
            assert cell["gpu_memory_need_gib"] <= data["gpu_memory_gib"]
            assert cell["reason"] is None
        else:
            assert cell["setting"] is None and cell["peak_memory_gib"] is None and cell["tokens_per_s"] is None
            assert cell["reason"] and cell["short_reason"]
    assert {c["method"]: c["fits"] for c in data["cells"] if c["seq_len"] == 512} == {"full": False, "qlora": True}


@pytest.mark.usefixtures("cli")
def test_table_has_a_row_per_length_and_a_column_per_method(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "sweep.png"
    code, out, err = run_cli(
        capsys, "sweep", "llama3-8b", "--gpu", "4090", "--seq-len", "512,4096", "--plot", str(target)
    )
    assert code == 0, err
    header = next(line for line in out.splitlines() if "seq_len" in line)
    assert [m for m in METHODS if m in header] == METHODS
    assert any(line.strip("│ ").startswith("512") for line in out.splitlines())
    assert any(line.strip("│ ").startswith("4096") for line in out.splitlines())
    assert "✗ needs" in out and "✓" in out
    assert target.read_bytes()[:8] == plots.PNG_SIGNATURE


@pytest.mark.usefixtures("cli")
@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--seq-len", "512,abc", "--seq-len: 'abc' is not a positive integer"),
        ("--seq-len", "512,,1024", "--seq-len: '' is not a positive integer"),
        ("--seq-len", "0,512", "--seq-len: '0' is not a positive integer"),
        ("--seq-len", "-512", "--seq-len: '-512' is not a positive integer"),
        ("--seq-len", "1.5k", "--seq-len: '1.5k' is not a positive integer"),
        ("--seq-len", ",", "--seq-len: give a comma-separated list"),
        ("--seq-len", "4,512", "--seq-len: Input should be greater than or equal to 8"),
        ("--methods", "full,dora", "--methods: 'dora' is not one of full, lora, qlora"),
        ("--methods", "", "--methods: '' is not one of full, lora, qlora"),
    ],
)
def test_bad_list_values_are_one_line_and_exit_2(
    option: str, value: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "sweep", "llama3-8b", "--gpu", "4090", option, value)
    assert code == 2
    assert out == ""
    assert err.strip().count("\n") == 0
    assert expected in err


def test_parse_int_list_keeps_the_values() -> None:
    assert sweep_cmd.parse_int_list(" 512, 1024 ,2048", "--seq-len") == [512, 1024, 2048]
    assert sweep_cmd.parse_methods("qlora, full,qlora") == ["qlora", "full"]


@ON_ONE_WORKER
def test_gpu_memory_need_is_what_fits_compares(llama_on_4090: SweepResult) -> None:
    for cell in llama_on_4090.cells:
        if cell.estimate is not None:
            e = cell.estimate
            assert e.gpu_memory_need_gib <= e.gpu_memory_gib  # the same sum Estimate.fits compares
