"""Each learner's History (progress/history.py) kept in the database, one row per learner
(learner_snapshots), so that reading a learner costs one row and the events after it, however
long their history, and the instructor view reads one row per learner.

    Snapshots(engine, History.start(lesson))
        .read(learner_id) -> History      the kept History, extended by the events after it
        .keep(learner_id, history)        after an append; a kept row only moves forwards
        .pool(course) -> PoolMember, ...  a pool's learners, each with their summary record

A snapshot is a cache of the fold of the learner's events, never the truth: a reader extends it
by the events after its last_event_id (Store.read), and folds the whole history again when it
was kept for another lesson shape (History.lesson_key: the lesson's fields, rows or outcomes
changed). So a snapshot that is missing (a learner from before migration 0006, one written by a
script through Store.append) or behind (a crash between an append and its keep) costs time,
never correctness; each reader that finds one behind keeps the newer one.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, DateTime, Engine, TextualSelect, bindparam, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from normdive.progress.events import Event, EventKind
from normdive.progress.history import History
from normdive.progress.report import summary_record
from normdive.store.event_store import (
    KNOWN_KINDS,
    POOL_BATCH_SIZE,
    Store,
    as_utc,
    reading_connection,
)
from normdive.store.tables import PAYLOAD_TYPE, STAFF_COURSE_ROLE

logger = logging.getLogger(__name__)

# The app keeps a learner's snapshot once their history has grown by this many events since
# the one kept (a write that crosses a multiple of it), not after every write: a reader then
# folds at most this many minus one events on top of it, and a write pays for the keep (about
# 0.33 ms of CPU: bench/RESULTS.md, "Retired experiments") one time in this many.
SNAPSHOT_EVERY_EVENTS = 4


def due(before: History, after: History) -> bool:
    """Whether an append that took a learner's History from `before` to `after` should keep
    their snapshot (see SNAPSHOT_EVERY_EVENTS)."""
    return after.position // SNAPSHOT_EVERY_EVENTS > before.position // SNAPSHOT_EVERY_EVENTS


# Only forwards: a keep with an older last_event_id (a slower request of the same learner)
# changes nothing; one for another lesson shape replaces it (the lesson's content changed).
# In each driver's own SQL ({0}: its parameter marker): on SQLite, run on the pooled
# connection's own cursor, as event_store's hot path is (it follows every append).
_KEEP_SQL = (
    "INSERT INTO learner_snapshots (learner_id, lesson_key, last_event_id, body, summary) "
    "VALUES ({0}, {0}, {0}, {0}, {0}) "
    "ON CONFLICT (learner_id) DO UPDATE SET lesson_key = excluded.lesson_key, "
    "last_event_id = excluded.last_event_id, body = excluded.body, summary = excluded.summary "
    "WHERE excluded.last_event_id > learner_snapshots.last_event_id "
    "OR excluded.lesson_key <> learner_snapshots.lesson_key"
)
_READ = text("SELECT lesson_key, body FROM learner_snapshots WHERE learner_id = :learner_id")
# A member's events after their snapshot (all of them without one). The range on the id keeps
# it one probe of ix_events_learner_id_id per member on both databases (an equality alone
# may be planned on PostgreSQL as a hash over every event).
_EVENTS_AFTER = (
    "EXISTS (SELECT 1 FROM events e WHERE e.learner_id = {member} "
    "AND e.id > COALESCE(s.last_event_id, 0))"
)
# Whether a pool member's snapshot is behind their events or kept for another lesson shape. A
# member with neither events nor a snapshot (a course member who only launched) is not.
_STALE = "(COALESCE(s.lesson_key <> :lesson_key, FALSE) OR " + _EVENTS_AFTER + ")"


def _pool_query(snapshot_column: str, *, course: bool) -> TextualSelect:
    """Each member of a pool with `snapshot_column` of their snapshot and whether it is stale,
    by learner id: a course's learners (its members but staff; an LTI context's key, bound as
    :course), with or without events, or the learners no LMS launched who have events."""
    if course:
        member = "m.learner_id"
        source = (
            "SELECT m.learner_id AS learner_id, m.last_launch_at AS launched_at, "
            "{column}, {stale} AS stale FROM lti_context_members m "
            "LEFT JOIN learner_snapshots s ON s.learner_id = m.learner_id "
            "WHERE m.context_key = :course AND m.course_role <> '"
            + STAFF_COURSE_ROLE
            + "' ORDER BY m.learner_id"
        )
    else:
        member = "l.id"
        source = (
            "SELECT l.id AS learner_id, NULL AS launched_at, {column}, {stale} AS stale "
            "FROM learners l LEFT JOIN learner_snapshots s ON s.learner_id = l.id "
            "WHERE l.id NOT IN (SELECT learner_id FROM lti_learners) "
            "AND (s.learner_id IS NOT NULL OR {events_after}) ORDER BY l.id"
        )
    sql = source.format(
        column=f"s.{snapshot_column} AS {snapshot_column}",
        stale=_STALE.format(member=member),
        events_after=_EVENTS_AFTER.format(member=member),
    )
    return text(sql).columns(launched_at=DateTime(timezone=True))


# The pools with each member's summary (the CSV, the CLI report), and without it: where each
# member's snapshot stands (the view compares that with the summaries it holds, and reads only
# the ones that moved).
_POOL = {course: _pool_query("summary", course=course) for course in (True, False)}
_MARKS = {course: _pool_query("last_event_id", course=course) for course in (True, False)}
# Every learner with events whose snapshot is missing, behind or for another lesson shape.
_STALE_LEARNERS = text(
    "SELECT l.id FROM learners l LEFT JOIN learner_snapshots s ON s.learner_id = l.id "
    "WHERE " + _STALE.format(member="l.id") + " ORDER BY l.id"
)
_SUMMARIES = text(
    "SELECT learner_id, last_event_id, summary FROM learner_snapshots "
    "WHERE learner_id IN :learner_ids AND lesson_key = :lesson_key"
).bindparams(bindparam("learner_ids", expanding=True))
# The kept Histories of some learners (for this lesson's shape), and their events after them.
_BODIES = text(
    "SELECT learner_id, body FROM learner_snapshots "
    "WHERE learner_id IN :learner_ids AND lesson_key = :lesson_key"
).bindparams(bindparam("learner_ids", expanding=True))
_EVENTS_AFTER_KEPT = (
    text(
        "SELECT e.learner_id, e.id, e.kind, e.payload, e.created_at FROM events e "
        "LEFT JOIN learner_snapshots s ON s.learner_id = e.learner_id "
        "AND s.lesson_key = :lesson_key "
        "WHERE e.learner_id IN :learner_ids AND e.id > COALESCE(s.last_event_id, 0) "
        "ORDER BY e.learner_id, e.id"
    )
    .bindparams(bindparam("learner_ids", expanding=True))
    .columns(payload=PAYLOAD_TYPE, created_at=DateTime(timezone=True))
)
# Learners whose summaries one query reads at most (under SQLite's limit on bound parameters).
SUMMARIES_PER_QUERY = 500


@dataclass(frozen=True)
class PoolMark:
    """Where one pool member's snapshot stands: its last_event_id (None: no snapshot) and
    whether it is stale (behind their events, or kept for another lesson shape)."""

    learner_id: str
    launched_at: datetime | None
    last_event_id: int | None
    stale: bool


@dataclass(frozen=True)
class PoolMember:
    """One learner of a pool: progress.report.summary_record of their History as it is now,
    and their latest launch from the course (None outside one)."""

    learner_id: str
    launched_at: datetime | None
    record: list[Any]


class Snapshots:
    """learner_snapshots on one engine, for one lesson (`start`: its History before any
    event). Thread-safe."""

    def __init__(self, engine: Engine, start: History) -> None:
        self._engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        self._store = Store(engine)
        self._start = start
        self._lesson_key = start.lesson_key

    @property
    def start(self) -> History:
        """The lesson's History before any event."""
        return self._start

    def read(self, learner_id: str) -> History:
        """The learner's History as it is now in the store: the kept one (when it was kept for
        this lesson's shape) extended by the events after it; kept again when it moved on."""
        history, moved = self._current(learner_id)
        if moved:
            self.keep(learner_id, history)
        return history

    def _current(self, learner_id: str) -> tuple[History, bool]:
        """The learner's History now, and whether it differs from the one kept."""
        try:
            with reading_connection(self._engine) as connection:
                row = connection.execute(_READ, {"learner_id": learner_id}).first()
        except SQLAlchemyError as error:
            # Without the cache, the events alone (read next) still give the History.
            logger.warning("learner snapshot not read (folding the events): %s", error)
            row = None
        kept = self._start
        if row is not None and row.lesson_key == self._lesson_key:
            kept = History.from_json(json.loads(row.body), self._start)
        history = self._store.read(learner_id, kept)
        moved = history.last_event_id > kept.last_event_id or (
            row is not None and kept is self._start  # kept for another lesson shape
        )
        return history, moved

    def keep(self, learner_id: str, history: History) -> None:
        """Keep `history` as the learner's snapshot, unless a newer one is kept already (or the
        learner has no event yet, or was removed: nothing to keep)."""
        self.keep_many([(learner_id, history)])

    def keep_many(self, histories: Sequence[tuple[str, History]]) -> None:
        """`keep` for each (learner id, History), in one transaction.

        Not durable, on purpose: a snapshot lost to a power cut is folded again by the next
        reader, so its commit does not wait for the disk (SQLite: synchronous=NORMAL for this
        statement, which in WAL mode skips the fsync; PostgreSQL: synchronous_commit off for
        this transaction). The events themselves are written durably, as before."""
        values = [
            (
                learner_id,
                self._lesson_key,
                history.last_event_id,
                json.dumps(history.to_json(), separators=(",", ":")),
                json.dumps(summary_record(history), separators=(",", ":")),
            )
            for learner_id, history in histories
            if history.last_event_id != 0
        ]
        if not values:
            return
        try:
            self._write(values)
        except (IntegrityError, sqlite3.IntegrityError):
            # A learner is gone (the foreign key): their snapshot went with them. Keep the
            # others one by one.
            for one in values:
                try:
                    self._write([one])
                except (IntegrityError, sqlite3.IntegrityError):
                    logger.info("no snapshot kept for removed learner %s", one[0])
                except (SQLAlchemyError, sqlite3.Error) as error:
                    self._not_kept(error)
                    return
        except (SQLAlchemyError, sqlite3.Error) as error:
            # A cache not kept costs the next reader a fold; the request that wrote the event
            # (already stored) or read the pool goes on.
            self._not_kept(error)

    @staticmethod
    def _not_kept(error: Exception) -> None:
        logger.warning("learner snapshots not kept (the next reader folds again): %s", error)

    def _write(self, values: list[tuple[Any, ...]]) -> None:
        if self._sqlite:
            self._keep_sqlite(values)
        else:
            self._keep_postgresql(values)

    def _keep_sqlite(self, values: list[tuple[Any, ...]]) -> None:
        with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            raw = conn.connection.dbapi_connection
            assert isinstance(raw, sqlite3.Connection)
            cursor = raw.cursor()
            try:
                durability = cursor.execute("PRAGMA synchronous").fetchone()[0]
                cursor.execute("PRAGMA synchronous=NORMAL")
                try:
                    if len(values) == 1:  # one statement: its own transaction
                        cursor.execute(_KEEP_SQL.format("?"), values[0])
                    else:
                        cursor.execute("BEGIN IMMEDIATE")
                        cursor.executemany(_KEEP_SQL.format("?"), values)
                        cursor.execute("COMMIT")
                finally:
                    self._restore(conn, cursor, raw, durability)
            finally:
                cursor.close()

    @staticmethod
    def _restore(
        conn: Connection, cursor: sqlite3.Cursor, raw: sqlite3.Connection, durability: int
    ) -> None:
        """Give the pooled connection back as durable as it was: the events it appends next
        must wait for the disk. A connection that cannot be put back is thrown away."""
        try:
            if raw.in_transaction:
                cursor.execute("ROLLBACK")
            cursor.execute(f"PRAGMA synchronous={int(durability)}")
        except sqlite3.Error:
            conn.invalidate()
            raise

    def _keep_postgresql(self, values: list[tuple[Any, ...]]) -> None:
        with self._engine.begin() as connection:
            connection.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            connection.exec_driver_sql(_KEEP_SQL.format("%s"), values)

    def fill(self, batch_size: int = POOL_BATCH_SIZE) -> int:
        """Keep the snapshot of every learner whose snapshot is missing, behind their events or
        kept for another lesson shape (after migration 0006, or events a script appended), so
        no reader has to fold their history later; returns how many were kept."""
        with self._engine.connect() as connection:
            stale = list(
                connection.execute(_STALE_LEARNERS, {"lesson_key": self._lesson_key}).scalars()
            )
        for first in range(0, len(stale), batch_size):
            part = stale[first : first + batch_size]
            self.keep_many([(learner_id, self._current(learner_id)[0]) for learner_id in part])
        return len(stale)

    def pool_marks(self, course: str | None) -> list[PoolMark]:
        """Every member of one pool (as `pool` has them), with where their snapshot stands:
        one query of small rows."""
        query = _MARKS[course is not None]
        parameters = {"lesson_key": self._lesson_key, "course": course}
        with self._engine.connect() as connection:
            rows = connection.execute(query, parameters).all()
        return [
            PoolMark(
                learner_id,
                as_utc(launched_at) if launched_at is not None else None,
                last_event_id,
                bool(stale),
            )
            for learner_id, launched_at, last_event_id, stale in rows
        ]

    def records(self, marks: Sequence[PoolMark]) -> dict[str, tuple[int, list[Any]]]:
        """(last_event_id, summary record) of each of these members as they are now: a stale
        one read again and kept, one without events the record of none (last_event_id 0)."""
        found: dict[str, tuple[int, list[Any]]] = {}
        current = [mark.learner_id for mark in marks if not mark.stale and mark.last_event_id]
        with self._engine.connect() as connection:
            for first in range(0, len(current), SUMMARIES_PER_QUERY):
                part = current[first : first + SUMMARIES_PER_QUERY]
                parameters = {"learner_ids": part, "lesson_key": self._lesson_key}
                for learner_id, last_event_id, summary in connection.execute(
                    _SUMMARIES, parameters
                ):
                    found[learner_id] = (last_event_id, json.loads(summary))
        behind = [m.learner_id for m in marks if m.learner_id not in found]
        moved = self._folded_again(behind)
        for learner_id in behind:
            history = moved.get(learner_id, self._start)
            found[learner_id] = (history.last_event_id, summary_record(history))
        self.keep_many([(learner_id, history) for learner_id, history in moved.items()])
        return found

    def _folded_again(self, learner_ids: Sequence[str]) -> dict[str, History]:
        """The History now of each of these learners who has events: their kept one (when kept
        for this lesson's shape) extended by the events after it, read for them all at once
        (SUMMARIES_PER_QUERY learners per query)."""
        histories: dict[str, History] = {}
        with self._engine.connect() as connection:
            for first in range(0, len(learner_ids), SUMMARIES_PER_QUERY):
                parameters = {
                    "learner_ids": list(learner_ids[first : first + SUMMARIES_PER_QUERY]),
                    "lesson_key": self._lesson_key,
                }
                kept = {
                    learner_id: History.from_json(json.loads(body), self._start)
                    for learner_id, body in connection.execute(_BODIES, parameters)
                }
                pending: dict[str, list[Event]] = {}
                last: dict[str, int] = {}
                for learner_id, event_id, kind, payload, created_at in connection.execute(
                    _EVENTS_AFTER_KEPT, parameters
                ):
                    last[learner_id] = event_id
                    if kind in KNOWN_KINDS:
                        event = Event(
                            event_id, learner_id, EventKind(kind), payload, as_utc(created_at)
                        )
                        pending.setdefault(learner_id, []).append(event)
                for learner_id, last_event_id in last.items():
                    start = kept.get(learner_id, self._start)
                    histories[learner_id] = start.extended(
                        pending.get(learner_id, []), last_event_id
                    )
        return histories

    def pool(self, course: str | None, batch_size: int = POOL_BATCH_SIZE) -> Iterator[PoolMember]:
        """Every learner of one pool, by learner id: a course's members (`course`, an LTI
        context's key; members with no events too) or, with None, the learners no LMS launched
        who have events. One query, read `batch_size` rows at a time; a member whose snapshot
        is missing, behind or for another lesson shape is read again and kept (`batch_size`
        at a time, in one transaction each), so the next view finds it current."""
        query = _POOL[course is not None]
        parameters = {"lesson_key": self._lesson_key, "course": course}
        moved: list[tuple[str, History]] = []
        with self._engine.connect() as connection:
            rows = connection.execution_options(yield_per=batch_size).execute(query, parameters)
            for learner_id, launched_at, summary, stale in rows:
                launched = as_utc(launched_at) if launched_at is not None else None
                if stale:
                    history, changed = self._current(learner_id)
                    if changed:
                        moved.append((learner_id, history))
                    if len(moved) >= batch_size:
                        self.keep_many(moved)
                        moved = []
                    record = summary_record(history)
                elif summary is None:  # a course member who only launched
                    record = summary_record(self._start)
                else:
                    record = json.loads(summary)
                yield PoolMember(learner_id, launched, record)
        self.keep_many(moved)
