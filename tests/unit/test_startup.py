"""What keeps a cold start cheap, without changing behaviour: lazy schema re-exports, validators built on first
use (still validating), and no pydantic plugin scan in the CLI (a user's own setting kept)."""

from __future__ import annotations

import importlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

import autotune.schemas
from autotune.cli.app import PYDANTIC_PLUGINS_ENV


def _run(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return done.stdout


def test_every_reexported_schema_name_is_its_modules_object() -> None:
    assert sorted(autotune.schemas.__all__) == sorted(autotune.schemas._HOMES)
    for name in autotune.schemas.__all__:
        home = importlib.import_module(f"autotune.schemas.{autotune.schemas._HOMES[name]}")
        assert getattr(autotune.schemas, name) is getattr(home, name), name
    from autotune.schemas import PlanFile, RunReport

    assert PlanFile.__module__ == "autotune.schemas.plan" and RunReport.__module__ == "autotune.schemas.run_report"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        autotune.schemas.Nope  # noqa: B018


def test_importing_the_package_loads_only_the_schemas_asked_for() -> None:
    code = (
        "import sys\n"
        "import autotune.schemas\n"
        "print(sorted(m for m in sys.modules if m.startswith('autotune.schemas.')))\n"
        "from autotune.schemas import Workload\n"
        "print(sorted(m for m in sys.modules if m.startswith('autotune.schemas.')))\n"
    )
    bare, after = _run(code).splitlines()
    assert bare == "[]"
    assert "autotune.schemas.workload" in after and "autotune.schemas.run_report" not in after


def test_a_deferred_validator_validates_as_before() -> None:
    """Validators are built on first validation (defer_build): the first validation already rejects what it
    must — unknown keys, NaN, out-of-range values — in a fresh process where nothing was validated yet."""
    code = (
        "from pydantic import ValidationError\n"
        "from autotune.schemas.workload import Workload\n"
        "print(Workload.__pydantic_complete__)\n"
        "for bad in ({'seq_len': 0}, {'seq_len': 8, 'nope': 1}, {'seq_len': 8, 'epochs': float('nan')}):\n"
        "    try:\n        Workload.model_validate(bad)\n    except ValidationError as e:\n"
        "        print(e.errors()[0]['type'])\n"
        "print(Workload(seq_len=8).seq_len, Workload.__pydantic_complete__)\n"
    )
    assert _run(code).splitlines() == ["False", "greater_than_equal", "extra_forbidden", "finite_number", "8 True"]
    from autotune.schemas.workload import Workload

    with pytest.raises(ValidationError):
        Workload(seq_len=8, epochs=math.inf)


@pytest.mark.parametrize(("given", "expected"), [(None, "__all__"), ("logfire", "logfire")])
def test_the_cli_turns_off_pydantic_plugin_discovery_unless_the_user_chose(given: str | None, expected: str) -> None:
    env = {name: value for name, value in os.environ.items() if name != PYDANTIC_PLUGINS_ENV}
    if given is not None:
        env[PYDANTIC_PLUGINS_ENV] = given
    code = (
        "import os\nfrom autotune.cli.app import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        f"print(os.environ.get({PYDANTIC_PLUGINS_ENV!r}))\n"
    )
    assert _run(code, env).splitlines()[-1] == expected


def test_a_warm_plan_imports_no_yaml_and_prints_what_a_cold_one_prints(tmp_path: Path) -> None:
    """The first run parses the shipped YAML and caches it; the next reads the cache (no PyYAML import) and
    prints the same plan."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env["AUTOTUNE_CACHE_DIR"] = str(tmp_path / "cache")
    code = (
        "import sys, io, contextlib\nfrom autotune.cli.app import main\nout = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n    main(['plan', 'llama3-8b', '--gpu', '4090', '--json'])\n"
        "print('yaml' in sys.modules)\nprint(out.getvalue())\n"
    )
    cold = _run(code, env)
    assert cold.startswith("True\n")
    assert sorted(path.name for path in (tmp_path / "cache").iterdir()) == [
        "catalog-calibration.json",
        "catalog-evidence.json",
        "catalog-gpus.json",
        "catalog-interconnects.json",
        "catalog-models.json",
        "catalog-op-counts.json",
    ]
    warm = _run(code, env)
    assert warm.startswith("False\n")
    assert warm.split("\n", 1)[1] == cold.split("\n", 1)[1]


def test_help_loads_no_logging_and_a_command_is_quieted_before_it_loads() -> None:
    env = {name: value for name, value in os.environ.items() if name not in ("AUTOTUNE_VERBOSE", "TQDM_DISABLE")}
    code = (
        "import os, sys\nfrom autotune.cli.app import main\n"
        "def run(args):\n    try:\n        main(args)\n    except SystemExit:\n        pass\n"
        "run(['--help'])\n"
        "print('autotune.quiet' in sys.modules, os.environ.get('TQDM_DISABLE'))\n"
        "run(['gpus', '--help'])\n"
        "print('autotune.quiet' in sys.modules, os.environ.get('TQDM_DISABLE'))\n"
    )
    lines = _run(code, env).splitlines()
    assert lines[-1] == "True 1"
    assert "False None" in lines
