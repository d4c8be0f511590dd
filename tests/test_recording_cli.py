"""`normdive check-recording PATH`: validates a file and prints its summary."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from normdive.cli import app
from sample_recordings import sample_recording

runner = CliRunner()


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
    path.write_text('{"format_version": 2}', encoding="utf-8")
    result = runner.invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1 and "has format_version 2" in result.output
    result = runner.invoke(app, ["check-recording", str(tmp_path)])
    assert result.exit_code == 1 and "cannot be read" in result.output


def test_help() -> None:
    result = runner.invoke(app, ["check-recording", "--help"])
    assert result.exit_code == 0 and "Validate a recording file" in result.output
