"""Plan files: round trip, migration errors, unknown keys, malformed YAML, refusing to overwrite."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from plans import make_plan

from autotune.errors import ConfigError, InvalidRequestError
from autotune.schemas.plan import PLAN_SCHEMA_VERSION
from autotune.schemas.plan_io import load_plan, plan_from_yaml, plan_to_yaml, save_plan


def _write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _single_line(error: pytest.ExceptionInfo[Exception]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "plan",
    [
        make_plan(),
        make_plan(sharding="zero3-offload", gpus=4, method="full", lora_targets="q_proj,v_proj"),
        make_plan(sharding="fsdp", gpus=8, nodes=2, workload={"num_samples": 1000, "epochs": 2.5}),
    ],
)
def test_save_then_load_gives_the_same_plan(tmp_path: Path, plan: object) -> None:
    path = save_plan(plan, tmp_path / "plan.yaml")  # type: ignore[arg-type]
    assert load_plan(path) == plan


def test_yaml_text_is_deterministic_and_commented() -> None:
    plan = make_plan(sharding="ddp", gpus=2)
    text = plan_to_yaml(plan)
    assert text == plan_to_yaml(plan_from_yaml(text, "x"))
    assert text.startswith("#")
    assert yaml.safe_load(text)["setting"]["sharding"] == "ddp"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_plan(tmp_path / "nope.yaml")
    assert "nope.yaml" in _single_line(error) and "not found" in str(error.value)


def test_directory_is_not_a_plan(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a directory, not a regular file"):
        load_plan(tmp_path)


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("schema_version: 1\nsetting: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_plan(path)
    message = _single_line(error)
    assert str(path) in message and "malformed YAML" in message and "line" in message


@pytest.mark.parametrize(("content", "kind"), [("", "empty"), ("- 1\n- 2\n", "a list"), ("7\n", "a int")])
def test_not_a_mapping(tmp_path: Path, content: str, kind: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=kind):
        load_plan(path)


def test_missing_schema_version(tmp_path: Path) -> None:
    data = make_plan().model_dump(mode="json")
    del data["schema_version"]
    with pytest.raises(ConfigError) as error:
        load_plan(_write(tmp_path / "old.yaml", data))
    assert "old.yaml" in _single_line(error) and "schema_version" in str(error.value)


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    data = make_plan().model_dump(mode="json")
    data["schema_version"] = PLAN_SCHEMA_VERSION + 1
    with pytest.raises(ConfigError) as error:
        load_plan(_write(tmp_path / "new.yaml", data))
    assert "new.yaml" in _single_line(error) and "newer" in str(error.value)


def test_unknown_key_is_named_with_a_close_valid_one(tmp_path: Path) -> None:
    data = make_plan().model_dump(mode="json")
    data["setting"]["micro_batchsize"] = 4
    with pytest.raises(ConfigError) as error:
        load_plan(_write(tmp_path / "typo.yaml", data))
    message = _single_line(error)
    assert "unknown key 'setting.micro_batchsize'" in message
    assert "did you mean 'micro_batch_size'" in message
    assert "grad_accum" in message  # the valid keys of that section are listed


def test_unknown_top_level_key(tmp_path: Path) -> None:
    data = make_plan().model_dump(mode="json")
    data["gpus"] = 4
    with pytest.raises(ConfigError, match="unknown key 'gpus'"):
        load_plan(_write(tmp_path / "plan.yaml", data))


def test_wrong_type_names_the_field_and_value(tmp_path: Path) -> None:
    data = make_plan().model_dump(mode="json")
    data["setting"]["micro_batch_size"] = "lots"
    data["cluster"]["num_nodes"] = 0
    with pytest.raises(ConfigError) as error:
        load_plan(_write(tmp_path / "plan.yaml", data))
    message = _single_line(error)
    assert "setting.micro_batch_size" in message and "'lots'" in message
    assert "cluster.num_nodes" in message


def test_missing_section(tmp_path: Path) -> None:
    data = make_plan().model_dump(mode="json")
    del data["prediction"]
    with pytest.raises(ConfigError, match="missing key 'prediction'"):
        load_plan(_write(tmp_path / "plan.yaml", data))


def test_save_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("user content\n", encoding="utf-8")
    with pytest.raises(InvalidRequestError) as error:
        save_plan(make_plan(), path)
    assert "already exists" in _single_line(error)
    assert path.read_text(encoding="utf-8") == "user content\n"


def test_save_overwrites_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("old\n", encoding="utf-8")
    plan = make_plan(sharding="ddp", gpus=2)
    save_plan(plan, path, overwrite=True)
    assert load_plan(path) == plan


def test_save_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        save_plan(make_plan(), tmp_path / "no" / "plan.yaml")
