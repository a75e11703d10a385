"""``autotune plan`` over several GPU types and counts: the table, the choice, -o, and the refusals (one line, rc 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run

from autotune.cli.gpu_grid import single_count, table_path, wants_grid
from autotune.errors import InvalidRequestError
from autotune.profiles.catalog import current_gpus
from autotune.schemas.plan_io import load_plan

QUESTION = ("plan", "llama3-8b", "--gpu", "4090,a100-80gb,h100", "--num-gpus", "1,2,8", "--num-samples", "50000")
QUESTION += ("--epochs", "2", "--deadline", "24h")


def grid_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def overlaps(row: dict, other: dict, field: str) -> bool:
    """Whether two table rows' ranges (value ÷ (1 + band) to value × (1 + band)) of ``field`` overlap."""
    key = "cost" if field == "cost" else "run_time_s"
    low, high = (row[key] / (1 + row["band"]), row[key] * (1 + row["band"]))
    return low <= other[key] * (1 + other["band"]) and other[key] / (1 + other["band"]) <= high


def test_one_row_per_type_and_count_and_time_chooses_differently_from_cost(capsys: pytest.CaptureFixture[str]) -> None:
    cost = grid_json(capsys, *QUESTION, "--objective", "cost")
    cells = [(row["gpu"], row["num_gpus"]) for row in cost["rows"]]
    assert cells == [(gpu, n) for gpu in ("rtx-4090", "a100-80gb", "h100-80gb") for n in (1, 2, 8)]
    assert sum(row["chosen"] for row in cost["rows"]) == 1
    eligible = [row for row in cost["rows"] if row["meets_limits"]]
    assert all(row["run_time_s"] <= 24 * 3600 for row in eligible)
    cheapest = min(eligible, key=lambda row: row["cost"])
    tied = [row for row in eligible if overlaps(row, cheapest, "cost")]
    assert cost["chosen"]["run_time_s"] == min(row["run_time_s"] for row in tied)  # cost ties go to the faster
    assert (len(tied) > 1) == any(note.startswith("tie: the cost ranges overlap") for note in cost["notes"])
    time = grid_json(capsys, *QUESTION, "--objective", "time")
    fastest = min(eligible, key=lambda row: row["run_time_s"])
    tied = [row for row in eligible if overlaps(row, fastest, "run_time_s")]
    assert time["chosen"]["cost"] == min(row["cost"] for row in tied)  # time ties go to the cheaper
    assert (time["chosen"]["gpu"], time["chosen"]["num_gpus"]) != (cost["chosen"]["gpu"], cost["chosen"]["num_gpus"])
    plan = time["plan_file"]
    assert (plan["cluster"]["gpu"], plan["cluster"]["num_gpus_per_node"]) == (
        time["chosen"]["gpu"],
        time["chosen"]["num_gpus"],
    )
    assert "shipped list prices read 2026-09-25" in time["prices"] and time["currency"] == "USD"


def test_the_table_prints_every_row_the_choice_and_the_prices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *QUESTION, "--objective", "cost", "--price", "h100=2.49")
    assert code == 0
    for label in ("1× rtx-4090", "8× a100-80gb", "2× h100-80gb"):
        assert label in out
    assert "chosen:" in out and "--price h100-80gb=2.49" in out


def test_without_a_workload_the_table_gives_money_per_million_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    report = grid_json(capsys, "plan", "llama3-8b", "--gpu", "h100,3090", "--objective", "time")
    assert not report["whole_run"]
    h100, rtx3090 = report["rows"]
    assert h100["cost_per_million_tokens"] > 0 and rtx3090["cost_per_million_tokens"] is None
    assert "no price for rtx-3090" in rtx3090["note"]


def test_a_cell_where_nothing_fits_is_a_row_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    report = grid_json(capsys, "plan", "llama3-8b", "--gpu", "4090,h100", "--method", "full", "--objective", "time")
    rtx = report["rows"][0]
    assert not rtx["fits"] and "nothing fits on 1× rtx-4090" in rtx["note"] and rtx["cost"] is None
    assert report["chosen"]["gpu"] == "h100-80gb"


def test_any_plans_the_current_cards(capsys: pytest.CaptureFixture[str]) -> None:
    report = grid_json(capsys, "plan", "llama3-8b", "--gpu", "any", "--objective", "time")
    assert [row["gpu"] for row in report["rows"]] == [spec.key for spec in current_gpus()]


def test_output_writes_the_chosen_plan_and_the_table_beside_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "plan.yaml"
    code, out, err = run(capsys, *QUESTION, "--objective", "time", "-o", str(output))
    assert code == 0, err
    assert f"wrote {output} (the chosen row) and {table_path(output)}" in out.replace("\n", "")
    table = json.loads(table_path(output).read_text(encoding="utf-8"))
    chosen = table["chosen"]
    plan = load_plan(output)
    assert (plan.cluster.gpu, plan.cluster.num_gpus_per_node) == (chosen["gpu"], chosen["num_gpus"])
    assert len(table["rows"]) == 9 and "plan_file" not in table
    code, _, err = run(capsys, *QUESTION, "--objective", "time", "-o", str(output))
    assert code == 2 and "exists" in err


