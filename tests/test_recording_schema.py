"""docs/recording.schema.json is what the format generates today (regenerate: see module)."""

from __future__ import annotations

import json
from pathlib import Path

from normdive.recording.runs import RUNS_FORMAT_VERSION
from normdive.recording.schema import main, schema_text

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "recording.schema.json"


def test_the_committed_schema_is_not_stale() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == schema_text(), (
        "docs/recording.schema.json is stale: run "
        "`.venv/bin/python -m normdive.recording.schema docs/recording.schema.json`"
    )


def test_one_schema_holds_the_three_plans_and_marks_non_finite_values() -> None:
    schema = json.loads(schema_text())
    assert schema["properties"]["format_version"]["const"] == RUNS_FORMAT_VERSION
    plans = schema["properties"]["plan"]["discriminator"]["mapping"]
    assert sorted(plans) == ["ablation", "lab_grid", "sweep"]
    measure = schema["$defs"]["RunFinal"]["properties"]["heldout_accuracy"]
    assert {"type": "number"} in measure["anyOf"]
    assert {"enum": ["nan", "inf", "-inf"], "type": "string"} in measure["anyOf"]
    assert schema["$defs"]["AblationPlan"]["properties"]["rows"]["items"]["enum"] == [
        "both",
        "residual_only",
        "layernorm_only",
        "neither",
    ]
    settings = schema["$defs"]["RunSettings"]["properties"]
    assert {"depth", "d_model", "n_heads", "copy_length", "layernorm", "residual", "eps"} <= set(
        settings
    )
    assert {"init", "seed", "steps", "batch_size"} <= set(settings)


def test_main_writes_the_file(tmp_path: Path) -> None:
    target = tmp_path / "schema.json"
    assert main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == schema_text()
    assert main([]) == 2
