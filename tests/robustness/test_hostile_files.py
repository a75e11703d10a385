"""Hostile and broken files are refused with one line, quickly: depth, alias bombs, huge numbers, bad bytes, sizes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_runner import run

from autotune import yamlio
from autotune.errors import ConfigError
from autotune.profiles.hf_config import model_spec_from_config
from autotune.schemas.plan_io import load_plan

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
)
"""2 KB of YAML that expands to 10^9 scalars ("billion laughs")."""

YAML_DOCUMENTS = {
    "deep-flow": "a: " + "[" * 50_000 + "]" * 50_000 + "\n",
    "deep-block": "".join(" " * i + "- \n" for i in range(0, 2_000)),
    "deep-mapping": "".join(" " * i + f"k{i}:\n" for i in range(0, 3_000)),
    "alias-bomb": ALIAS_BOMB,
    "huge-int": "schema_version: " + "9" * 5000 + "\n",
    "huge-float": "schema_version: 1e999999\n",
    "not-a-mapping": "- 1\n- 2\n",
    "scalar": "just text\n",
    "empty": "",
    "tab-indent": "a:\n\t- 1\n",
    "unclosed": "a: [1, 2\n",
    "python-tag": "a: !!python/object/apply:os.system ['touch PWNED']\n",
    "duplicate-anchor-loop": "a: &a [*a]\n",
    "binary": "\x00\x01\x02 garbage",
}


def _one_line(error: BaseException) -> None:
    assert "\n" not in str(error) and str(error)


@pytest.mark.parametrize("name", list(YAML_DOCUMENTS))
def test_hostile_plan_yaml_refused_quickly(tmp_path: Path, name: str) -> None:
    file = tmp_path / "plan.yaml"
    file.write_text(YAML_DOCUMENTS[name])
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load_plan(file)
    assert time.perf_counter() - started < 10  # a hang guard (an unbounded alias bomb never returns)
    _one_line(caught.value)
    assert not Path("PWNED").exists()


@pytest.mark.parametrize("name", ["deep-flow", "alias-bomb", "huge-int", "python-tag", "not-a-mapping"])
def test_hostile_calibration_yaml_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    file = tmp_path / "calibration.yaml"
    file.write_text(YAML_DOCUMENTS[name])
    code, _, err = run(capsys, "estimate", "llama3-8b", "--gpu", "4090", "--calibration", str(file))
    assert code == 2 and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name", ["deep-flow", "alias-bomb", "huge-int", "binary"])
def test_hostile_plan_given_to_launch(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> None:
    file = tmp_path / "plan.yaml"
    file.write_text(YAML_DOCUMENTS[name])
    code, _, err = run(capsys, "launch", str(file), "--dataset", "d", "--output-dir", str(tmp_path / "r"), "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1, err


JSON_DOCUMENTS = {
    "deep-array": "[" * 100_000 + "]" * 100_000,
    "deep-object": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "huge-int": '{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}",
    "not-an-object": "[1, 2, 3]",
    "truncated": '{"model_type": "llama", "hidden_size": 40',
    "empty": "",
    "wrong-types": '{"model_type": "llama", "hidden_size": "big", "num_hidden_layers": [1]}',
    "negative": '{"model_type": "llama", "hidden_size": -4096, "num_hidden_layers": 32, "num_attention_heads": 32,'
    ' "intermediate_size": 100, "vocab_size": 10}',
    "null-model-type": '{"model_type": null}',
    "brackets-in-strings": '{"model_type": "' + "[" * 200 + '"}',
}


@pytest.mark.parametrize("name", list(JSON_DOCUMENTS))
def test_hostile_config_json_refused(tmp_path: Path, name: str) -> None:
    file = tmp_path / "config.json"
    file.write_text(JSON_DOCUMENTS[name])
    with pytest.raises(ConfigError) as caught:
        model_spec_from_config(file)
    _one_line(caught.value)


def test_config_json_with_invalid_utf8_refused(tmp_path: Path) -> None:
    file = tmp_path / "config.json"
    file.write_bytes(b'{"model_type": "\xff\xfe"}')
    with pytest.raises(ConfigError):
        model_spec_from_config(file)


def test_oversized_file_refused_without_reading_it(tmp_path: Path) -> None:
    file = tmp_path / "plan.yaml"
    with file.open("wb") as handle:
        handle.truncate(yamlio.MAX_FILE_BYTES + 1)  # sparse: nothing is really written
    with pytest.raises(ConfigError, match="larger than"):
        load_plan(file)


def test_plan_directory_or_missing_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_plan(tmp_path)
    with pytest.raises(ConfigError):
        load_plan(tmp_path / "missing.yaml")


def test_yaml_anchors_within_bounds_still_load() -> None:
    assert yamlio.safe_load("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}


def test_json_depth_ignores_brackets_in_strings() -> None:
    assert yamlio.json_depth('{"a": "[[[[\\"[["}') == 1
    assert yamlio.json_depth(json.dumps([[[1]]])) == 3


def test_run_report_hostile_json_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run_report.json").write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run(capsys, "calibrate", str(run_dir), "--output", str(tmp_path / "c.yaml"))
    assert code == 2 and "Traceback" not in err, err
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize("count", [65, 2500])
def test_sweep_over_too_many_lengths_refused(capsys: pytest.CaptureFixture[str], count: int) -> None:
    lengths = ",".join(str(256 + 8 * i) for i in range(count))
    started = time.perf_counter()
    code, _, err = run(capsys, "sweep", "llama3-8b", "--gpu", "4090", "--seq-len", lengths)
    assert code == 2 and "at most" in err
    assert time.perf_counter() - started < 5  # a hang guard: refused before any planning


def test_sweep_huge_number_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sweep", "llama3-8b", "--gpu", "4090", "--seq-len", "9" * 5000)
    assert code == 2 and "Traceback" not in err