@pytest.mark.parametrize("grid", [True, False], ids=["table", "one-plan"])
def test_an_existing_output_is_refused_before_any_search(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grid: bool
) -> None:
    """``-o`` naming an existing file (or, for a table, its table file beside it) is refused in one line before the
    planner runs: the user does not wait for a search whose result could not be written."""
    import autotune.session.gpu_grid as grid_session
    import autotune.session.plan_one as plan_one

    def no_search(*_: object, **__: object) -> None:
        raise AssertionError("the planner ran before the refusal")

    monkeypatch.setattr(grid_session, "plan_table", no_search)
    monkeypatch.setattr(plan_one, "plan_prepared", no_search)
    monkeypatch.setattr("autotune.cli.plan_cmd.plan_prepared", no_search)
    output = tmp_path / "plan.yaml"
    existing = table_path(output) if grid else output
    existing.write_text("mine\n")
    question = QUESTION if grid else ("plan", "llama3-8b", "--gpu", "4090")
    code, _, err = run(capsys, *question, "-o", str(output))
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{existing} already exists" in err, err
    assert existing.read_text() == "mine\n" and (grid or not table_path(output).exists())


def test_a_single_gpu_without_table_options_is_todays_plan(capsys: pytest.CaptureFixture[str]) -> None:
    single = grid_json(capsys, "plan", "llama3-8b", "--gpu", "h100", "--num-gpus", "2")
    assert "rows" not in single and single["plan_file"]["cluster"]["num_gpus_per_node"] == 2
    assert not wants_grid("h100", "2", "quality", None, None, None)
    assert wants_grid("h100", "2", "cost", None, None, None) and wants_grid("any", "1", "speed", None, None, None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpu", "4090,h10x"), "unknown GPU 'h10x': closest are h100-80gb"),
        (("--gpu", "4090,h100", "--price", "h100=-1"), "--price 'h100=-1': the price must be a positive number"),
        (("--gpu", "4090,h100", "--price", "h10x=2"), "--price 'h10x=2': unknown GPU 'h10x'"),
        (("--gpu", "4090,h100", "--num-samples", "50000", "--deadline", "12x"), "--deadline '12x': give a number"),
        (("--gpu", "4090,h100", "--num-samples", "50000", "--deadline", "1h"), "the fastest is 1× h100-80gb at"),
        (("--gpu", "4090,h100", "--num-samples", "50000", "--budget", "1"), "the cheapest is 1× rtx-4090 at"),
        (
            ("--gpu", "4090,h100", "--budget", "0", "--num-samples", "9"),
            "--budget 0: the budget must be a positive amount",
        ),
        (("--gpu", "4090,h100", "--deadline", "12h"), "need the run's size"),
        (("--gpu", "4090,h100", "--num-gpus", "1,0"), "--num-gpus '1,0': give whole numbers"),
        (("--gpu", "4090,h100", "--objective", "cheap"), "--objective 'cheap': choose one of"),
        (("--gpu", "4090,h100", "--plot", "x.png"), "--plot and --verify take one GPU type"),
        (("--gpu", "4090,h100", "--lora-rank", "0"), "error: --lora-rank: Input should be greater than or equal to 1"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    output = tmp_path / "plan.yaml"
    code, out, err = run(capsys, "plan", "llama3-8b", *args, "-o", str(output))
    assert code == 2 and message in err, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_count_parses_and_launch_refuses_a_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert single_count(" 2") == 2
    with pytest.raises(InvalidRequestError, match="Invalid value for '--num-gpus'"):
        single_count("2x")
    launch = ("launch", "llama3-8b", "--dataset", "d.jsonl", "--output-dir", str(tmp_path / "run"), "--dry-run")
    for table_option in (("--gpu", "4090,h100"), ("--gpu", "h100", "--deadline", "12h")):
        code, _, err = run(capsys, *launch, *table_option)
        assert code == 2 and "launch runs one GPU type and count" in err, err


def test_the_8b_cost_grid_prints_the_tie_its_rule_and_the_token_assumption(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "llama3-8b", "--gpu", "4090,a100-80gb,h100", "--num-gpus", "1", "--num-samples", "50000")
    code, out, err = run(capsys, *args, "--epochs", "2", "--objective", "cost")
    assert code == 0, err
    text = " ".join(out.split())
    assert "tie: the cost ranges overlap within the model's ± band" in text
    assert "cost ties go to the faster row" in text
    assert "--num-samples 50,000 is taken as 50,000 × seq_len 2048 = 102,400,000 tokens per epoch" in text
    assert "--dataset FILE" in text and "--dataset-tokens N" in text


def test_a_single_plan_states_what_num_samples_assumes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--num-samples", "1000", "--seq-len", "1024")
    assert code == 0, err
    assert "--num-samples 1,000 is taken as 1,000 × seq_len 1024 = 1,024,000 tokens" in " ".join((out + err).split())
    code, out, err = run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--dataset-tokens", "1000000")
    assert code == 0 and "--num-samples" not in out + err


def test_the_70b_qlora_cost_grid_prints_the_tie_and_its_rule(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "llama3-70b", "--gpu", "4090,a100-80gb", "--num-gpus", "8", "--method", "qlora")
    report = grid_json(capsys, *args, "--num-samples", "50000", "--epochs", "2", "--objective", "cost")
    cheapest = min(report["rows"], key=lambda row: row["cost"])
    tied = [row for row in report["rows"] if overlaps(row, cheapest, "cost")]
    assert len(tied) == 2 and report["chosen"]["run_time_s"] == min(row["run_time_s"] for row in tied)
    tie = next(note for note in report["notes"] if note.startswith("tie:"))
    chosen = report["chosen"]
    assert "cost ties go to the faster row" in tie and (chosen["gpu"], chosen["num_gpus"]) != (
        cheapest["gpu"],
        cheapest["num_gpus"],
    )
    assert f"{chosen['num_gpus']}× {chosen['gpu']} instead of {cheapest['num_gpus']}× {cheapest['gpu']}" in tie
    assert not any(note.startswith("method:") for note in report["notes"])  # --method qlora was asked
