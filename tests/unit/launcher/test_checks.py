"""The launch checks are one ordered list, walked alike by ``launch`` and ``launch --dry-run`` (issue 25 item 4).

Each check of :data:`~autotune.launcher.checks.LAUNCH_CHECKS` is given a bad input of its own: launch and dry run
refuse it with that check's message (a dry run warns where the list says so), before anything is written; a bad
input at two checks is refused by the earlier one, in the order docs/launcher.md gives (generated from the list).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from fake_sky import install_fake_sky
from plans import make_plan

from autotune.cli import launch_cmd
from autotune.launcher import LaunchSpec, gpus, preflight
from autotune.launcher.checks import LAUNCH_CHECKS, checks_markdown
from autotune.schemas.plan_changes import plan_fingerprint
from autotune.schemas.plan_io import save_plan
from autotune.schemas.training_stack import TESTED_TRAINING_STACK

from .conftest import replayed_gpu_probe
from .test_launch_refusals import snapshot

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Launch:
    """One ``autotune launch`` invocation under construction."""

    tmp: Path
    plan: dict[str, Any] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)
    dataset: str = ""
    out: Path = Path()
    plan_file: Path | None = None

    def argv(self) -> list[str]:
        plan = self.plan_file or save_plan(make_plan(**self.plan), self.tmp / "plan.yaml")
        return ["launch", str(plan), "--dataset", self.dataset, "--output-dir", str(self.out), *self.extra]


def _bad_plan(launch: Launch, _: pytest.MonkeyPatch) -> None:
    launch.plan["gpu"] = "rtx-9999"


def _bad_plan_and_options(launch: Launch, _: pytest.MonkeyPatch) -> None:
    launch.plan.update(sharding="fsdp-offload", grad_accum=1)  # one micro-step: FSDP offload on one GPU
    launch.extra.append("--cpu")


def _bad_skypilot_task(launch: Launch, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_sky(monkeypatch, ValueError("Invalid task YAML: Found unsupported field 'run'."))
    monkeypatch.setattr(launch_cmd, "installed_checkout", lambda: str(ROOT))
    launch.plan.update(gpu="h100-80gb")
    launch.extra.remove("--cpu")
    launch.extra.append("--skypilot")


def _bad_output_dir(launch: Launch, _: pytest.MonkeyPatch) -> None:
    launch.out.write_text("a file")


def _bad_resumed_plan(launch: Launch, _: pytest.MonkeyPatch) -> None:
    """A run trained with LoRA rank 16 (its checkpoint's manifest records the plan), resumed with rank 8."""
    trained = make_plan(lora_rank=16)
    launch.out.mkdir()
    save_plan(trained, launch.out / "plan.yaml")
    checkpoint = launch.out / "checkpoints" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    manifest = {"step": 2, "files": {}, "plan": plan_fingerprint(trained)}
    (checkpoint / "autotune_checkpoint.json").write_text(json.dumps(manifest))
    launch.plan["lora_rank"] = 8
    launch.extra.append("--resume")


def _bad_stack_installed(_: Launch, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))


def _bad_stack_versions(_: Launch, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {name: low for name, (low, _) in TESTED_TRAINING_STACK.items()} | {"transformers": "5.17.0"}
    monkeypatch.setattr(preflight, "installed_versions", lambda: fake)


def _bad_model(launch: Launch, _: pytest.MonkeyPatch) -> None:
    launch.plan_file = save_plan(
        make_plan().model_copy(update={"model_source": str(launch.tmp / "no" / "such" / "model")}),
        launch.tmp / "plan.yaml",
    )


def _bad_dataset(launch: Launch, _: pytest.MonkeyPatch) -> None:
    launch.dataset = "tatsu-lab/alpaca"  # not in the tests' datasets cache, and the hub is offline


def _bad_gpu(launch: Launch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "check_gpu_visible", replayed_gpu_probe)  # the real probe; torch here is a CPU build
    launch.extra.remove("--cpu")


def _too_few_gpus(launch: Launch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpus, "detect_gpus", lambda: ["NVIDIA GeForce RTX 4090"])
    launch.plan.update(sharding="ddp", gpus=2)
    launch.extra.remove("--cpu")


def _stale_build_lock(launch: Launch, monkeypatch: pytest.MonkeyPatch) -> None:
    root = launch.tmp / "torch_extensions"
    (root / "cpu_adam").mkdir(parents=True)
    (root / "cpu_adam" / "lock").write_text("")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(root))
    launch.plan.update(sharding="zero3-offload")


@dataclass(frozen=True)
class Case:
    """A bad input at one check: what the message says, and whether a dry run only warns."""

    make_bad: Callable[[Launch, pytest.MonkeyPatch], None]
    message: str
    dry_run_warns: bool = False
    warns_only: bool = False


CASES: dict[str, Case] = {
    "plan": Case(_bad_plan, "unknown GPU 'rtx-9999'"),
    "plan and options": Case(_bad_plan_and_options, "re-plan with --sharding none or zero3-offload"),
    "SkyPilot task": Case(_bad_skypilot_task, "does not pass SkyPilot's schema check: Invalid task YAML: Found"),
    "output directory": Case(_bad_output_dir, "is a file, not a directory"),
    "resumed plan": Case(_bad_resumed_plan, "checkpoint-2 was trained with (setting.lora_rank 16 → 8)"),
    "training stack installed": Case(_bad_stack_installed, "missing peft", dry_run_warns=True),
    "training stack versions": Case(_bad_stack_versions, "transformers 5.17.0"),
    "model": Case(_bad_model, "model directory"),
    "dataset": Case(_bad_dataset, "dataset tatsu-lab/alpaca is not in the datasets cache"),
    "GPU": Case(_bad_gpu, "torch sees no GPU"),
    "GPU type and count": Case(_too_few_gpus, "the plan runs 2 GPUs per node, this machine shows 1"),
    "extension build locks": Case(_stale_build_lock, "cpu_adam", warns_only=True),
}


