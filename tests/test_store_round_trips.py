"""What the store costs PostgreSQL in round trips, counted by libpq itself (its protocol trace:
one Query message, or one Sync closing an extended-protocol exchange, per round trip), and
that a pooled connection whose server went away is replaced without one: a read is one round
trip (no ping, no BEGIN, no ROLLBACK), a compare-and-append four (BEGIN, the learner's lock,
the insert that checks the last id, COMMIT), and after the server restarts the next read
is answered."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_cluster import PostgresCluster
from sqlalchemy import Engine, event

from normdive.progress.events import EventKind
from normdive.store.db import make_engine, upgrade
from normdive.store.event_store import EventList, Store

pytestmark = pytest.mark.postgresql

# A frontend message that ends a round trip (libpq's trace: "F <length> <message> ...").
ROUND_TRIP = re.compile(r"^F\t\d+\t(Query|Sync)\b", re.MULTILINE)
NOTE = {"text": "a takeaway"}


class Traced:
    """Every pooled connection of `engine` traced into one file; `count` counts the round
    trips `action` takes."""

    def __init__(self, engine: Engine, trace: Path) -> None:
        self.trace = trace
        self._handle = trace.open("w")
        self._traced: list[psycopg.Connection[Any]] = []
        event.listen(engine, "connect", self._start)

    def _start(self, dbapi_connection: psycopg.Connection[Any], _record: object) -> None:
        dbapi_connection.pgconn.trace(self._handle.fileno())
        dbapi_connection.pgconn.set_trace_flags(
            psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
        )
        self._traced.append(dbapi_connection)

    def count(self, action: Callable[[], object]) -> int:
        before = self._round_trips()
        action()
        return self._round_trips() - before

    def _round_trips(self) -> int:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return len(ROUND_TRIP.findall(self.trace.read_text()))

    def close(self) -> None:
        for connection in self._traced:
            if not connection.closed:
                connection.pgconn.untrace()
        self._handle.close()


@pytest.fixture
def traced(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Store, Traced]]:
    engine = make_engine(postgres_url)
    # One call at a time: every call below reuses the pool's one connection.
    tracer = Traced(engine, tmp_path / "libpq.trace")
    try:
        yield Store(engine), tracer
    finally:
        engine.dispose()
        tracer.close()


def test_a_read_is_one_round_trip_and_an_append_four(traced: tuple[Store, Traced]) -> None:
    store, tracer = traced
    learner = store.create_learner()  # the pool's first connection is made (and set) here
    history = store.read(learner, EventList())
    assert tracer.count(lambda: store.read(learner, history)) == 1
    assert store.prediction_counts().committed == 0
    assert tracer.count(store.prediction_counts) == 1

    def append() -> None:
        store.append_decided(learner, lambda _h: [(EventKind.TAKEAWAY_SAVED, NOTE)], history)

    assert tracer.count(append) == 5  # the read the decision is made on, then four
    assert [e.kind for e in store.events_for(learner)] == [EventKind.TAKEAWAY_SAVED]


def test_an_append_that_lost_the_race_appends_nothing(traced: tuple[Store, Traced]) -> None:
    store, _tracer = traced
    learner = store.create_learner()
    stale = store.read(learner, EventList())
    store.append(learner, EventKind.TAKEAWAY_SAVED, NOTE)
    decided_on: list[int] = []

    def decide(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        decided_on.append(len(history.events))
        return [(EventKind.TAKEAWAY_SAVED, {"text": f"after {len(history.events)}"})]

    _history, appended = store.append_decided(learner, decide, stale, just_read=True)
    # The first decision, on the stale history, lost; the second was made on the one stored.
    assert decided_on == [0, 1]
    texts = [e.payload["text"] for e in store.events_for(learner)]
    assert texts == ["a takeaway", "after 1"]
    assert [e.payload for e in appended] == [{"text": "after 1"}]


def test_after_the_server_restarts_the_next_read_is_answered(tmp_path: Path) -> None:
    with PostgresCluster() as cluster:
        upgrade(cluster.url)
        engine = make_engine(cluster.url)
        try:
            store = Store(engine)
            learner = store.create_learner()
            store.append(learner, EventKind.TAKEAWAY_SAVED, NOTE)
            cluster.stop_server()
            cluster.start_server()
            # The pooled connection's session ended with the server: it is replaced unasked.
            assert [e.payload for e in store.events_for(learner)] == [NOTE]
        finally:
            engine.dispose()
