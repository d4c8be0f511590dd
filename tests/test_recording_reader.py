"""The reader the web uses: one clear problem per way a file fails, and the best row."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path

import pytest

from normdive.recording import reader
from normdive.recording.reader import (
    MAX_RECORDING_BYTES,
    RecordingProblem,
    best_row,
    ranking,
    read_recording,
    recording_snapshot,
    recording_status,
)
from normdive.recording.runs import Runs
from sample_recordings import sample_recording


def write(path: Path, recording: Runs) -> Path:
    path.write_text(recording.model_dump_json(), encoding="utf-8")
    return path


def test_reads_a_whole_recording(tmp_path: Path) -> None:
    recording = sample_recording(seeds=(0, 1, 2))
    assert read_recording(write(tmp_path / "r.json", recording)) == recording


def problem_of(path: Path) -> RecordingProblem:
    with pytest.raises(RecordingProblem) as caught:
        read_recording(path)
    return caught.value


@pytest.mark.parametrize(
    ("content", "reason", "fragment"),
    [
        (None, "missing", "does not exist"),
        (b'{"format_version": 1, "rows": [', "bad_json", "is not valid JSON (line 1"),
        (b"", "bad_json", "is not valid JSON"),
        (b"\xff\xfe\x00", "unreadable", "is not UTF-8"),
        (b"[1, 2]", "invalid", "holds a JSON list"),
        (
            b'{"format_version": 7}',
            "unknown_version",
            "has format_version 7; this normdive reads format_version 2",
        ),
        (b'{"rows": []}', "unknown_version", "has no format_version"),
        (b'{"format_version": 2, "runs": []}', "invalid", "does not match the format: "),
        (
            b'{"format_version": 1, "rows": []}',
            "unknown_version",
            "has format_version 1, a format this normdive no longer reads (each plan's own, "
            "before files of runs). Re-record it: run `normdive record-runs`",
        ),
    ],
)
def test_each_failure_has_its_reason_and_names_the_file(
    tmp_path: Path, content: bytes | None, reason: str, fragment: str
) -> None:
    path = tmp_path / "the-transformer-block.json"
    if content is not None:
        path.write_bytes(content)
    problem = problem_of(path)
    assert problem.reason == reason
    assert fragment in problem.message
    assert str(path) in problem.message


def test_a_directory_is_unreadable(tmp_path: Path) -> None:
    problem = problem_of(tmp_path)
    assert problem.reason == "unreadable"
    assert str(tmp_path) in problem.message


def test_validation_messages_name_the_field_and_stay_short(tmp_path: Path) -> None:
    data = json.loads(sample_recording().model_dump_json())
    for run in data["runs"]:
        run["final"]["heldout_accuracy"] = "lots"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    problem = problem_of(path)
    assert problem.reason == "invalid"
    assert "runs.0.final.heldout_accuracy" in problem.message
    assert "and 1 more" in problem.message  # 4 rows wrong, 3 listed


def test_a_file_without_ablation_rows(tmp_path: Path) -> None:
    problem = problem_of(write(tmp_path / "r.json", sample_recording(rows=())))
    assert problem.reason == "no_ablation_rows"
    assert "has no ablation rows at seed 0" in problem.message


def test_a_file_missing_some_rows_at_the_page_seed(tmp_path: Path) -> None:
    recording = sample_recording(rows=("both", "neither"), seeds=(0, 1))
    problem = problem_of(write(tmp_path / "r.json", recording))
    assert problem.reason == "no_ablation_rows"
    assert "lacks the ablation row(s) residual_only, layernorm_only at seed 0" in problem.message


def test_status_never_raises_and_rereads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    missing = recording_status(path)
    assert isinstance(missing, RecordingProblem) and missing.reason == "missing"
    path.write_text("{", encoding="utf-8")
    broken = recording_status(path)
    assert isinstance(broken, RecordingProblem) and broken.reason == "bad_json"
    assert recording_status(path) is broken  # cached while (mtime, size) stand still
    recording = sample_recording()
    write(path, recording)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert recording_status(path) == recording


def test_the_snapshot_carries_the_digest_of_the_files_bytes(tmp_path: Path) -> None:
    path = write(tmp_path / "r.json", sample_recording())
    snapshot = recording_snapshot(path)
    assert isinstance(snapshot.status, Runs)
    assert snapshot.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert recording_snapshot(tmp_path / "absent.json").digest is None


def test_an_edit_keeping_size_and_mtime_is_noticed_by_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No wait for the periodic re-hash: every call re-reads while the stat stands still.
    monkeypatch.setattr(reader, "CONTENT_RECHECK_S", 0.0)
    path = write(tmp_path / "r.json", sample_recording())
    first = recording_snapshot(path)
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    edited = text.replace("sample_recording()", "sample_recordinG()")
    assert edited != text and len(edited) == len(text)
    path.write_text(edited, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    second = recording_snapshot(path)
    assert isinstance(second.status, Runs)
    assert second.status.provenance[0].command == "sample_recordinG()"
    assert second.digest != first.digest
    assert recording_snapshot(path) == second  # the same bytes again: the same snapshot


def test_a_half_written_file_keeps_the_last_good_recording(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "r.json", sample_recording())
    good = recording_snapshot(path)
    whole = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="normdive.recording.reader"):
        path.write_bytes(whole[: len(whole) // 2])  # rewritten in place, half way through
        assert recording_snapshot(path) == good
        assert recording_snapshot(path) == good
    warned = [r.getMessage() for r in caplog.records if r.name == "normdive.recording.reader"]
    assert len(warned) == 1 and "(bad_json)" in warned[0] and str(good.digest) in warned[0]
    # The write completes with another recording: that one is served.
    replacement = sample_recording(seeds=(0, 1))
    write(path, replacement)
    assert recording_status(path) == replacement


def test_a_file_broken_for_longer_than_the_grace_shows_its_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "r.json", sample_recording())
    recording_snapshot(path)
    whole = path.read_bytes()
    monkeypatch.setattr(reader, "LAST_GOOD_GRACE_S", 0.0)  # the grace is already over
    path.write_bytes(whole[: len(whole) // 2])
    status = recording_status(path)
    assert isinstance(status, RecordingProblem) and status.reason == "bad_json"


def test_a_deleted_recording_shows_its_problem_at_once(tmp_path: Path) -> None:
    # A write in progress never deletes the file: the last good recording is not kept for it.
    path = write(tmp_path / "r.json", sample_recording())
    recording_snapshot(path)
    path.unlink()
    status = recording_status(path)
    assert isinstance(status, RecordingProblem) and status.reason == "missing"


def test_a_path_that_never_held_a_good_recording_shows_its_problem(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"format_version": 1, "rows": [', encoding="utf-8")
    status = recording_status(path)
    assert isinstance(status, RecordingProblem) and status.reason == "bad_json"


def test_a_file_over_the_cap_is_refused_with_the_limit_named(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b" " * (MAX_RECORDING_BYTES + 1))
    problem = problem_of(path)
    assert problem.reason == "too_large"
    assert "larger than 16 MiB (16,777,216 bytes)" in problem.message
    status = recording_status(path)
    assert isinstance(status, RecordingProblem) and status.reason == "too_large"


def test_status_of_a_directory_is_a_problem(tmp_path: Path) -> None:
    status = recording_status(tmp_path)
    assert isinstance(status, RecordingProblem) and status.reason == "unreadable"


@pytest.mark.parametrize(
    ("finals", "best"),
    [
        ({}, "both"),
        # Highest accuracy wins, wherever it sits.
        ({"both": (0.3, 1.0), "residual_only": (0.9, 0.5)}, "residual_only"),
        # Equal accuracy: the lower loss wins.
        ({"both": (1.0, 0.02), "residual_only": (1.0, 0.01)}, "residual_only"),
        # Equal on both figures: the page's row order decides.
        ({"both": (1.0, 0.01), "residual_only": (1.0, 0.01)}, "both"),
        # A NaN accuracy ranks last; a NaN loss loses the tie.
        ({"both": (math.nan, 0.0), "neither": (0.07, 2.7)}, "residual_only"),
        ({"both": (1.0, math.nan), "residual_only": (1.0, 3.0)}, "residual_only"),
    ],
)
def test_best_row(finals: dict[str, tuple[float, float]], best: str) -> None:
    recording = sample_recording(finals)  # type: ignore[arg-type]
    assert best_row(recording) == best
    assert ranking(recording)[0] == best


def test_best_row_reads_the_page_seed_unless_told(tmp_path: Path) -> None:
    base = sample_recording(seeds=(0, 1))
    runs = [
        run.model_copy(update={"final": run.final.model_copy(update={"heldout_accuracy": 0.99})})
        if (run.config.row_key, run.config.seed) == ("neither", 1)
        else run
        for run in base.runs
    ]
    recording = base.model_copy(update={"runs": runs})
    recording = Runs.model_validate_json(recording.model_dump_json())
    assert best_row(recording) == "both"
    assert best_row(recording, seed=1) == "both"  # 1.0 still beats 0.99
    assert best_row(recording, seed=0) == "both"
    with pytest.raises(RecordingProblem) as caught:
        best_row(recording, seed=7)
    assert caught.value.reason == "no_ablation_rows"


def test_problems_compare_and_print() -> None:
    one = RecordingProblem("missing", "gone")
    assert one == RecordingProblem("missing", "gone")
    assert one != RecordingProblem("bad_json", "gone")
    assert str(one) == "gone" and "missing" in repr(one)
    assert len({one, RecordingProblem("missing", "gone")}) == 1
