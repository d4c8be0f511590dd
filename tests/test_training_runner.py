"""The runner's pieces: the plan, kept rows beside the output, the atomic write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normdive.recording.files import tmp_path as temporary_path
from normdive.recording.format import RowKey, RunConfig
from normdive.recording.reader import parse_recording
from normdive.recording.runs import Run
from normdive.training.runner import (
    Job,
    PartialRows,
    RecordError,
    fingerprint,
    partial_dir,
    plan,
    row_job,
    write_recording,
)
from sample_recordings import sample_recording

CONFIG = RunConfig(depth=2, steps=40)


def test_the_plan_goes_seed_by_seed_in_page_order() -> None:
    jobs = plan(CONFIG, ["both", "neither"], [0, 1])
    assert [(job.key, job.seed) for job in jobs] == [
        ("both", 0),
        ("neither", 0),
        ("both", 1),
        ("neither", 1),
    ]
    assert all(job.config == CONFIG for job in jobs)
    assert row_job(CONFIG, "residual_only", 2).name == "residual_only-seed2"


def test_beside_the_output() -> None:
    out = Path("recordings/the-transformer-block.json")
    assert partial_dir(out) == Path("recordings/the-transformer-block.json.partial")
    assert temporary_path(out) == Path("recordings/the-transformer-block.json.tmp")


def a_row(key: RowKey = "both", seed: int = 0) -> Run:
    recording = sample_recording(seeds=(seed,), config=CONFIG)
    return next(r for r in recording.runs if r.config.row_key == key)


def job(key: RowKey, seed: int) -> Job:
    return row_job(CONFIG, key, seed)


def test_kept_rows_survive_a_rerun_with_the_same_config(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    first = PartialRows(out, fingerprint(CONFIG, "cpu"), fresh=False)
    first.save(a_row(), job("both", 0).name)
    again = PartialRows(out, fingerprint(CONFIG, "cpu"), fresh=False)
    assert again.load(job("both", 0)) == a_row()
    assert again.load(job("neither", 0)) is None


@pytest.mark.parametrize(
    ("config", "device", "fresh"),
    [
        (CONFIG.model_copy(update={"steps": 41}), "cpu", False),
        (CONFIG, "cuda", False),
        (CONFIG, "cpu", True),
    ],
)
def test_kept_rows_are_dropped_when_they_would_not_match(
    tmp_path: Path, config: RunConfig, device: str, fresh: bool
) -> None:
    out = tmp_path / "r.json"
    PartialRows(out, fingerprint(CONFIG, "cpu"), fresh=False).save(a_row(), "both-seed0")
    again = PartialRows(out, fingerprint(config, device), fresh=fresh)
    assert again.load(job("both", 0)) is None
    assert json.loads((again.dir / "run.json").read_text())["device"] == device


def test_a_damaged_kept_row_is_trained_again(tmp_path: Path) -> None:
    kept = PartialRows(tmp_path / "r.json", fingerprint(CONFIG, "cpu"), fresh=False)
    kept.path("both-seed0").write_text("{half a row", encoding="utf-8")
    assert kept.load(job("both", 0)) is None
    kept.save(a_row("both", 0), "both-seed0")
    assert kept.load(job("both", 1)) is None  # a file under the wrong name is not used
    kept.path("both-seed0").rename(kept.path("both-seed1"))
    assert kept.load(job("both", 1)) is None
    # A run kept at other settings than the job's (another config) is trained again.
    kept.save(a_row("both", 0), "both-seed0")
    assert (
        PartialRows.load(kept, row_job(CONFIG.model_copy(update={"depth": 3}), "both", 0)) is None
    )
    kept.remove()
    assert not kept.dir.exists()


def test_the_recording_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "r.json"
    recording = sample_recording()
    size = write_recording(out, recording)
    assert size == out.stat().st_size < 1_000_000
    assert parse_recording(out.read_bytes(), str(out)) == recording
    assert not temporary_path(out).exists()


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("the old recording", encoding="utf-8")
    temporary_path(out).mkdir()  # something in the way of the temporary file
    with pytest.raises(OSError):
        write_recording(out, sample_recording())
    assert out.read_text(encoding="utf-8") == "the old recording"
    assert issubclass(RecordError, Exception)
