"""The recording format's pieces and the ablation's file: non-finite values are marked, runs
are consistent with their plan, and the player's figures are recorded."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from normdive.recording.format import (
    ROW_KEYS,
    ROW_SWITCHES,
    BlockGradNorms,
    RunConfig,
    as_float,
    non_finite_marker,
)
from normdive.recording.runs import RunPoint, Runs
from normdive.web.routes.pages import json_safe
from sample_recordings import sample_recording


@pytest.mark.parametrize(
    ("value", "stored"),
    [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (0.25, 0.25), ("nan", "nan")],
)
def test_non_finite_measures_are_marked_not_dropped(value: float, stored: object) -> None:
    point = RunPoint(
        step=3,
        train_loss=value,
        grad_norm=value,
        heldout_loss=value,
        heldout_accuracy=value,
        heldout_exact_match=value,
    )
    assert point.heldout_loss == stored
    text = point.model_dump_json()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON only
    again = RunPoint.model_validate_json(text)
    assert again == point
    restored, expected = as_float(again.heldout_loss), float(value)
    assert (math.isnan(restored) and math.isnan(expected)) or restored == expected


def test_a_measure_rejects_other_strings() -> None:
    with pytest.raises(ValidationError):
        BlockGradNorms(step=1, norms=["big"])  # type: ignore[list-item]


def test_row_keys_and_switches() -> None:
    assert ROW_KEYS == ("both", "residual_only", "layernorm_only", "neither")
    assert ROW_SWITCHES == {
        "both": (True, True),
        "residual_only": (False, True),
        "layernorm_only": (True, False),
        "neither": (False, False),
    }


def _data() -> dict[str, object]:
    return json.loads(sample_recording(seeds=(0, 1)).model_dump_json())  # type: ignore[no-any-return]


def test_sample_round_trips() -> None:
    recording = sample_recording(seeds=(0, 1))
    assert Runs.model_validate_json(recording.model_dump_json()) == recording


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            lambda d: d["runs"][0]["config"].update(residual=False),
            "depth 8 gpt2 layernorm_only eps 1e-05 seed 0 appears twice",
        ),
        (lambda d: d["runs"].append(d["runs"][0]), "appears twice"),
        (lambda d: d["plan"].update(first={"seed": 5}), "first seed 5 is not among seeds"),
        (lambda d: d["runs"][0]["config"].update(seed=9), "seed 9 is not in the plan"),
        (lambda d: d["runs"][0]["block_grad_norms"][0].update(norms=[1.0]), "expected depth 8"),
        (lambda d: d.update(surprise=1), "Extra inputs are not permitted"),
        (lambda d: d["runs"][0]["config"].update(layernorm="half"), "valid boolean"),
        (lambda d: d["plan"]["base"].update(n_heads=5), "not divisible by n_heads"),
        (lambda d: d["runs"][0].update(block_grad_norms=None), "no block gradient norms"),
        (
            lambda d: d["runs"][1]["curve"][1].update(heldout_exact_match=None),
            "no exact match recorded at step 300",
        ),
        (lambda d: d["runs"][1]["final"].update(heldout_exact_match=None), "at the end"),
        (lambda d: d["runs"][0].update(curve=d["runs"][0]["curve"] * 67), "at most 200"),
    ],
)
def test_inconsistent_files_are_rejected(change: object, fragment: str) -> None:
    data = _data()
    change(data)  # type: ignore[operator]
    with pytest.raises(ValidationError, match=fragment):
        Runs.model_validate(data)


def test_config_defaults_are_the_shipped_settings() -> None:
    config = RunConfig()
    assert (config.depth, config.copy_length, config.vocab_size, config.init) == (8, 16, 16, "gpt2")
    assert config.sequence_length == 32


@pytest.mark.parametrize(
    ("x", "marker"), [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")]
)
def test_non_finite_values_have_one_marker(x: float, marker: str) -> None:
    assert non_finite_marker(x) == json_safe(x) == marker
