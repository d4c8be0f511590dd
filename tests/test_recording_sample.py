"""The made-up recording the tests use: valid, and honest about being made up."""

from __future__ import annotations

from normdive.recording.format import ROW_KEYS, RunConfig
from normdive.recording.reader import best_row, require_ablation_rows
from normdive.recording.runs import AblationPlan
from sample_recordings import sample_recording


def test_the_sample_is_a_whole_recording_that_says_it_is_made_up() -> None:
    recording = sample_recording(seeds=(3, 4))
    assert require_ablation_rows(recording, "sample") is recording
    assert recording.plan_as(AblationPlan).page_seed == 3
    assert [(r.config.row_key, r.config.seed) for r in recording.runs] == [
        (k, s) for s in (3, 4) for k in ROW_KEYS
    ]
    assert "made-up" in recording.provenance[0].script
    assert best_row(recording) == "both"


def test_the_sample_follows_the_config_it_is_given() -> None:
    config = RunConfig(depth=2, steps=40)
    recording = sample_recording({"both": (0.5, 1.5)}, rows=("both",), config=config)
    (row,) = recording.runs
    assert row.final.step == 40 and row.final.heldout_accuracy == 0.5
    assert all(len(point.norms) == 2 for point in row.block_grad_norms or [])
    assert row.final.first_step_at_full_accuracy is None
