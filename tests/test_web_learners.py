"""What a write's answer reads (web.infrastructure.learners and the page's answers): once the
gate has closed, the lab panel in the gate's region lists the learner's runs, read from every
event of theirs; an answer that redraws no such region does not read them. Counted in SQLite's
own trace of the statements it runs, on a real file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from helpers import SettingsFactory, ablation_recording, write_recording
from lesson_answers import (
    JSON,
    post_each,
    steps_to_the_gate,
)
from normdive.recording.format import ROW_KEYS
from normdive.web.app import create_app
from page_client import PageClient

# How a statement that reads a learner's events begins (store.event_store: the History's
# extension, or every event from the start for the lab's runs).
EVENTS_READ = "SELECT id, kind, payload, created_at FROM events"


class Traced(PageClient):
    """A client of an app whose SQLite connections report each statement they run."""

    statements: list[str]

    def reads_of_events(self, path: str, data: dict[str, str]) -> int:
        """How many statements reading events the JSON post of `data` to `path` ran."""
        self.statements.clear()
        assert self.post(path, data=data, headers=JSON).status_code == 200, path
        return sum(statement.startswith(EVENTS_READ) for statement in self.statements)


@pytest.fixture
def client(make_settings: SettingsFactory, tmp_path: Path) -> Iterator[Traced]:
    recording = write_recording(tmp_path, ablation_recording())
    app = create_app(make_settings(recording_path=recording, attempts_per_minute=10_000))
    statements: list[str] = []

    def trace(dbapi_connection: object, _record: object) -> None:
        dbapi_connection.set_trace_callback(  # type: ignore[attr-defined]
            lambda statement: statements.append(" ".join(statement.split()))
        )

    event.listen(app.state.services.engine, "connect", trace)
    with Traced(app) as traced:
        traced.statements = statements
        yield traced


def close_the_gate(client: Traced) -> None:
    post_each(client, steps_to_the_gate())
    assert client.get("/api/state").json()["state"]["gate"]["closed"] is True


def test_an_answer_that_redraws_no_lab_panel_reads_no_runs(client: Traced) -> None:
    close_the_gate(client)
    # The takeaway's answer redraws its status only: the History's extension, nothing more.
    assert client.reads_of_events("/takeaway", {"text": "layer norm rescales"}) == 1
    # A replay redraws the gate, and with it the lab panel's runs.
    assert client.reads_of_events(f"/rows/{ROW_KEYS[0]}/play", {}) == 2
