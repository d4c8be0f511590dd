"""A closed gate stays closed: the write that closes it stores one gate_closed event naming
the recording (its file and the SHA-256 of its bytes), and replacing the recording with one
where another row is best, leaves the gate closed. The page says which recording it closed
on. And a recording rewritten in place is never served half written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from starlette.testclient import TestClient

from helpers import SettingsFactory, ablation_recording, write_recording
from lesson_answers import (
    JSON,
    LESSON,
    RIGHT_NUMBERS,
    ROW_PREDICTIONS,
    post_each,
    steps_to_the_gate,
)
from normdive.progress.events import EventKind
from normdive.progress.history import SHORT_DIGEST_CHARS
from normdive.recording.format import ROW_KEYS
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME, cookie_value, make_signer
from page_client import PageClient

pytestmark = pytest.mark.both_databases


def gate_of(client: TestClient) -> Tag:
    response = client.get("/")
    assert response.status_code == 200
    gate = BeautifulSoup(response.text, "html.parser").select_one("#gate")
    assert isinstance(gate, Tag)
    return gate


def text(tag: Tag, selector: str) -> str:
    found = tag.select_one(selector)
    assert isinstance(found, Tag), selector
    return " ".join(found.get_text().split())


def close_the_gate(client: TestClient, best: str) -> None:
    post_each(client, steps_to_the_gate(played=tuple(key for key in ROW_KEYS if key != best)))
    assert client.get("/api/state").json()["state"]["gate"]["closed"] is False
    assert client.post(f"/rows/{best}/play", headers=JSON).status_code == 200


def gate_closings(database_url: str, learner_id: str) -> list[dict[str, object]]:
    engine = make_engine(database_url)
    try:
        events = Store(engine).events_for(learner_id)
    finally:
        engine.dispose()
    return [event.payload for event in events if event.kind is EventKind.GATE_CLOSED]


def replace_atomically(path: Path, text: str) -> None:
    fresh = path.with_suffix(".new")
    fresh.write_text(text, encoding="utf-8")
    os.replace(fresh, path)


def test_a_closed_gate_stays_closed_when_the_recording_is_replaced(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    path = write_recording(tmp_path, ablation_recording("both"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    settings = make_settings(recording_path=path)
    with PageClient(create_app(settings), follow_redirects=False) as client:
        close_the_gate(client, "both")
        learner_id = client.get("/api/state").json()["learner_id"]
        closed_on = LESSON.gate.closed_on.format(file=path.name, digest=digest[:SHORT_DIGEST_CHARS])
        assert text(gate_of(client), "#gate-closed-on") == " ".join(closed_on.split())

        # Another row is best in the new recording: the learner never played it first.
        replace_atomically(path, ablation_recording("residual_only").model_dump_json())
        gate = gate_of(client)
        assert "closed" in gate["class"]
        assert text(gate, ".badge") == "met"
        assert text(gate, "#gate-closed-on") == " ".join(closed_on.split())

        # Further writes (a replay, a takeaway) close nothing again.
        assert client.post("/rows/neither/play", headers=JSON).status_code == 200
        assert client.post("/takeaway", data={"text": "x"}, headers=JSON).status_code == 200
    assert gate_closings(settings.database_url, learner_id) == [
        {"recording_digest": digest, "recording_file": path.name}
    ]


def test_a_gate_closed_without_its_closing_recorded_keeps_it_from_the_next_page(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    # A learner whose gate closed before closings were recorded: their history holds every
    # part of the gate but no gate_closed event (copied here from a learner who closed it).
    # Opening the page records the closing, so a new recording where another row is best
    # leaves the gate closed.
    path = write_recording(tmp_path, ablation_recording("both"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    settings = make_settings(recording_path=path)
    app = create_app(settings)
    with PageClient(app, follow_redirects=False) as client:
        close_the_gate(client, "both")
        source = client.get("/api/state").json()["learner_id"]
    engine = make_engine(settings.database_url)
    try:
        store = Store(engine)
        earlier = "0" * 31 + "1"
        store.ensure_learner(earlier)
        for event in store.events_for(source):
            if event.kind is not EventKind.GATE_CLOSED:
                store.append(earlier, event.kind, event.payload)
    finally:
        engine.dispose()
    assert gate_closings(settings.database_url, earlier) == []
    with PageClient(app, follow_redirects=False) as client:
        client.cookies.set(COOKIE_NAME, cookie_value(earlier, make_signer(settings)))
        assert text(gate_of(client), "#gate-closed-on")  # recorded by this page view
        replace_atomically(path, ablation_recording("residual_only").model_dump_json())
        gate = gate_of(client)
        assert text(gate, ".badge") == "met"
    assert gate_closings(settings.database_url, earlier) == [
        {"recording_digest": digest, "recording_file": path.name}
    ]


def test_the_checklist_of_a_gate_closed_on_an_earlier_recording_keeps_its_best_row(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    path = write_recording(tmp_path, ablation_recording("both"))
    with PageClient(create_app(make_settings(recording_path=path)), follow_redirects=False) as c:
        post_each(c, steps_to_the_gate(played=("both",)))  # the best row only: the gate closes
        replace_atomically(path, ablation_recording("neither").model_dump_json())
        gate = gate_of(c)
        assert text(gate, ".badge") == "met"
        assert text(gate, "#gate-best-row") == (
            "The best row of the recording the gate closed on was played."
        )


def test_an_open_gate_has_no_closing_line_and_stores_no_closing(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    path = write_recording(tmp_path, ablation_recording("both"))
    settings = make_settings(recording_path=path)
    with PageClient(create_app(settings), follow_redirects=False) as client:
        client.post("/predict", data={"choice": "residual"}, headers=JSON)
        client.post("/numbers", data=RIGHT_NUMBERS, headers=JSON)
        gate = gate_of(client)
        assert text(gate, ".badge") == "not yet"
        assert gate.select_one("#gate-closed-on") is None
        learner_id = client.get("/api/state").json()["learner_id"]
    assert gate_closings(settings.database_url, learner_id) == []


def test_a_recording_half_written_in_place_is_never_served(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    path = write_recording(tmp_path, ablation_recording("both"))
    whole = path.read_bytes()
    with PageClient(
        create_app(make_settings(recording_path=path)), follow_redirects=False
    ) as client:
        client.post("/predict", data={"choice": "residual"}, headers=JSON)
        for key, outcome in ROW_PREDICTIONS.items():
            client.post(f"/rows/{key}/predict", data={"outcome": outcome}, headers=JSON)
        path.write_bytes(whole[: len(whole) // 2])  # the rewrite is half way through
        played = client.post("/rows/both/play", headers=JSON)
        assert played.status_code == 200, played.json()["message"]
        assert gate_of(client).select_one("#gate-cannot-close") is None
