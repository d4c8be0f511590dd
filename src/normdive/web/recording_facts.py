"""The recording, as the gate needs it: one adapter from the recording's reader to
progress.state.RecordingFacts, so the rest of the web app never reads the file itself."""

from __future__ import annotations

from pathlib import Path

from normdive.progress.state import RecordingFacts


def recording_facts(path: Path) -> RecordingFacts:
    """What the recording at `path` lets the gate know. Never raises."""
    try:
        from normdive.recording import reader  # type: ignore[attr-defined]
    except ImportError:  # the reader has not landed yet
        return RecordingFacts(problem="the ablation rows are not in the 8.5 recording yet.")
    status = reader.recording_status(path)
    if isinstance(status, reader.RecordingProblem):
        return RecordingFacts(problem=str(status.message))
    return RecordingFacts(problem=None, best_row=str(reader.best_row(status)))
