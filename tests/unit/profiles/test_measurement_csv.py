"""CSV rows → measurements (autotune.profiles.measurement_csv): every setting column, the model column's forms
(catalog name, config.json, model directory, .gguf; relative paths from the CSV's folder), comment lines and
the template that the reader takes back."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_files import GGUF_LAYERS, config_with_layers, tiny_gguf

from autotune.errors import ConfigError
from autotune.profiles.csv_template import column_legend, csv_template
from autotune.profiles.measurement_csv import CSV_COLUMNS, CSV_REQUIRED, runs_from_csv
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import FilledBatches, PaddedBatches, Workload

"""A Llama 3.2 1B config.json (tests/fixtures/configs/README.md)."""

HEADER = "model,gpu,method,seq_len,micro_batch_size,grad_accum,micro_step_time_s\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- the setting columns -------------------------------------------------------------------------


def test_every_setting_field_is_a_column() -> None:
    assert set(TrainingSetting.model_fields) <= set(CSV_COLUMNS)
    assert "tokens_per_sample" in CSV_COLUMNS and len(set(CSV_COLUMNS)) == len(CSV_COLUMNS)


def test_new_columns_reach_the_measurement_setting_and_workload(tmp_path: Path) -> None:
    values = {
        "compile": ("true", True),
        "lora_alpha": ("8", 8.0),
        "lora_dropout": ("0.05", 0.05),
        "adapter_dtype": ("fp32", "fp32"),
        "lora_targets": ("q_proj; v_proj", ("q_proj", "v_proj")),
        "loss_impl": ("chunked", "chunked"),
        "attention_impl": ("eager", "eager"),
        "grad_sync": ("every-micro-step", "every-micro-step"),
        "kernels": ("liger", "liger"),
        "qlora_double_quant": ("false", False),
        "unquantized_dtype": ("fp32", "fp32"),
        "optimizer": ("paged-adamw-8bit", "paged-adamw-8bit"),
        "lora_rank": ("64", 64),
    }
    header = "model,gpu,num_gpus,method,seq_len,sharding,micro_batch_size,grad_accum,tokens_per_sample,"
    row = "llama3.1-8b,h100,2,qlora,2048,fsdp,2,4,700,"
    path = write(
        tmp_path / "runs.csv",
        header + ",".join(values) + "\n" + row + ",".join(cell for cell, _ in values.values()) + "\n",
    )
    (run,) = runs_from_csv(path)
    setting, workload = run.measurement.setting, run.measurement.workload
    for name, (_, expected) in values.items():
        assert getattr(setting, name) == expected, name
    assert (setting.method, setting.sharding, setting.micro_batch_size, setting.grad_accum) == ("qlora", "fsdp", 2, 4)
    assert workload.batches == PaddedBatches(tokens_per_sample=700) and workload.tokens_per_sequence == 700
    assert workload.global_batch_size == 2 * 4 * 2 and run.measurement.num_gpus_per_node == 2


def test_columns_left_out_take_the_settings_defaults(tmp_path: Path) -> None:
    (run,) = runs_from_csv(write(tmp_path / "runs.csv", "model,gpu,method,seq_len\nllama3.1-8b,h100,lora,1024\n"))
    defaults = TrainingSetting()
    for name in TrainingSetting.model_fields:
        if name not in ("method", "sharding", "precision"):  # the row's own, and the two defaults given by the GPUs
            assert getattr(run.measurement.setting, name) == getattr(defaults, name), name
    assert run.measurement.workload.batches == Workload().batches == FilledBatches()


BASE, ROW = "model,gpu,method,seq_len", "llama3.1-8b,h100,lora,1024"
"""The required columns, and a row of them."""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{BASE},micro_batch\n{ROW},2\n", r"unknown column 'micro_batch' \(did you mean 'micro_batch_size'\?"),
        (f"{BASE},lora_target\n{ROW},q_proj\n", r"did you mean 'lora_targets'\?"),
        (f'{BASE},lora_targets\n{ROW},"q_proj,v_proj"\n', r"column lora_targets: .*';'"),
        (f"{BASE},attention_impl\n{ROW},flash3\n", r"column attention_impl:"),
        (f"{BASE},lora_dropout\n{ROW},1.5\n", r"column lora_dropout:"),
        (f"{BASE},tokens_per_sample\n{ROW},2000\n", r"column tokens_per_sample: 2000 is more than seq_len 1024"),
        (f"{BASE},tokens_per_sample\n{ROW},0\n", r"column tokens_per_sample:"),
        (f"{BASE},compile,compile\n{ROW},true,false\n", r"compile given more than once"),
        (f"{BASE}\nmissing/config.json,h100,lora,1024\n", r"row 1 \(line 2\), column model: .*config.json"),
    ],
)
def test_bad_cells_name_the_column(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "runs.csv", text)
    with pytest.raises(ConfigError, match=expected) as error:
        runs_from_csv(path)
    assert "\n" not in str(error.value)


def test_comment_lines_are_skipped_and_lines_still_counted(tmp_path: Path) -> None:
    text = "# measured on our cluster\n" + HEADER + "# a run we dropped\nllama3.1-8b,h100,lora,1024,2,8,long\n"
    with pytest.raises(ConfigError, match=r"row 1 \(line 4\), column micro_step_time_s"):
        runs_from_csv(write(tmp_path / "runs.csv", text))
    fixed = text.replace("long", "0.5")
    (run,) = runs_from_csv(write(tmp_path / "runs.csv", fixed))
    assert run.measurement.micro_step_time_s == 0.5


# --- rows that repeat a setting ---------------------------------------------------------------------


REPEATED = "id,model,gpu,method,seq_len,micro_batch_size,grad_accum,peak_memory_gib,memory_kind,micro_step_time_s,oom\n"


def test_rows_that_repeat_a_setting_share_it_and_keep_their_own_measurements(tmp_path: Path) -> None:
    text = REPEATED + ",llama3.1-8b,h100,lora,1024,2,8,20,allocated,0.5,\nb,llama3.1-8b,h100,lora,1024,2,8,,,0.7,\n"
    text += ",llama3.1-8b,h100,lora,1024,2,8,,,,true\n,llama3.1-8b,h100,lora,2048,2,8,,,0.9,\n"
    first, second, oom, other = (run.measurement for run in runs_from_csv(write(tmp_path / "runs.csv", text)))
    assert second.setting is first.setting and second.workload is first.workload and other.setting is not first.setting
    assert (first.id, first.peak_memory_gib, first.memory_kind, first.micro_step_time_s) == (
        "runs-row1",
        20,
        "allocated",
        0.5,
    )
    assert (second.id, second.peak_memory_gib, second.memory_kind, second.micro_step_time_s) == (
        "b",
        None,
        "unknown",
        0.7,
    )
    assert (oom.id, oom.oom, oom.micro_step_time_s, oom.source) == (
        "runs-row3",
        True,
        None,
        f"{tmp_path / 'runs.csv'} row 3",
    )
    assert other.workload.seq_len == 2048


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ("8,,0.5,", r"row 2 \(line 3\), column memory_kind: required with peak_memory_gib"),
        (",,0.5,true", r"row 2 \(line 3\), column oom: an OOM row has no"),
        (",,-1,", r"row 2 \(line 3\), column micro_step_time_s:"),
        ("9000,allocated,0.5,", r"row 2 \(line 3\), column peak_memory_gib:"),
    ],
)
def test_a_repeated_setting_row_with_a_bad_measurement_names_its_column(
    tmp_path: Path, cells: str, expected: str
) -> None:
    text = REPEATED + ",llama3.1-8b,h100,lora,1024,2,8,,,0.5,\n" + f",llama3.1-8b,h100,lora,1024,2,8,{cells}\n"
    with pytest.raises(ConfigError, match=expected) as error:
        runs_from_csv(write(tmp_path / "runs.csv", text))
    assert "\n" not in str(error.value)


# --- the model column ------------------------------------------------------------------------------


def test_catalog_model_keeps_the_catalog_key(tmp_path: Path) -> None:
    text = HEADER + "meta-llama/Llama-3.2-1B,h100,lora,1024,2,8,0.5\n"
    (run,) = runs_from_csv(write(tmp_path / "runs.csv", text))
    assert run.measurement.model == "llama3.2-1b" == run.model.key and run.model.num_hidden_layers == 16


@pytest.mark.parametrize("form", ["config.json", "directory", "gguf"])
def test_model_given_as_a_file_or_directory_gives_its_shapes(tmp_path: Path, form: str) -> None:
    if form == "gguf":
        target, layers = tiny_gguf(tmp_path / "tiny.gguf"), GGUF_LAYERS
    else:
        folder, layers = config_with_layers(tmp_path / "my-llama", 4), 4
        target = folder / "config.json" if form == "config.json" else folder
    text = HEADER + f"{target},h100,lora,1024,2,8,0.05\n"
    (run,) = runs_from_csv(write(tmp_path / "runs.csv", text))
    assert run.model.num_hidden_layers == layers
    assert run.measurement.model == str(target.resolve())


def test_relative_model_path_is_read_from_the_csv_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_with_layers(tmp_path / "data" / "models" / "my-llama", 4)
    tiny_gguf(tmp_path / "data" / "models" / "tiny.gguf")
    csv_file = write(
        tmp_path / "data" / "runs.csv",
        HEADER
        + "models/my-llama,h100,lora,1024,2,8,0.05\n"
        + "models/my-llama/config.json,h100,lora,1024,2,8,0.05\n"
        + "./models/tiny.gguf,h100,lora,1024,2,8,0.05\n",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    first, second, third = runs_from_csv(Path("..") / "data" / "runs.csv")
    models = tmp_path / "data" / "models"
    assert first.measurement.model == str((models / "my-llama").resolve()) and first.model.num_hidden_layers == 4
    assert second.measurement.model == str((models / "my-llama" / "config.json").resolve())
    assert third.measurement.model == str((models / "tiny.gguf").resolve()) and third.model.num_hidden_layers == 2
    assert runs_from_csv(csv_file)[0].model == first.model


# --- the template ----------------------------------------------------------------------------------


def test_template_names_every_column_with_its_values_and_default() -> None:
    lines = csv_template().splitlines()
    assert lines[-1].split(",") == list(CSV_COLUMNS)
    legend = [line for line in lines if line.startswith("# ")]
    for column in CSV_COLUMNS:
        assert f"# {column_legend(column)}" in legend
    assert any(line.startswith("# method: full|lora|qlora (required) — ") for line in legend)
    assert column_legend("lora_alpha").startswith("lora_alpha: number > 0 (default 32)")
    assert column_legend("attention_impl").startswith("attention_impl: sdpa|flash_attention_2|eager|")
    assert column_legend("compile").startswith("compile: true|false (default false)")
    assert column_legend("lora_targets").startswith("lora_targets: names separated by ';'")
    assert column_legend("peak_memory_gib").startswith("peak_memory_gib: number > 0, <= 1024 (may be empty)")
    assert all(
        f"{column}: " in column_legend(column) and "(required)" in column_legend(column) for column in CSV_REQUIRED
    )


def test_template_round_trips(tmp_path: Path) -> None:
    path = write(tmp_path / "template.csv", csv_template())
    assert runs_from_csv(path) == []
    cells = dict.fromkeys(CSV_COLUMNS, "")
    cells.update(model="llama3.1-8b", gpu="h100", method="lora", seq_len="2048", lora_targets="q_proj;v_proj")
    cells.update(micro_step_time_s="0.8", compile="true")
    with path.open("a", encoding="utf-8") as file:
        file.write(",".join(cells[column] for column in CSV_COLUMNS) + "\n")
    (run,) = runs_from_csv(path)
    assert run.measurement.setting.lora_targets == ("q_proj", "v_proj") and run.measurement.setting.compile
    assert run.measurement.micro_step_time_s == 0.8
