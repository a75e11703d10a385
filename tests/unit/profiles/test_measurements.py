"""autotune.profiles.measurements: the MPT development data and the core's own runs as measurement sets."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from autotune.calibration.cases import prepare_cases
from autotune.calibration.results import evaluate
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.params import count_params
from autotune.profiles.measurements import CORE_SOURCE, all_measurements, list_measurement_sets, measurement_models

ROOT = Path(__file__).resolve().parents[3]


def test_mpt_development_data_loads_with_its_models() -> None:
    rows = [m for m in all_measurements() if m.source.startswith("llm-foundry-mpt.jsonl")]
    assert len(rows) == 95
    models = measurement_models()
    for row in rows:
        assert row.setting.sharding == "fsdp" and row.setting.method == "full" and row.step_time_s
        model = models[row.model]
        # README: N(S) = V·d + S·d + L·(12·d² + 13·d) + 2·d; the S·d learned position table is not counted.
        d, layers, vocab = model.hidden_size, model.num_hidden_layers, model.vocab_size
        assert count_params(model).total_params == vocab * d + layers * (12 * d * d + 13 * d) + 2 * d


def test_the_cores_runs_ship_as_their_own_source_and_lead_the_fit() -> None:
    (core,) = [s for s in list_measurement_sets() if s.name == CORE_SOURCE]
    assert len(core.measurements) == 5
    assert all(m.source.startswith(f"{CORE_SOURCE}: ") for m in core.measurements)
    assert all(m.setting.adapter_dtype == "fp32" for m in core.measurements if m.setting.uses_adapters)
    shipped = default_coefficients()
    assert shipped.stack_time_factor[CORE_SOURCE] == 1.0  # the coefficients describe the core
    results = evaluate(prepare_cases(core.measurements), shipped)
    assert all(abs(r.time_error or 0) < 0.1 for r in results), [(r.case.measurement.id, r.time_error) for r in results]


def test_the_core_measurement_set_is_what_the_run_directories_hold() -> None:
    spec = importlib.util.spec_from_file_location("ingest_core_runs", ROOT / "tools" / "ingest_core_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ingest_core_runs"] = module
    spec.loader.exec_module(module)
    shipped = ROOT / "src" / "autotune" / "profiles" / "measurements" / f"{CORE_SOURCE}.yaml"
    assert module.build() == shipped.read_text(encoding="utf-8")
