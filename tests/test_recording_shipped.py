"""The recording the lesson ships: the real output of the default `normdive record-runs`."""

from __future__ import annotations

from pathlib import Path

from normdive.config import DEFAULT_RECORDING_PATH
from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, RunConfig
from normdive.recording.reader import best_row, read_recording

SHIPPED = Path(__file__).resolve().parents[1] / DEFAULT_RECORDING_PATH


def test_the_shipped_recording_is_whole_and_small() -> None:
    recording = read_recording(SHIPPED)
    assert SHIPPED.stat().st_size < 1_000_000
    assert recording.config == RunConfig()  # the default settings, nothing overridden
    assert (recording.config.depth, recording.config.copy_length) == (8, 16)
    assert recording.seeds == list(DEFAULT_SEEDS) == [0, 1, 2]
    assert recording.page_seed == 0
    for seed in (0, 1, 2):
        assert sorted(r.key for r in recording.rows if r.seed == seed) == sorted(ROW_KEYS)
    for row in recording.rows:
        assert row.final.step == recording.config.steps
        assert all(len(point.norms) == 8 for point in row.block_grad_norms)
        assert len(row.block_grad_norms) > 2  # along the curve, not only start and end


def test_its_provenance_names_the_default_command() -> None:
    source = read_recording(SHIPPED).provenance
    assert source.script == "normdive record-runs"
    assert source.command == "normdive record-runs"
    assert source.rows_resumed == 0
    assert source.git_commit is not None and source.git_dirty is False
    assert source.torch_version.startswith("2.13.0")


def test_its_best_row_is_computed_and_learned_the_copy() -> None:
    recording = read_recording(SHIPPED)
    best = best_row(recording)
    row = recording.row(best)
    assert row is not None and row.final.heldout_accuracy == 1.0  # at least one row learned it
