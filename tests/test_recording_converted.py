"""The shipped files converted to the one format (`normdive convert-recordings`) draw the same
numbers as the files they were converted from (kept, gzipped, in tests/before_conversion/ as
they were at the commit before the conversion, so that a shallow clone runs this too): the
player's rows and charts, the depth sweep panel's cells and sentences, and
the lab's grid as the panels draw it. Nothing was trained again: runs and provenance are
the same (the lab grid's since grown by depths: its old runs are all there, equal)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from normdive.cli import app
from normdive.lab.grid import parse_lab_grid
from normdive.lesson.content import load_lesson
from normdive.progress.facts import recording_facts
from normdive.progress.sweep import sweep_sentences
from normdive.recorded_files import read_runs
from normdive.recording.format import ROW_KEYS
from normdive.recording.reader import parse_recording
from normdive.recording.sweep_reader import cells, parse_sweep
from normdive.web.views.lab_grid import LabGridView, lab_grid
from normdive.web.views.player import gradients_view, player_view
from normdive.web.views.sweep import cell_id, sweep_panel_view

ROOT = Path(__file__).resolve().parents[1]
# The last commit whose recordings/ held the files of format_version 1, as record-runs wrote
# them (the ablation, the sweep and the lab grid, each in its own format).
BEFORE = "b915458"
RECORDING = "recordings/the-transformer-block.json"
SWEEP = "recordings/the-transformer-block-sweep.json"
LAB = "recordings/the-transformer-block-lab.json"
LESSON = load_lesson()


def before(path: str) -> bytes:
    """`path` as it was at BEFORE (`git show BEFORE:path | gzip -9n` made the copy)."""
    kept = ROOT / "tests" / "before_conversion" / (Path(path).name + ".gz")
    return gzip.decompress(kept.read_bytes())


def now(path: str) -> bytes:
    return (ROOT / path).read_bytes()


@pytest.mark.parametrize("path", [RECORDING, SWEEP, LAB])
def test_the_shipped_files_are_converted_keeping_runs_and_provenance(
    tmp_path: Path, path: str
) -> None:
    assert json.loads(before(path))["format_version"] == 1
    assert json.loads(now(path))["format_version"] == 2
    old = tmp_path / Path(path).name
    old.write_bytes(before(path))
    if path != LAB:
        assert read_runs(ROOT / path) == read_runs(old)
        return
    # The lab grid has grown by depths since (merge-recordings joined a recording of the new
    # depths): every run of the converted grid is in it, equal, and its provenance comes first.
    grown, converted = read_runs(ROOT / path), read_runs(old)
    assert grown.provenance[: len(converted.provenance)] == converted.provenance
    runs = {run.model_dump_json() for run in grown.runs}
    assert all(run.model_dump_json() in runs for run in converted.runs)
    assert set(converted.plan.depths) < set(grown.plan.depths)


def test_the_player_draws_the_same_numbers() -> None:
    old, new = parse_recording(before(RECORDING), "old"), parse_recording(now(RECORDING), "new")
    assert new == old
    for key in ROW_KEYS:
        assert player_view(new, LESSON, key) == player_view(old, LESSON, key)
    assert gradients_view(new, LESSON) == gradients_view(old, LESSON)
    assert recording_facts(new) == recording_facts(old)


def test_the_sweep_panel_draws_the_same_numbers() -> None:
    old, new = parse_sweep(before(SWEEP), "old"), parse_sweep(now(SWEEP), "new")
    assert new == old
    played = parse_recording(now(RECORDING), "new")
    assert sweep_panel_view(new, LESSON, played=played) == sweep_panel_view(
        old, LESSON, played=played
    )
    assert sweep_sentences(new, LESSON) == sweep_sentences(old, LESSON)
    for cell in cells(old):
        picked = cell_id(cell.depth, cell.init, cell.key)
        assert sweep_panel_view(new, LESSON, picked) == sweep_panel_view(old, LESSON, picked)


def test_the_lab_draws_the_same_numbers(tmp_path: Path) -> None:
    old, new = parse_lab_grid(before(LAB), "old"), parse_lab_grid(now(LAB), "new")
    # The grid grew by depths: each old cell is drawn from the same numbers.
    assert (new.base, new.provenance) == (old.base, old.provenance)
    assert all(new.cell(*cell.point) == cell for cell in old.cells)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "lab.json").write_bytes(before(LAB))
    old_view, new_view = lab_grid(tmp_path / "old" / "lab.json"), lab_grid(ROOT / LAB)
    assert isinstance(old_view, LabGridView) and isinstance(new_view, LabGridView)
    assert all(cell in new_view.cells for cell in old_view.cells)
    assert new_view.base == old_view.base


@pytest.mark.parametrize("path", [RECORDING, SWEEP, LAB])
def test_converting_a_converted_file_changes_nothing(tmp_path: Path, path: str) -> None:
    target = tmp_path / Path(path).name
    target.write_bytes(now(path))
    result = CliRunner().invoke(app, ["convert-recordings", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes() == now(path)
