"""The shipped measurement files: they validate, and every row matches the seed table it was copied from.

The seed-comparison tests parse the seed text shipped in docs/sources/seeds on their own, independently of the
YAML; the MPT rows are compared with the development data shipped in docs/sources/llm-foundry-mpt.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune.errors import ConfigError
from autotune.profiles.measurements import (
    all_measurements,
    list_measurement_sets,
    load_measurement_set,
    measurement_models,
)
from autotune.schemas.calibration import Measurement, MeasurementSet
from autotune.schemas.workload import FilledBatches

SOURCES = Path(__file__).resolve().parents[2] / "docs" / "sources"
SEEDS = SOURCES / "seeds"

# Catalog keys as agreed in the task (the catalog YAMLs are written in parallel, so not imported).
MODEL_KEYS = {
    "llama3.1-8b", "llama3-8b", "llama3.1-70b", "llama2-13b", "gemma2-9b", "gemma-7b", "phi3-mini",
    "llama-7b", "llama-13b", "llama-30b", "llama-65b",
}  # fmt: skip
GPU_KEYS = {"h100-80gb", "rtx-pro-6000", "a100-80gb", "rtx-4090", "rtx-3090", "rx-7900-xtx"}

EXPECTED_SETS = {
    "seed-000-torchtune",
    "seed-001-a100",
    "seed-001-h100",
    "seed-001-rtx-pro-6000",
    "seed-003-fsdp-deepspeed",
    "dev-mpt-llm-foundry",
    "autotune-core-h100",  # the project's own training core (tools/ingest_core_runs.py)
}
DEV_DATA = SOURCES / "llm-foundry-mpt"

SEED_001 = "001_351ee1f9e626a6ae.txt"
SEED_000 = "000_98146d43712cfae9.txt"
SEED_003 = "003_51edbf0898b4ad92.txt"

MODEL_NAMES_001 = {
    "Llama 3.1 8B": "llama3.1-8b",
    "Llama 3 8B": "llama3-8b",
    "Llama 3.1 70B": "llama3.1-70b",
    "Llama 2 13B": "llama2-13b",
    "Gemma 2 9B": "gemma2-9b",
    "Gemma 7B": "gemma-7b",
    "Phi3-mini (3.8B)": "phi3-mini",
}
GPU_HEADINGS_001 = {
    "1. NVIDIA H100": ("seed-001-h100", "h100-80gb"),
    "2. NVIDIA RTX Pro 6000": ("seed-001-rtx-pro-6000", "rtx-pro-6000"),
    "3. NVIDIA A100": ("seed-001-a100", "a100-80gb"),
}
MODEL_NAMES_003 = {
    "LLaMA-7B": "llama-7b",
    "LLaMA-13B": "llama-13b",
    "LLaMA-30B": "llama-30b",
    "LLaMA-65B": "llama-65b",
}
SHARDING_003 = {
    "FSDP": "fsdp",
    "FSDP + offload": "fsdp-offload",
    "Deepspeed + Zero 3 + Offload": "zero3-offload",
}


def _sets() -> dict[str, MeasurementSet]:
    return {measurement_set.name: measurement_set for measurement_set in list_measurement_sets()}


def _row_number(measurement: Measurement, word: str) -> int:
    match = re.search(rf"\b{word} (\d+)\b", measurement.source)
    assert match, f"{measurement.id}: source {measurement.source!r} names no {word} number"
    return int(match.group(1))


def _markdown_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _hms_s(text: str) -> float:
    hours, minutes, seconds = (int(part) for part in text.split(":"))
    return float(hours * 3600 + minutes * 60 + seconds)


# ----------------------------------------------------------------------------------------- every file


def test_every_shipped_file_is_a_valid_set_named_after_its_file() -> None:
    directory = resources.files("autotune.profiles").joinpath("measurements")
    stems = {entry.name.removesuffix(".yaml") for entry in directory.iterdir() if entry.name.endswith(".yaml")}
    assert stems == EXPECTED_SETS
    assert set(_sets()) == EXPECTED_SETS
    for measurement_set in list_measurement_sets():
        assert measurement_set.measurements, measurement_set.name
        assert measurement_set.source and measurement_set.conditions


def _is_dev(row: Measurement) -> bool:
    return row.source.startswith("llm-foundry-mpt.jsonl")


def test_row_ids_are_unique_and_keys_are_catalog_keys() -> None:
    rows = all_measurements()
    ids = [row.id for row in rows]
    assert len(ids) == len(set(ids)), [row_id for row_id in ids if ids.count(row_id) > 1]
    dev_models = measurement_models()
    for row in rows:
        if _is_dev(row):
            assert row.model in dev_models and row.gpu in {"a100-40gb", "a100-80gb", "h100-80gb"}, row.id
            assert row.id.startswith("MF-"), row.id
            continue
        assert row.model in MODEL_KEYS, row.id
        assert row.gpu in GPU_KEYS, row.id
        prefix = "core-h100-" if row.source.startswith("autotune-core-h100: ") else row.source[:3] + "-"
        assert row.id.startswith(prefix), row.id


def test_oom_rows_carry_no_memory_or_time() -> None:
    oom_rows = [row for row in all_measurements() if row.oom]
    assert oom_rows
    for row in oom_rows:
        assert row.peak_memory_gib is None, row.id
        assert row.micro_step_time_s is None and row.step_time_s is None and row.run_time_s is None, row.id


def test_global_batch_is_micro_times_accumulation_times_gpus() -> None:
    for row in all_measurements():
        expected = row.setting.micro_batch_size * row.setting.grad_accum * row.num_gpus_per_node * row.num_nodes
        assert row.workload.global_batch_size == expected, row.id


def test_every_assumption_row_has_notes() -> None:
    for row in all_measurements():
        assert row.notes.strip(), row.id


def test_mpt_rows_match_the_development_data() -> None:
    import json

    source = {
        row["id"]: row for row in map(json.loads, (DEV_DATA / "llm-foundry-mpt.jsonl").read_text().splitlines()) if row
    }
    dev = [row for row in all_measurements() if _is_dev(row)]
    assert len(dev) == len(source) == 95
    for row in dev:
        original = source[row.id.split("-")[0] + "-" + row.id.split("-")[1]]
        assert row.step_time_s == original["derived"]["step_time_s"]
        assert row.workload.seq_len == original["seq_len"]
        assert row.setting.micro_batch_size == original["micro_batch_size"]
        assert row.setting.grad_accum == original["grad_accum"]
        assert row.setting.grad_ckpt == original["grad_ckpt"]
        assert row.num_gpus_per_node * row.num_nodes == original["num_gpus"]
        assert row.gpu == original["gpu"]


# ----------------------------------------------------------------------------------------- seed 001


def _tables_001() -> dict[str, list[list[str]]]:
    text = (SEEDS / SEED_001).read_text()
    tables: dict[str, list[list[str]]] = {}
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        heading = section.splitlines()[0].strip()
        tables[heading] = [_markdown_cells(line) for line in section.splitlines() if line.startswith("| [")]
    return tables


def test_001_every_row_matches_its_seed_row() -> None:
    sets = _sets()
    tables = _tables_001()
    assert set(tables) == set(GPU_HEADINGS_001)
    for heading, seed_rows in tables.items():
        set_name, gpu_key = GPU_HEADINGS_001[heading]
        rows = sets[set_name].measurements
        assert len(rows) == len(seed_rows) == 19, heading
        assert sorted(_row_number(row, "row") for row in rows) == list(range(1, len(seed_rows) + 1))
        for row in rows:
            assert SEED_001 in row.source and heading in row.source
            name_cell, method_cell, gpu_cell, memory_cell, seconds_cell = seed_rows[_row_number(row, "row") - 1]
            model_text = re.match(r"\[(.*?)\]", name_cell).group(1)  # type: ignore[union-attr]
            marker = name_cell.rsplit(")", 1)[-1].strip()
            assert row.model == MODEL_NAMES_001[model_text], row.id
            assert row.gpu == gpu_key
            assert row.setting.method == {"Full": "full", "LoRA": "lora", "QLoRA": "qlora"}[method_cell]
            assert (marker == "**") == (row.setting.method == "qlora"), row.id
            assert row.num_gpus_per_node == int(gpu_cell.rsplit("x", 1)[1])
            assert row.setting.sharding == ("fsdp-offload" if marker == "*" else "none"), row.id
            full_unsharded = row.setting.method == "full" and marker != "*"
            assert row.setting.grad_accum == (1 if full_unsharded else 32), row.id
            assert row.setting.micro_batch_size == 2 and row.workload.seq_len == 8192
            assert row.workload.batches == FilledBatches() and row.setting.grad_ckpt
            peak_text, model_memory_text = re.match(r"(\S+(?: GiB)?) \((.*)\)", memory_cell).groups()  # type: ignore[union-attr]
            assert row.oom == (peak_text == "OOM") == (seconds_cell == "OOM"), row.id
            if not row.oom:
                assert row.peak_memory_gib == float(peak_text.split()[0]), row.id
                assert row.micro_step_time_s == float(seconds_cell), row.id
                assert row.memory_kind == "reserved"
            if model_memory_text == "CPU Offload":
                assert row.weights_memory_gib is None, row.id
            else:
                assert row.weights_memory_gib == float(model_memory_text.split()[0]), row.id
            if row.setting.uses_adapters:
                assert row.setting.lora_rank == 8 and row.setting.lora_alpha == 16
                assert row.setting.lora_targets == ("all-linear",)


def test_001_duplicated_llama3_rows_are_kept_and_noted() -> None:
    for set_name, _gpu in GPU_HEADINGS_001.values():
        rows = _sets()[set_name].measurements
        by_model = {(row.model, row.setting.method): row for row in rows}
        for method in ("full", "lora", "qlora"):
            twin_31, twin_3 = by_model[("llama3.1-8b", method)], by_model[("llama3-8b", method)]
            assert (twin_3.peak_memory_gib, twin_3.micro_step_time_s, twin_3.weights_memory_gib) == (
                twin_31.peak_memory_gib,
                twin_31.micro_step_time_s,
                twin_31.weights_memory_gib,
            )
            assert "Duplicated numbers" in twin_3.notes


def test_001_spot_checks_against_seed_lines() -> None:
    text = (SEEDS / SEED_001).read_text()
    sets = _sets()
    h100 = {row.id: row for row in sets["seed-001-h100"].measurements}
    a100 = {row.id: row for row in sets["seed-001-a100"].measurements}
    pro = {row.id: row for row in sets["seed-001-rtx-pro-6000"].measurements}
    assert "| QLoRA  | H100 x 1  | OOM (8.4 GiB)         | OOM    |" in text
    gemma2_qlora = h100["001-h100-80gb-gemma2-9b-qlora"]
    assert gemma2_qlora.oom and gemma2_qlora.weights_memory_gib == 8.4
    assert "| LoRA   | A100 x 2  | 65 GiB (CPU Offload)      |  84.1   |" in text
    llama70b = a100["001-a100-80gb-llama3.1-70b-lora"]
    assert (llama70b.peak_memory_gib, llama70b.micro_step_time_s, llama70b.num_gpus_per_node) == (
        65.0,
        84.1,
        2,
    )
    assert llama70b.setting.sharding == "fsdp-offload" and llama70b.weights_memory_gib is None
    assert "| QLoRA  | Pro 6000 x 1  | 89 GiB (8.2 GiB)      | 40.3    |" in text
    pro_gemma2 = pro["001-rtx-pro-6000-gemma2-9b-qlora"]
    assert (pro_gemma2.peak_memory_gib, pro_gemma2.weights_memory_gib, pro_gemma2.micro_step_time_s) == (
        89,
        8.2,
        40.3,
    )
    assert pro_gemma2.setting.unquantized_dtype == "fp32" and pro_gemma2.setting.qlora_double_quant


def test_001_conditions_copy_the_note_block_verbatim() -> None:
    text = (SEEDS / SEED_001).read_text()
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    for section in sections:
        set_name = GPU_HEADINGS_001[section.splitlines()[0].strip()][0]
        conditions = _sets()[set_name].conditions
        for line in section.splitlines():
            if line.startswith((">", "*:", "**:")):
                assert line.rstrip() in conditions, (set_name, line)


# ----------------------------------------------------------------------------------------- seed 003


def _rows_003() -> list[list[str]]:
    lines = (SEEDS / SEED_003).read_text().splitlines()
    return [_markdown_cells(line) for line in lines if line.startswith("| LLaMA")]


def test_003_every_row_matches_its_seed_row() -> None:
    seed_rows = _rows_003()
    rows = _sets()["seed-003-fsdp-deepspeed"].measurements
    assert len(rows) == len(seed_rows) == 27
    assert sorted(_row_number(row, "row") for row in rows) == list(range(1, len(seed_rows) + 1))
    for row in rows:
        assert SEED_003 in row.source
        model_text, method_text, ckpt_text, batch_text, gpus_text, memory_text, time_text = seed_rows[
            _row_number(row, "row") - 1
        ]
        assert row.model == MODEL_NAMES_003[model_text]
        assert row.gpu == "a100-80gb"
        assert row.setting.sharding == SHARDING_003[method_text]
        assert row.setting.grad_ckpt == (ckpt_text == "yes")
        assert row.setting.micro_batch_size == int(batch_text)
        assert row.num_gpus_per_node == int(gpus_text)
        assert row.setting.grad_accum == (2 if method_text.startswith("Deepspeed") else 8)
        assert row.setting.method == "full" and row.setting.precision == "bf16-mixed"
        assert (row.workload.seq_len, row.workload.num_samples, row.workload.epochs) == (2048, 6000, 3.0)
        assert row.oom == (memory_text == "OOM") == (time_text == "X"), row.id
        if not row.oom:
            assert row.peak_memory_gib == float(memory_text.removesuffix("GB")), row.id
            assert row.run_time_s == _hms_s(time_text), row.id
            assert row.memory_kind == "unknown"


def test_003_spot_checks_and_conditions() -> None:
    text = (SEEDS / SEED_003).read_text()
    measurement_set = _sets()["seed-003-fsdp-deepspeed"]
    rows = {row.id: row for row in measurement_set.measurements}
    assert "| LLaMA-30B | Deepspeed + Zero 3 + Offload | yes | 1 | 4 | 18GB  | 39:33:19 |" in text
    row = rows["003-llama-30b-zero3-offload-mbs1-x4"]
    assert (row.peak_memory_gib, row.run_time_s) == (18.0, 39 * 3600 + 33 * 60 + 19)
    assert "| LLaMA-13B | Deepspeed + Zero 3 + Offload | no | 1 | 4 |  OOM | X |" in text
    assert rows["003-llama-13b-zero3-offload-mbs1-x4-no-ckpt"].oom
    assert "We have 6000 example, each with 2048 tokens." in measurement_set.conditions
    commands = text.split("| Model")[0]
    for line in commands.splitlines():
        assert line.rstrip() in measurement_set.conditions, line


# ----------------------------------------------------------------------------------------- seed 000


def _xtx_blocks() -> list[str]:
    section = (SEEDS / SEED_000).read_text().split("# 7900 XTX\n", 1)[1]
    return [block.strip() for block in re.split(r"\n\s*\n", section) if "max_seq_len" in block]


def test_000_torchtune_runs_match_their_progress_bars() -> None:
    text = (SEEDS / SEED_000).read_text()
    rows = {row.gpu: row for row in _sets()["seed-000-torchtune"].measurements if row.gpu != "rx-7900-xtx"}
    assert set(rows) == {"rtx-4090", "rtx-3090"}
    for gpu_key, heading in (("rtx-4090", "# RTX 4090"), ("rtx-3090", "# RTX 3090")):
        section = text.split(heading + "\n", 1)[1].split("\n# ", 1)[0]
        match = re.search(r"(\d+)/(\d+) \[([\d:]+)<[^,]*,\s*([\d.]+)it/s\]", section)
        assert match
        row = rows[gpu_key]
        assert heading in row.source
        assert row.run_time_s == _hms_s(match.group(3))
        assert row.micro_step_time_s == pytest.approx(1.0 / float(match.group(4)), rel=1e-5)
        assert row.workload.num_samples == int(match.group(2)) * row.setting.micro_batch_size
        assert row.setting.method == "lora" and row.setting.lora_targets == ("q_proj", "v_proj")
        assert (row.setting.lora_rank, row.setting.lora_alpha) == (8, 16)
        assert row.peak_memory_gib is None and row.workload.batches == FilledBatches()
        assert "tokens_per_sample is NOT known" in row.notes


def test_000_every_7900xtx_block_with_a_result_is_one_row() -> None:
    blocks = _xtx_blocks()
    rows = [row for row in _sets()["seed-000-torchtune"].measurements if row.gpu == "rx-7900-xtx"]
    with_result = [index for index, block in enumerate(blocks, start=1) if not block.startswith("?")]
    assert len(rows) == len(with_result) == 9
    assert sorted(_row_number(row, "block") for row in rows) == with_result
    for row in rows:
        block = blocks[_row_number(row, "block") - 1]
        lines = block.splitlines()
        fields = dict(re.findall(r"^(\w+): (\S+)$", block, flags=re.M))
        assert row.workload.seq_len == int(fields["max_seq_len"])
        assert row.setting.micro_batch_size == int(fields["batch_size"])
        assert row.setting.grad_accum == int(fields["gradient_accumulation_steps"])
        assert row.setting.compile == (fields.get("compile") == "True")
        assert row.setting.optimizer == "adamw" and row.memory_kind == "unknown"
        printed_memory = float(re.match(r"[\d.]+", lines[0]).group(0))  # type: ignore[union-attr]
        result = lines[-1].strip()
        assert row.oom == (result == "x"), row.id
        if row.oom:
            assert lines[0].strip() in row.notes, row.id
        else:
            assert row.peak_memory_gib == printed_memory, row.id
            hours, _, minutes = result.removesuffix("h").partition(":")
            assert row.run_time_s == int(hours) * 3600 + int(minutes or 0) * 60, row.id


def test_000_conditions_hold_the_seed_text_and_the_unused_blocks_are_described() -> None:
    text = (SEEDS / SEED_000).read_text()
    conditions = _sets()["seed-000-torchtune"].conditions
    for line in text.splitlines():
        assert line.rstrip() in conditions, line
    assert "'? bs=4'" in conditions and "'compiled version'" in conditions


# ----------------------------------------------------------------------------------------- loader


def test_load_measurement_set_reads_a_valid_file(tmp_path: Path) -> None:
    shipped = resources.files("autotune.profiles").joinpath("measurements", "seed-003-fsdp-deepspeed.yaml")
    path = tmp_path / "mine.yaml"
    path.write_text(shipped.read_text(encoding="utf-8"))
    loaded = load_measurement_set(path)
    assert loaded == _sets()["seed-003-fsdp-deepspeed"]


def _assert_one_line_naming(error: ConfigError, path: Path) -> None:
    message = str(error)
    assert str(path) in message and "\n" not in message


def test_load_measurement_set_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match="not found") as caught:
        load_measurement_set(path)
    _assert_one_line_naming(caught.value, path)


def test_load_measurement_set_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\nsource: x\n")
    with pytest.raises(ConfigError, match="malformed YAML") as caught:
        load_measurement_set(path)
    _assert_one_line_naming(caught.value, path)


def test_load_measurement_set_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="is a YAML mapping") as caught:
        load_measurement_set(path)
    _assert_one_line_naming(caught.value, path)


def test_load_measurement_set_unknown_key_is_named(tmp_path: Path) -> None:
    row: dict[str, Any] = {
        "id": "r1",
        "source": "run dir",
        "model": "llama3-8b",
        "gpu": "rtx-4090",
        "setting": {"method": "lora"},
        "workload": {"seq_len": 512},
        "peak_memory_gb": 20.0,
    }
    data = {"name": "mine", "source": "my run", "conditions": "none", "measurements": [row]}
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"measurements\.0\.peak_memory_gb") as caught:
        load_measurement_set(path)
    _assert_one_line_naming(caught.value, path)
    row.pop("peak_memory_gb")
    path.write_text(yaml.safe_dump(data))
    assert load_measurement_set(path).measurements[0].id == "r1"
