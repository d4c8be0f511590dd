"""The summary printed by record-runs and check-recording, and pasted into the docs."""

from __future__ import annotations

import math

from normdive.recording.runs import Runs
from normdive.recording.summary import ranking_note, summary_table
from sample_recordings import sample_recording


def test_four_lines_under_a_header_with_the_best_row_marked() -> None:
    lines = summary_table(sample_recording(seeds=(0, 1, 2)))
    assert len(lines) == 2 + 4
    assert lines[0].startswith("| row (seed 0) |")
    assert "accuracy at seeds 0, 1, 2" in lines[0]
    assert lines[2].startswith("| both (best) | on | on | 100.0 % |")
    assert lines[3].startswith("| residual_only | off | on | 20.0 % |")
    assert "100.0 % / 100.0 % / 100.0 %" in lines[2]
    assert lines[2].split(" | ")[6] == "600"  # first step at 100 %
    assert lines[3].split(" | ")[6] == "never"


def test_non_finite_figures_are_printed_as_marked() -> None:
    lines = summary_table(sample_recording({"neither": (math.nan, math.inf)}))
    assert "| neither | off | off | nan | nan | inf |" in lines[5]


def test_the_note_says_when_seeds_agree() -> None:
    note = ranking_note(sample_recording(seeds=(0, 1)))
    assert note.startswith("Every seed ranks the rows the same way.")
    assert "single component recovering more: residual_only" in note


def test_the_note_says_when_seeds_disagree() -> None:
    base = sample_recording(seeds=(0, 1))
    runs = [
        run.model_copy(update={"final": run.final.model_copy(update={"heldout_accuracy": 0.5})})
        if (run.config.row_key, run.config.seed) == ("layernorm_only", 1)
        else run
        for run in base.runs
    ]
    recording = Runs.model_validate_json(base.model_copy(update={"runs": runs}).model_dump_json())
    note = ranking_note(recording)
    assert note.startswith("The ranking differs between seeds.")
    assert "seed 1: both > layernorm_only > residual_only > neither" in note
    assert "(single component recovering more: layernorm_only)" in note


def test_an_empty_recording_has_a_header_only() -> None:
    recording = sample_recording(rows=())
    assert len(summary_table(recording)) == 2
    assert ranking_note(recording) == "No rows at the page's seed."
