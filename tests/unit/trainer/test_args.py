"""``python -m autotune.trainer``'s parser is generated from the one trainer-options schema."""

from __future__ import annotations

import pytest

from autotune.launcher.options import LaunchOptions
from autotune.schemas.trainer_options import TrainerOptions
from autotune.trainer.args import build_parser, parse_args

REQUIRED = ["--plan", "p.yaml", "--dataset", "d.jsonl", "--output-dir", "out"]


def test_defaults_and_bounds_are_the_schemas() -> None:
    args = parse_args(REQUIRED)
    for name in TrainerOptions.model_fields:
        if name not in ("dataset", "output_dir"):
            assert getattr(args, name) == TrainerOptions.model_fields[name].default, name
    assert args.checkpoints_dir.as_posix() == "out/checkpoints"


def test_every_trainer_option_has_one_flag_and_the_launchers_help() -> None:
    text = build_parser().format_help()
    for name, field in TrainerOptions.model_fields.items():
        assert "--" + name.replace("_", "-") in text
        assert LaunchOptions.model_fields[name].description == field.description  # inherited, not copied


def test_values_are_converted_by_the_schema() -> None:
    args = parse_args([*REQUIRED, "--seed", "7", "--warmup-ratio", "0.5", "--cpu", "--full-determinism"])
    assert (args.seed, args.warmup_ratio, args.cpu, args.full_determinism) == (7, 0.5, True, True)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--warmup-ratio", "1"),
        ("--warmup-ratio", "-0.1"),
        ("--save-steps", "0"),
        ("--learning-rate", "0"),
        ("--seed", "x"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag_and_exit_2(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args([*REQUIRED, flag, value])
    assert exit_.value.code == 2
    assert f"error: {flag}:" in capsys.readouterr().err


def test_the_launcher_and_the_trainer_refuse_the_same_warmup_ratio() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        LaunchOptions(dataset="d", output_dir="o", warmup_ratio=1.0)