def test_every_check_has_a_case() -> None:
    assert [check.name for check in LAUNCH_CHECKS] == list(CASES)
    assert [check.dry_run_warns for check in LAUNCH_CHECKS] == [case.dry_run_warns for case in CASES.values()]


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[LaunchSpec]:
    started: list[LaunchSpec] = []
    monkeypatch.setattr(launch_cmd, "run_launch", lambda spec, *_, **__: started.append(spec) or 0)
    return started


def _fresh(tmp_path: Path) -> Launch:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    return Launch(tmp=tmp_path, extra=["--cpu"], dataset=str(data), out=tmp_path / "run")


@pytest.mark.parametrize("mode", ["launch", "dry-run"])
@pytest.mark.parametrize("name", list(CASES))
def test_each_check_refuses_its_bad_input_before_anything_is_written(
    name: str,
    mode: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_run: list[LaunchSpec],
) -> None:
    case = CASES[name]
    launch = _fresh(tmp_path)
    case.make_bad(launch, monkeypatch)
    argv = launch.argv() + (["--dry-run"] if mode == "dry-run" else [])
    before = snapshot(tmp_path)
    code, out, err = run(capsys, *argv)
    if case.warns_only or (mode == "dry-run" and case.dry_run_warns):
        assert code == 0, err
        assert case.message in err and "warning" in err.lower(), err
        return
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    assert case.message in lines[0], lines[0]
    assert "launching" not in out and "dry run" not in out  # refused before the banner
    assert snapshot(tmp_path) == before and no_run == []


@pytest.mark.parametrize("mode", ["launch", "dry-run"])
@pytest.mark.parametrize(
    ("earlier", "later"),
    [("plan and options", "output directory"), ("plan", "plan and options"), ("model", "dataset")],
)
def test_the_earlier_check_refuses_first(
    earlier: str,
    later: str,
    mode: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_run: list[LaunchSpec],
) -> None:
    launch = _fresh(tmp_path)
    CASES[later].make_bad(launch, monkeypatch)
    CASES[earlier].make_bad(launch, monkeypatch)
    code, _, err = run(capsys, *launch.argv(), *(["--dry-run"] if mode == "dry-run" else []))
    assert code == 2 and CASES[earlier].message in err, err


def test_the_docs_list_the_checks_in_order() -> None:
    """docs/launcher.md holds the generated list (tools/check_docs.py rewrites and checks it)."""
    text = (ROOT / "docs" / "launcher.md").read_text()
    begin = "<!-- docs-generated: launch-checks -->\n"
    body = text[text.index(begin) + len(begin) : text.index("<!-- /docs-generated -->")]
    assert body == checks_markdown()
    assert [line.split(". ", 1)[0] for line in body.splitlines()] == [str(i) for i in range(1, len(LAUNCH_CHECKS) + 1)]


def test_a_stale_docs_list_is_caught() -> None:
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "tools" / "check_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_docs"] = module
    spec.loader.exec_module(module)
    stale = "<!-- docs-generated: launch-checks -->\n1. the plan file\n<!-- /docs-generated -->\n"
    new_text, blocks = module.regenerate(stale)
    assert blocks and blocks[0][1] != blocks[0][2]
    assert checks_markdown() in new_text


@pytest.mark.parametrize(
    ("sharding", "gpus", "suggested", "not_suggested"),
    [("fsdp-offload", 1, "--sharding none or zero3-offload", "ddp"), ("fsdp", 2, "ddp or zero2 or zero3", "none")],
)
def test_cpu_of_fsdp_suggests_what_plan_accepts_for_that_many_gpus(
    sharding: str, gpus: int, suggested: str, not_suggested: str
) -> None:
    from autotune.launcher.command import cpu_run_error

    error = cpu_run_error(make_plan(sharding=sharding, gpus=gpus).setting, gpus)
    assert error is not None and suggested in error
    assert not_suggested not in error.split("re-plan with")[1].split(", or")[0]


def test_a_hub_dataset_loads_offline_only_from_the_datasets_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule of ``datasets.load.CachedDatasetModuleFactory``: ``CACHE/ORG___snake_name/*/*/*`` directories."""
    from tests.hub_cache import add_cached_dataset

    from autotune.errors import ConfigError

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="tatsu-lab/alpaca is not in the datasets cache"):
        preflight.check_hub_dataset("tatsu-lab/alpaca")
    (tmp_path / "datasets--tatsu-lab--alpaca" / "snapshots" / "abc").mkdir(parents=True)  # the hub cache's layout
    with pytest.raises(ConfigError):
        preflight.check_hub_dataset("tatsu-lab/alpaca")
    add_cached_dataset(tmp_path, "tatsu-lab/alpaca")
    preflight.check_hub_dataset("tatsu-lab/alpaca")
    (tmp_path / "org___my_data" / "default" / "0.0.0" / "h").mkdir(parents=True)
    assert preflight.cached_dataset("org/MyData") is not None  # the name in snake case, as datasets names it
