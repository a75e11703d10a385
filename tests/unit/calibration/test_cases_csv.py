"""autotune.calibration.cases.cases_from_csv: a CSV's rows as cases, each with the architecture its model cell names
(the catalog entry, or the shapes read from a config.json given as a path) and its cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.calibration.cases import cases_from_csv, measurement_cluster, prepare_cases
from autotune.calibration.results import evaluate
from autotune.costmodel.calibration import default_coefficients
from autotune.errors import UnknownNameError
from autotune.profiles.catalog import resolve_model_profile

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "configs" / "llama3.2-1b" / "config.json"


def test_path_rows_carry_the_file_shapes_and_catalog_rows_the_entry(tmp_path: Path) -> None:
    config = json.loads(FIXTURE.read_text(encoding="utf-8"))
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 8}), encoding="utf-8")
    csv_file = tmp_path / "runs.csv"
    csv_file.write_text(
        "model,gpu,num_gpus,method,seq_len,micro_step_time_s\n"
        "half,rtx-4090,2,lora,1024,0.2\n"
        "llama3.2-1b,rtx-4090,2,lora,1024,0.3\n",
        encoding="utf-8",
    )
    path_case, catalog_case = cases_from_csv(csv_file)
    assert path_case.model.num_hidden_layers == 8 and path_case.measurement.model == str(tmp_path / "half")
    assert catalog_case.model == resolve_model_profile("llama3.2-1b") and catalog_case.model.num_hidden_layers == 16
    assert path_case.cluster == measurement_cluster(path_case.measurement)
    assert (path_case.cluster.gpu.key, path_case.cluster.num_gpus_per_node) == ("rtx-4090", 2)
    # half the layers of the same model: predicted faster (the file's shapes are the ones priced)
    half, full = evaluate([path_case, catalog_case], default_coefficients())
    assert half.predicted_time_s is not None and full.predicted_time_s is not None
    assert half.predicted_time_s < full.predicted_time_s
    # the measurement alone cannot name the file's architecture: the catalog does not know it
    with pytest.raises(UnknownNameError):
        prepare_cases([path_case.measurement])
