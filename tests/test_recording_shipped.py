"""The recording the lesson ships: the real output of the default `normdive record-runs`; and
the depth sweep beside it, once `normdive record-runs --sweep` has made it."""

from __future__ import annotations

from pathlib import Path

import pytest

from normdive.config import DEFAULT_RECORDING_PATH
from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, RunConfig
from normdive.recording.reader import best_row, read_recording
from normdive.recording.runs import AblationPlan
from normdive.recording.sweep import SWEEP_DEPTHS, default_plan, sweep_path_for
from normdive.recording.sweep_reader import read_sweep

SHIPPED = Path(__file__).resolve().parents[1] / DEFAULT_RECORDING_PATH


def test_the_shipped_recording_is_whole_and_small() -> None:
    recording = read_recording(SHIPPED)
    plan = recording.plan_as(AblationPlan)
    assert SHIPPED.stat().st_size < 1_000_000
    assert plan.base == RunConfig()  # the default settings, nothing overridden
    assert (plan.base.depth, plan.base.copy_length) == (8, 16)
    assert plan.seeds == list(DEFAULT_SEEDS) == [0, 1, 2]
    assert plan.page_seed == 0
    for seed in (0, 1, 2):
        keys = [r.config.row_key for r in recording.select(seed=seed)]
        assert sorted(keys) == sorted(ROW_KEYS)
    for row in recording.runs:
        norms = row.block_grad_norms or []
        assert row.final.step == plan.base.steps
        assert all(len(point.norms) == 8 for point in norms)
        assert len(norms) > 2  # along the curve, not only start and end


def test_its_provenance_names_the_default_command() -> None:
    (source,) = read_recording(SHIPPED).provenance
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


SHIPPED_SWEEP = sweep_path_for(SHIPPED)
SWEEP_MAX_BYTES = 2 * 1024 * 1024


@pytest.mark.skipif(
    not SHIPPED_SWEEP.exists(),
    reason="no depth sweep shipped yet: `normdive record-runs --sweep` makes it (about 41 min)",
)
def test_the_shipped_sweep_is_the_default_one_whole_and_small() -> None:
    sweep = read_sweep(SHIPPED_SWEEP)
    assert SHIPPED_SWEEP.stat().st_size <= SWEEP_MAX_BYTES
    assert sweep.plan.shard is None
    assert sweep.plan.base == RunConfig()
    assert sweep.plan in (default_plan(), default_plan([*SWEEP_DEPTHS, 32], trim_depth=None))
    assert all(source.git_dirty is False for source in sweep.provenance)
    assert all(run.final.step == sweep.plan.base.steps for run in sweep.runs)
