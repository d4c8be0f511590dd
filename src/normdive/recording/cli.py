"""Commands of `normdive` owned by normdive.recording (registered on import by normdive.cli)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from normdive.cli import app, db_app, prerequisite_app  # noqa: F401
from normdive.recording.reader import (
    RecordingProblem,
    best_row,
    parse_recording,
    read_capped,
    require_ablation_rows,
)
from normdive.recording.summary import ranking_note, summary_table


@app.command("check-recording")
def check_recording(
    path: Annotated[Path, typer.Argument(help="The recording file to check.")],
) -> None:
    """Validate a recording file and print its summary (exit 1 when the page cannot use it)."""
    try:
        recording = parse_recording(read_capped(path), str(path))
    except RecordingProblem as problem:
        typer.echo(problem.message, err=True)
        raise typer.Exit(1) from None
    source = recording.provenance
    typer.echo(f"{path}: format_version {recording.format_version}, lesson {recording.lesson!r}")
    typer.echo(f"made by: {source.command}")
    typer.echo(
        f"on {source.created_at} with {source.device}, torch {source.torch_version}, "
        f"normdive {source.normdive_version}, commit {source.git_commit or 'unknown'}; "
        f"wall time {source.wall_s:.0f} s"
    )
    config = recording.config
    typer.echo(
        f"depth {config.depth}, copy length {config.copy_length}, init {config.init}, "
        f"{config.steps} steps at batch {config.batch_size}; seeds "
        f"{', '.join(map(str, recording.seeds))} (the page plays seed {recording.page_seed})"
    )
    if recording.rows:
        typer.echo("")
        for line in summary_table(recording):
            typer.echo(line)
        typer.echo("")
        typer.echo(ranking_note(recording))
    try:
        require_ablation_rows(recording, str(path))
    except RecordingProblem as problem:
        typer.echo(problem.message, err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"OK: the page can play it; best row at seed {recording.page_seed}: {best_row(recording)}."
    )
