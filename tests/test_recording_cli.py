"""`normdive check-recording PATH`: validates a file and prints its summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from normdive.cli import app
from normdive.recording.reader import (
    MAX_RECORDING_BYTES,
    REMEDY,
    RecordingProblem,
    recording_status,
)
from normdive.recording.runs import ShardPart
from sample_recordings import sample_recording

runner = CliRunner()
# The console script installed beside this interpreter.
NORMDIVE = str(Path(sys.executable).parent / "normdive")


def test_a_whole_recording_passes_with_its_summary(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(sample_recording(seeds=(0, 1, 2)).model_dump_json(), encoding="utf-8")
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 0, result.output
    assert "made by: sample_recording()" in result.output
    assert "| both (best) | on | on | 100.0 % |" in result.output
    assert "Every seed ranks the rows the same way." in result.output
    assert "OK: the page can play it; best row at seed 0: both." in result.output


def test_missing_rows_fail_after_showing_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(sample_recording(rows=("both",)).model_dump_json(), encoding="utf-8")
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1
    assert "| both (best) |" in result.output
    assert "lacks the ablation row(s) residual_only, layernorm_only, neither" in result.output


def test_broken_and_missing_files_fail_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1 and "does not exist" in result.output
    path.write_text('{"format_version": 3}', encoding="utf-8")
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1 and "has format_version 3" in result.output
    result = runner.invoke(app, ["check-recording", str(tmp_path)])
    assert result.exit_code == 1 and "cannot be read" in result.output


@pytest.mark.parametrize(
    ("name", "kind", "command"),
    [
        ("the-transformer-block.json", None, "`normdive record-runs`"),
        ("the-transformer-block-sweep.json", "depth_sweep", "`normdive record-runs --sweep`"),
        ("the-transformer-block-lab.json", "lab_grid", "`normdive record-runs --lab`"),
    ],
)
def test_a_file_of_format_version_1_is_refused_naming_it_and_changes_nothing(
    tmp_path: Path, name: str, kind: str | None, command: str
) -> None:
    path = tmp_path / name
    body = json.dumps({"format_version": 1, **({"kind": kind} if kind else {}), "runs": []})
    path.write_text(body, encoding="utf-8")
    told = "has format_version 1, a format this normdive no longer reads"
    checked = runner.invoke(app, ["check-recording", str(path)])
    assert checked.exit_code == 1 and told in checked.output
    assert f"Re-record it: run {command} to make it again." in checked.output
    merged = tmp_path / "merged.json"
    merging = runner.invoke(app, ["merge-recordings", str(path), "--out", str(merged)])
    assert merging.exit_code == 1 and told in merging.output
    assert path.read_text(encoding="utf-8") == body
    assert [found.name for found in tmp_path.iterdir()] == [name]


def test_a_file_over_the_readers_cap_is_refused_with_the_limit_named(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b" " * (MAX_RECORDING_BYTES + 1))
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1
    assert "is larger than 16 MiB (16,777,216 bytes), the most normdive reads" in result.output


def test_help() -> None:
    result = runner.invoke(app, ["check-recording", "--help"])
    assert result.exit_code == 0 and "Validate any file record-runs writes" in result.output


# JSON nested far deeper than Python's recursion limit, which the json module parses by
# recursion.
DEEPLY_NESTED = b"[" * 100_000 + b"]" * 100_000


def test_a_file_nested_100000_levels_deep_fails_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(DEEPLY_NESTED)
    result = subprocess.run(
        [NORMDIVE, "check-recording", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"The recording {path} nests its JSON too deeply to read; it is not a recording. {REMEDY}"
    )


def test_the_server_reports_the_same_problem_for_it(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(DEEPLY_NESTED)
    problem = recording_status(path)
    assert isinstance(problem, RecordingProblem)
    assert problem.reason == "bad_json"
    assert "nests its JSON too deeply to read" in problem.message


SHIPPED = Path(__file__).resolve().parents[1] / "recordings"


def test_every_shipped_file_passes() -> None:
    """The recording, its depth sweep and its lab grid, each recognised by its kind."""
    files = sorted(SHIPPED.glob("*.json"))
    assert [f.name for f in files] == [
        "the-transformer-block-lab.json",
        "the-transformer-block-sweep.json",
        "the-transformer-block.json",
    ]
    for path in files:
        result = runner.invoke(app, ["check-recording", str(path)])
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1].startswith("OK: "), result.output


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("the-transformer-block-lab.json", "`normdive record-runs --lab`"),
        ("the-transformer-block-sweep.json", "`normdive record-runs --sweep`"),
        ("the-transformer-block.json", "`normdive record-runs`"),
    ],
)
def test_a_damaged_file_is_told_the_command_that_makes_its_kind(
    tmp_path: Path, name: str, command: str
) -> None:
    shipped = (SHIPPED / name).read_bytes()
    cases = [
        (name, shipped[: len(shipped) // 2]),  # cut short: not JSON, its name tells its kind
        (name, None),  # missing: its name tells its kind
        # Valid JSON under another name, a field misspelt: its contents tell its kind.
        ("renamed.json", shipped.replace(b'"provenance"', b'"provenancx"', 1)),
    ]
    for damaged_name, damaged in cases:
        path = tmp_path / damaged_name
        path.unlink(missing_ok=True)
        if damaged is not None:
            path.write_bytes(damaged)
        result = runner.invoke(app, ["check-recording", str(path)])
        assert result.exit_code == 1, (damaged_name, result.output)
        assert f"Run {command} to make it again." in result.output, (damaged_name, result.output)
        assert "Traceback" not in result.output


@pytest.mark.parametrize("content", ['{"kind": "playlist"}', "[1, 2, 3]", '"a string"'])
def test_a_foreign_file_is_told_what_makes_each_kind(tmp_path: Path, content: str) -> None:
    path = tmp_path / "notes.json"
    path.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1
    assert "is not a file record-runs writes" in result.output
    for command in ("normdive record-runs`", "--sweep`", "--lab`"):
        assert command in result.output


def test_a_shard_is_described_and_told_to_merge(tmp_path: Path) -> None:
    whole = sample_recording(seeds=(0, 1))
    part = ShardPart(index=2, count=2)
    wanted = whole.plan.model_copy(update={"shard": part}).sharded()
    held = [run for run in whole.runs if run.config in wanted]
    shard = whole.model_copy(update={"runs": held}).shard_of(part)
    path = tmp_path / "the-transformer-block.shard-2-of-2.json"
    path.write_text(shard.model_dump_json(), encoding="utf-8")
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 0, result.output
    assert "shard 2 of 2 of the recording" in result.output
    assert "`normdive merge-recordings`" in result.output.splitlines()[-1]
