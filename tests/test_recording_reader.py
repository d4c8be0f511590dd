"""The reader the web uses: one clear problem per way a file fails, and the best row."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from normdive.recording.format import Recording
from normdive.recording.reader import (
    RecordingProblem,
    best_row,
    ranking,
    read_recording,
    recording_status,
)
from sample_recordings import sample_recording


def write(path: Path, recording: Recording) -> Path:
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
            "has format_version 7; this normdive reads format_version 1",
        ),
        (b'{"rows": []}', "unknown_version", "has no format_version"),
        (b'{"format_version": 1, "rows": []}', "invalid", "does not match the format: "),
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
    for row in data["rows"]:
        row["final"]["heldout_accuracy"] = "lots"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    problem = problem_of(path)
    assert problem.reason == "invalid"
    assert "rows.0.final.heldout_accuracy" in problem.message
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
    rows = [
        row.model_copy(update={"final": row.final.model_copy(update={"heldout_accuracy": 0.99})})
        if (row.key, row.seed) == ("neither", 1)
        else row
        for row in base.rows
    ]
    recording = base.model_copy(update={"rows": rows})
    recording = Recording.model_validate_json(recording.model_dump_json())
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
