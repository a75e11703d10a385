"""``autotune validate --cv --cv-by source``: rank correlation per source."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.profiles.measurements import all_measurements


def test_validate_cv_by_source_prints_rank_correlation_per_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import yaml
    from cli_runner import run

    from autotune.schemas.calibration import MeasurementSet

    rows = [m for m in all_measurements() if m.id.startswith("001-a100-80gb-phi3-mini")]
    rows += [m for m in all_measurements() if m.model == "mpt-1b-foundry" and m.gpu == "h100-80gb"][:4]
    path = tmp_path / "set.yaml"
    data = MeasurementSet(name="set", source="test", conditions="test", measurements=rows).model_dump(mode="json")
    path.write_text(yaml.safe_dump(data))
    code, out, err = run(capsys, "validate", "--cv", "--cv-by", "source", "--measurements", str(path), "--json")
    assert code == 0, err
    by_source = json.loads(out)["time_by_source"]["leave-one-source-out"]
    assert {s["source"] for s in by_source} == {"001_351ee1f9e626a6ae.txt", "llm-foundry-mpt.jsonl"}
    for source in by_source:
        assert source["sweeps"] == 1 and source["rho_median"] is not None
