"""What is once stays once when a learner's requests race: fifty at a time, through a real
`normdive serve --workers 2`, on a SQLite file and on PostgreSQL.

For each once-only fact (the opening prediction, a row's prediction, a field landing, the
right reading, the gate's closing) the store holds one event however many requests race, the
one request that stored it says what was stored, and every other request gets the answer the
same request gets when sent alone afterwards: the readable 409. Stored events are counted by
reading the database.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from fresh_loop import run_in_fresh_loop
from helpers import ablation_recording, write_recording
from lesson_answers import LESSON, RIGHT_NUMBERS, RIGHT_READING_ID, WRONG_READING_ID
from normdive.progress.events import Event, EventKind
from normdive.recording.format import ROW_KEYS
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from ops_server import JSON, TOKEN_HEADER, Learner, ServerProcess

pytestmark = [pytest.mark.both_databases, pytest.mark.slow]

RACING = 50
WORKERS = 2
REQUEST_TIMEOUT_S = 120.0
PREDICTIONS = {"both": "learns", "residual_only": "partial", "layernorm_only": "chance"}

Answer = tuple[int, str]


async def _all_at_once(
    url: str, cookies: httpx.Cookies, token: str, posts: list[tuple[str, dict[str, str]]]
) -> list[tuple[int, dict[str, Any]]]:
    limits = httpx.Limits(max_connections=len(posts), max_keepalive_connections=len(posts))
    async with httpx.AsyncClient(
        base_url=url,
        cookies=cookies,
        headers={**JSON, TOKEN_HEADER: token},
        limits=limits,
        timeout=REQUEST_TIMEOUT_S,
    ) as client:
        answers = await asyncio.gather(*(client.post(path, data=data) for path, data in posts))
    return [(answer.status_code, answer.json()) for answer in answers]


def race(
    server: ServerProcess, learner: Learner, posts: list[tuple[str, dict[str, str]]]
) -> list[tuple[int, dict[str, Any]]]:
    token = str(learner.state()["csrf_token"])
    return run_in_fresh_loop(lambda: _all_at_once(server.url, learner.http.cookies, token, posts))


def stored(database_url: str, learner_id: str) -> list[Event]:
    engine = make_engine(database_url)
    try:
        return Store(engine).events_for(learner_id)
    finally:
        engine.dispose()


def kinds(events: list[Event]) -> Counter[EventKind]:
    return Counter(event.kind for event in events)


def one_won(answers: list[tuple[int, dict[str, Any]]], alone: httpx.Response) -> dict[str, Any]:
    """Exactly one answer is a 200; every other one is what the same request gets alone."""
    won = [body for status, body in answers if status == 200]
    refused = {(status, body["message"]) for status, body in answers if status != 200}
    assert len(won) == 1, Counter(status for status, _ in answers)
    assert alone.status_code == 409
    assert refused == {(alone.status_code, alone.json()["message"])}
    return won[0]


def test_fifty_racing_requests_store_each_once_only_fact_once(
    database_url: str, tmp_path: Path
) -> None:
    recording = write_recording(tmp_path, ablation_recording("both"))
    choices = [choice.id for choice in LESSON.predict.choices]
    outcomes = [outcome.id for outcome in LESSON.outcomes]
    with ServerProcess(
        database_url, tmp_path, workers=WORKERS, NORMDIVE_RECORDING_PATH=str(recording)
    ) as server:
        learner = Learner(server.url)
        try:
            learner_id = learner.id
            # The opening prediction, the two choices alternating.
            predicts = [("/predict", {"choice": choices[i % 2]}) for i in range(RACING)]
            won = one_won(race(server, learner, predicts), learner.post(*predicts[0]))
            committed = [
                e
                for e in stored(database_url, learner_id)
                if e.kind is EventKind.PREDICTION_COMMITTED
            ]
            assert len(committed) == 1
            label = next(
                c.label for c in LESSON.predict.choices if c.id == committed[0].payload["choice"]
            )
            assert won["message"] == f"{LESSON.predict.committed_text} {label}"

            # One row's prediction, the three outcomes in turn.
            row_predicts = [
                ("/rows/neither/predict", {"outcome": outcomes[i % 3]}) for i in range(RACING)
            ]
            won = one_won(race(server, learner, row_predicts), learner.post(*row_predicts[0]))
            rows = [
                e for e in stored(database_url, learner_id) if e.kind is EventKind.ROW_PREDICTED
            ]
            assert len(rows) == 1
            outcome = LESSON.outcome(str(rows[0].payload["outcome"]))
            assert outcome is not None and won["message"].endswith(outcome.label)

            # A right answer lands once, and counts one evaluated run.
            numbers = [("/numbers", {"row1_mean": RIGHT_NUMBERS["row1_mean"]})] * RACING
            one_won(race(server, learner, numbers), learner.post(*numbers[0]))
            assert kinds(stored(database_url, learner_id))[EventKind.NUMBERS_CHECKED] == 1
            assert learner.state()["state"]["evaluated_runs"] == 1

            # A wrong reading sent again and again (a double click, a resent form) is locked
            # once, and is one run; then the right reading is locked once.
            wrong = [("/reading", {"choice": WRONG_READING_ID})] * RACING
            one_won(race(server, learner, wrong), learner.post(*wrong[0]))
            assert kinds(stored(database_url, learner_id))[EventKind.READING_LOCKED] == 1
            assert learner.state()["state"]["evaluated_runs"] == 2
            readings = [("/reading", {"choice": RIGHT_READING_ID})] * RACING
            one_won(race(server, learner, readings), learner.post(*readings[0]))
            assert kinds(stored(database_url, learner_id))[EventKind.READING_LOCKED] == 2

            # The gate closes once: fifty plays of the best row all count, one closes it.
            assert learner.post("/numbers", RIGHT_NUMBERS).status_code == 200
            for key, predicted in PREDICTIONS.items():
                assert (
                    learner.post(f"/rows/{key}/predict", {"outcome": predicted}).status_code == 200
                )
            for key in ROW_KEYS[1:]:
                assert learner.post(f"/rows/{key}/play", {}).status_code == 200
            plays = [("/rows/both/play", {})] * RACING
            assert [status for status, _ in race(server, learner, plays)] == [200] * RACING
            assert learner.state()["state"]["gate"]["closed"] is True
        finally:
            learner.close()
    counts = kinds(stored(database_url, learner_id))
    assert counts[EventKind.PREDICTION_COMMITTED] == 1
    assert counts[EventKind.ROW_PREDICTED] == len(ROW_KEYS)
    assert counts[EventKind.READING_LOCKED] == 2
    assert counts[EventKind.ROW_PLAYED] == RACING + len(ROW_KEYS) - 1
    assert counts[EventKind.GATE_CLOSED] == 1
