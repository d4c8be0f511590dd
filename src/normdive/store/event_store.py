"""Learners and their append-only events.

The Store can create a learner, append an event and read a learner's events in order. It has
no update and no delete: the page's state is derived from the history (normdive.progress), so
the history is never rewritten. Every query is filtered by one learner id, except
`prediction_counts`, which reads across learners but returns bare counts (no id, no payload):
    Store.prediction_counts(course=None) -> normdive.progress.aggregate.PredictionCounts
        learners per opening choice and per (row, outcome), each learner counted once by their
        first prediction_committed / first row_predicted for that row, plus how many learners
        committed; over one pool: a course's learners (an LTI context's key) or, without one,
        the learners no LMS launched. The anonymous pool is counted on write: appending a
        learner's first such event adds one to its row of prediction_tallies in the same
        transaction (Store._tally), so reading it costs the same whatever the number of
        learners. A course is counted when asked, over its members' events (portable SQL:
        JSON path access through SQLAlchemy, grouped on subquery columns so PostgreSQL sees
        one expression): its cost grows with the course, not with everyone.

Writing what the learner's history decides (`Store.append_decided`): a request reads the
history, decides from it what to append (nothing, or one or more events, or a refusal) and
appends only if the history is still the one it read. This is what keeps a once-only fact
(the opening prediction, a row's prediction, a field landing, the right reading, the gate's
closing) once under concurrency, and makes every answer agree with what was stored: the
answer is derived from the history the winning append extended.

Payloads are JSON objects. Before storing, every string in them (keys included) has NUL and
lone surrogate characters replaced with U+FFFD, because PostgreSQL's JSONB rejects both;
non-finite floats are refused (JSON has no NaN).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import re
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, Self, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    bindparam,
    exists,
    func,
    insert,
    literal_column,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError

from normdive.progress.aggregate import PredictionCounts
from normdive.progress.events import Event, EventKind
from normdive.store.db import discards_connection, release_read_only_view
from normdive.store.tables import (
    LEARNER_ID_LENGTH,
    EventRecord,
    Learner,
    LtiLearner,
    PredictionTally,
    course_learners,
)

__all__ = [
    "Decision",
    "EventList",
    "Folded",
    "Store",
    "UnknownLearner",
    "as_utc",
    "is_learner_id",
    "new_learner_id",
    "reading_connection",
    "storable",
]

logger = logging.getLogger(__name__)

# What a request decides from a learner's history: the events to append, in order (none:
# nothing to store). Deciding may raise instead (a refusal); then nothing is appended.
Decision = Sequence[tuple[EventKind, Mapping[str, Any]]]

# Rows the instructor view reads from the database at a time (Snapshots.pool).
POOL_BATCH_SIZE = 2000


class Folded(Protocol):
    """What a learner's history is read into: a fold that can take newer events. Reading
    extends it by the events after its `last_event_id` only (normdive.progress.history.History
    is the web's; EventList keeps every event)."""

    @property
    def last_event_id(self) -> int: ...

    def extended(self, events: Sequence[Event], last_event_id: int) -> Self: ...


@dataclass(frozen=True)
class EventList:
    """The plain fold: every event, oldest first (scripts, tests, rare decisions)."""

    events: tuple[Event, ...] = ()
    last_event_id: int = 0  # the newest event's id, of any kind (0: none)

    def extended(self, events: Sequence[Event], last_event_id: int) -> EventList:
        return EventList((*self.events, *events), max(last_event_id, self.last_event_id))


FoldedT = TypeVar("FoldedT", bound=Folded)


def reading_connection(engine: Engine) -> Connection:
    """A connection for reads only. PostgreSQL's is in autocommit: each query is a
    transaction of its own, as it is inside the one a plain connection opens (READ COMMITTED:
    a snapshot per statement), without that transaction's BEGIN and ROLLBACK, two of the three
    round trips of a one-query read (bench/RESULTS.md, "Load"). pysqlite begins no transaction
    for a read, and switching a SQLite connection to autocommit and back costs a PRAGMA each
    time, so SQLite's is a plain one."""
    if engine.dialect.name == "sqlite":
        return engine.connect()
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


# How many times a request re-reads and re-decides after another request of the same learner
# appended first, before it takes the learner's lock for its read, decision and append.
OPTIMISTIC_TRIES = 3

# Characters PostgreSQL cannot keep in JSONB text: NUL and UTF-16 surrogates.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_REPLACEMENT = "\ufffd"
# What new_learner_id mints (for the cookie's learners and LTI's alike): lowercase hex only,
# so an id is one string in one spelling, as CHAR(LEARNER_ID_LENGTH) keys compare it.
_LEARNER_ID = re.compile(rf"[0-9a-f]{{{LEARNER_ID_LENGTH}}}")


class UnknownLearner(LookupError):
    """No learner with this id exists in the store."""

    def __init__(self, learner_id: str) -> None:
        super().__init__(f"no learner with id {learner_id!r}")
        self.learner_id = learner_id


def is_learner_id(text: str) -> bool:
    """True when `text` has the shape of a learner id: 32 lowercase hex characters, nothing
    around them. The one check, for the store, the web app's cookie and the CLI."""
    return _LEARNER_ID.fullmatch(text) is not None


def new_learner_id() -> str:
    """A fresh learner id: 128 random bits as 32 hex characters. Minting one stores nothing."""
    return secrets.token_hex(LEARNER_ID_LENGTH // 2)


def storable(value: Any) -> Any:
    """`value` as JSON any backend can store. Raises ValueError for what JSON cannot hold."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(_REPLACEMENT, value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"payload holds a non-finite number ({value}); JSON cannot")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"payload keys must be strings, got {key!r}")
            out[storable(key)] = storable(item)
        return out
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    raise ValueError(f"payload holds a {type(value).__name__}, which is not JSON")


class Store:
    """The progress store on one engine. Thread-safe: each call uses its own connection."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sqlite = engine.dialect.name == "sqlite"

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A connection for one write of one statement.

        SQLite lets one writer in at a time and makes the others sleep and retry with growing
        back-off (busy_timeout: 1, 2, 5, ... up to 100 ms). In a transaction opened by
        engine.begin(), the lock is held from the INSERT until COMMIT, and in between the
        thread must win the GIL back from the request threads rendering pages, a few
        milliseconds each time under load: every other writer then sleeps, and unlucky ones
        for seconds (bench/RESULTS.md, "Load"). In autocommit mode one INSERT is a transaction
        of its own that takes, writes, commits and lets go of the lock inside one call into
        SQLite, without the GIL. PostgreSQL takes concurrent inserts as they come."""
        if self._sqlite:
            with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                yield conn
        else:
            with self._engine.begin() as connection:
                yield connection

    def _reading(self) -> Connection:
        return reading_connection(self._engine)

    def create_learner(self) -> str:
        """A new anonymous learner, stored; returns the id (128 random bits, 32 hex characters).
        For scripts that seed a store (the web app mints ids and stores them on first write)."""
        learner_id = new_learner_id()
        self.ensure_learner(learner_id)
        return learner_id

    def ensure_learner(self, learner_id: str, created_by: str | None = None) -> bool:
        """Store the learner `learner_id` unless the store has them already; True when this
        call stored them. One INSERT ... ON CONFLICT DO NOTHING, so two first writes of the
        same learner at once store one row and neither fails. `created_by` is the keyed hash
        of the address that started them (the new-learner limit counts it)."""
        if not is_learner_id(learner_id):
            raise UnknownLearner(learner_id)
        values = {"id": learner_id, "created_by": created_by}
        with self._writing() as connection:
            if self._sqlite:
                statement = sqlite.insert(Learner).values(values)
                inserted = statement.on_conflict_do_nothing(index_elements=[Learner.id])
                return connection.execute(inserted).rowcount == 1
            # psycopg reports no row count here (-1): the row it returns says it was stored.
            conflict_free = (
                postgresql.insert(Learner)
                .values(values)
                .on_conflict_do_nothing(index_elements=[Learner.id])
            )
            return connection.execute(conflict_free.returning(Learner.id)).first() is not None

    def learner_exists(self, learner_id: str) -> bool:
        if not is_learner_id(learner_id):
            return False
        with self._reading() as connection:
            query = select(exists().where(Learner.id == learner_id))
            return bool(connection.execute(query).scalar())

    def append(self, learner_id: str, kind: EventKind, payload: Mapping[str, Any]) -> Event:
        """Append one event to the learner's history, whatever it holds. Raises UnknownLearner,
        ValueError. For scripts that seed a store: it takes the learner's lock, so it waits
        its turn behind any request of the same learner deciding a once-only fact."""
        if not is_learner_id(learner_id):
            raise UnknownLearner(learner_id)
        entry = _storable_decision([(EventKind(kind), payload)])[0]
        try:
            with self._locked(learner_id) as connection:
                return self._insert(connection, learner_id, *entry)
        except IntegrityError:
            # The foreign key refused it: the learner does not exist.
            raise UnknownLearner(learner_id) from None

    def events_for(self, learner_id: str) -> list[Event]:
        """The learner's events, oldest first. Kinds this version does not know are skipped."""
        return list(self.read(learner_id, EventList()).events)

    def read(self, learner_id: str, start: FoldedT) -> FoldedT:
        """`start` extended by the learner's events after its last_event_id: one indexed
        query that returns only those (none, when nothing was appended since)."""
        if not is_learner_id(learner_id):
            return start
        with self._reading() as connection:
            return _extended(connection, learner_id, start)

    def append_decided(
        self,
        learner_id: str,
        decide: Callable[[FoldedT], Decision],
        start: FoldedT,
        *,
        just_read: bool = False,
    ) -> tuple[FoldedT, list[Event]]:
        """Read the learner's events into `start` (only those after its last_event_id), decide
        from the result what to append, and append it only if no event of theirs was appended
        in between. Returns (the history the decision was made on, the events appended).
        Raises what `decide` raises (then nothing is appended), UnknownLearner and ValueError.
        With `just_read`, the first decision is taken on `start` itself, without reading.

        The mechanism is a compare-and-append on the learner's last event id, not a lock held
        from the read: on SQLite any lock is the whole database's write lock, and holding it
        while Python derives the state (waiting for the GIL under load) stalls every other
        learner's writes (see _writing); the compare-and-append holds it for one statement.
        A request that loses re-reads and re-decides, so its answer (a 409 for a duplicate)
        is decided on the history that won. A learner racing themselves many times over (a
        hundred checks at once) could lose again and again, so after OPTIMISTIC_TRIES losses
        a request takes the learner's lock for its read, decision and append, which every
        compare-and-append of that learner also waits for: it cannot lose, and each request
        ends in a bounded number of steps."""
        if not is_learner_id(learner_id):
            raise UnknownLearner(learner_id)
        history = start
        for attempt in range(OPTIMISTIC_TRIES):
            # `just_read`: the caller read `start` a moment ago, so the first try decides on it
            # as it is; if anything was appended since, that append makes the try lose.
            if attempt > 0 or not just_read:
                with self._reading() as connection:
                    history = _extended(connection, learner_id, history)
            planned = _storable_decision(decide(history))
            if not planned:
                return history, []
            appended = self._append_if_last(learner_id, planned, history.last_event_id)
            if appended is not None:
                return history, appended
        logger.info("learner %s raced themselves; deciding under their lock", learner_id)
        try:
            with self._locked(learner_id) as connection:
                history = _extended(connection, learner_id, history)
                planned = _storable_decision(decide(history))
                return history, [self._insert(connection, learner_id, *e) for e in planned]
        except IntegrityError:
            # The foreign key refused it: the learner does not exist.
            raise UnknownLearner(learner_id) from None

    @contextlib.contextmanager
    def _locked(self, learner_id: str) -> Iterator[Connection]:
        """A transaction holding the learner's write lock until it ends.

        SQLite: BEGIN IMMEDIATE takes the database's write lock at once (pysqlite's own
        transaction handling would begin only at the first INSERT, after the reads, so the
        connection is in autocommit mode and the transaction is begun by hand). PostgreSQL:
        a transaction-scoped advisory lock on the learner id, which needs no learner row and
        leaves other learners alone."""
        if self._sqlite:
            with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.exec_driver_sql("COMMIT")
                except BaseException:
                    _roll_back(conn)
                    raise
        else:
            with self._engine.begin() as connection:
                key = func.hashtextextended(learner_id, 0)
                connection.execute(select(func.pg_advisory_xact_lock(key)))
                yield connection

    def _append_if_last(
        self, learner_id: str, planned: list[tuple[EventKind, dict[str, Any]]], last_id: int
    ) -> list[Event] | None:
        """Append `planned` if the learner's last event id is still `last_id` (0: none);
        None if another append came first."""
        try:
            if self._sqlite and len(planned) == 1 and planned[0][0] not in TALLIED_KINDS:
                # One statement, in autocommit: SQLite takes the write lock when a writing
                # statement starts, before its subquery reads, so the check and the insert
                # are one step; the lock is let go inside the same call into SQLite.
                kind, payload = planned[0]
                text = json.dumps(payload)
                with self._writing() as connection, _raw_cursor(connection) as cursor:
                    cursor.execute(_SQLITE_APPEND_IF_LAST, (learner_id, kind.value, text, last_id))
                    if cursor.rowcount != 1:
                        return None
                    event_id = cursor.lastrowid
                    assert event_id is not None
                    cursor.execute(_SQLITE_CREATED_AT, (event_id,))
                    created_at = _sqlite_time(cursor.fetchone()[0])
                return [Event(event_id, learner_id, kind, payload, created_at)]
            with self._locked(learner_id) as connection:
                if self._sqlite:
                    last = connection.execute(select(_last_event_id(learner_id))).scalar_one()
                    if last != last_id:
                        return None
                    return [self._insert(connection, learner_id, *entry) for entry in planned]
                first = _postgresql_insert_if_last(connection, learner_id, *planned[0], last_id)
                if first is None:
                    return None
                if first.kind in TALLIED_KINDS:
                    self._tally(connection, learner_id, first.kind, first.payload, first.id)
                rest = [self._insert(connection, learner_id, *entry) for entry in planned[1:]]
                return [first, *rest]
        except IntegrityError:
            # The foreign key refused it: the learner does not exist.
            raise UnknownLearner(learner_id) from None

    def _insert(
        self, connection: Connection, learner_id: str, kind: EventKind, payload: dict[str, Any]
    ) -> Event:
        statement = insert(EventRecord).values(
            learner_id=learner_id, kind=kind.value, payload=payload
        )
        if self._sqlite:
            # No RETURNING: SQLite ends a statement (and its transaction) only once its
            # returned rows are read, back in Python. The time is read after the lock.
            event_id = connection.execute(statement).lastrowid
            created_at = connection.execute(
                select(EventRecord.created_at).where(EventRecord.id == event_id)
            ).scalar_one()
        else:
            returning = statement.returning(EventRecord.id, EventRecord.created_at)
            event_id, created_at = connection.execute(returning).one()
        if kind in TALLIED_KINDS:
            self._tally(connection, learner_id, kind, payload, event_id)
        return Event(event_id, learner_id, kind, payload, as_utc(created_at))

    def _tally(
        self,
        connection: Connection,
        learner_id: str,
        kind: EventKind,
        payload: Mapping[str, Any],
        event_id: int,
    ) -> None:
        """Count the learner in prediction_tallies if this event is their first of its kind
        (for a row prediction: of that row). Called inside the transaction that appends it,
        under the learner's lock, so "first" is exact and the count moves with the event."""
        earlier: list[ColumnElement[bool]] = [
            EventRecord.learner_id == learner_id,
            EventRecord.kind == kind.value,
        ]
        if kind is EventKind.PREDICTION_COMMITTED:
            question: object = ""
            answer = payload.get("choice")
        else:
            question = payload.get("row")
            answer = payload.get("outcome")
            earlier.append(EventRecord.payload["row"].as_string() == str(question))
        if not isinstance(question, str):
            return  # a row prediction naming no row is counted nowhere
        first = not connection.execute(
            select(exists().where(*earlier, EventRecord.id < event_id))
        ).scalar()
        # An LMS's learner counts in their course (prediction_counts(course)), not in the
        # anonymous pool; a launch stores them as such before anything they predict.
        launched = connection.execute(
            select(exists().where(LtiLearner.learner_id == learner_id))
        ).scalar()
        if not first or launched:
            return
        values = {"question": question, "answer": str(answer or ""), "learners": 1}
        dialect_insert = sqlite.insert if self._sqlite else postgresql.insert
        upsert = dialect_insert(PredictionTally).values(values)
        connection.execute(
            upsert.on_conflict_do_update(
                index_elements=[PredictionTally.question, PredictionTally.answer],
                set_={"learners": PredictionTally.learners + 1},
            )
        )

    def prediction_counts(self, course: str | None = None) -> PredictionCounts:
        """How the learners of one pool predicted, each counted once by their first
        prediction. The pool is a course's learners (`course`: an LTI context's key, see
        normdive.lti.learners) or, with None, the learners who came outside any LMS: the
        tallies kept on write (one small table, whatever the number of learners)."""
        if course is not None:
            with self._reading() as connection:
                return _course_counts(connection, course)
        with self._reading() as connection:
            tallies = connection.execute(_TALLIES_QUERY).all()
        committed = 0
        counts: dict[str, dict[str, int]] = {}
        for question, answer, learners in tallies:
            if question == "":
                committed += learners
            if answer:  # "" : the payload named no answer
                counts.setdefault(question, {})[answer] = learners
        return PredictionCounts(
            committed=committed,
            opening=counts.pop("", {}),
            rows=counts,
        )


# Kinds whose first event per learner (per row, for row predictions) prediction_tallies counts.
TALLIED_KINDS = frozenset({EventKind.PREDICTION_COMMITTED, EventKind.ROW_PREDICTED})
_TALLIES_QUERY = select(PredictionTally.question, PredictionTally.answer, PredictionTally.learners)


def _course_counts(connection: Connection, course: str) -> PredictionCounts:
    pool = {"course": course}
    committed = connection.execute(_COURSE_COMMITTED_QUERY, pool).scalar_one()
    opening = _first_answers(connection, EventKind.PREDICTION_COMMITTED, "choice", course)
    rows = _first_answers(connection, EventKind.ROW_PREDICTED, "outcome", course, per="row")
    return PredictionCounts(
        committed=int(committed),
        opening=rows_to_counts(opening).get("", {}),
        rows=rows_to_counts(rows),
    )


# The learners of one course (the bound parameter `course`, an LTI context's key).
_IN_COURSE = EventRecord.learner_id.in_(course_learners(bindparam("course")))
# Learners of the course who committed the opening prediction.
_COURSE_COMMITTED_QUERY = select(func.count(EventRecord.learner_id.distinct())).where(
    EventRecord.kind == EventKind.PREDICTION_COMMITTED.value, _IN_COURSE
)


@functools.cache
def _first_answers_query(kind: EventKind, answer: str, per: str | None) -> Select[Any]:
    """The query behind _first_answers, built once per shape: its one parameter is the
    course, bound at execution, and building its subqueries costs more Python than running
    it (bench/RESULTS.md, "Load")."""
    answers = select(
        EventRecord.id.label("id"),
        EventRecord.learner_id.label("learner_id"),
        (EventRecord.payload[per].as_string() if per else literal_column("''")).label("question"),
        EventRecord.payload[answer].as_string().label("answer"),
    ).where(EventRecord.kind == kind.value, _IN_COURSE)
    inner = answers.subquery("answers")
    first = (
        select(func.min(inner.c.id).label("id"))
        .group_by(inner.c.learner_id, inner.c.question)
        .subquery("first")
    )
    return (
        select(inner.c.question, inner.c.answer, func.count().label("learners"))
        .select_from(inner.join(first, first.c.id == inner.c.id))
        .group_by(inner.c.question, inner.c.answer)
    )


def _first_answers(
    connection: Connection, kind: EventKind, answer: str, course: str, *, per: str | None = None
) -> list[tuple[str | None, str | None, int]]:
    """(question, answer, learners) for each of the course's learners' first `kind` event per
    question. The question is the payload's `per` key ("" when the kind answers one
    question). Every JSON path is labelled in an inner query and grouped by that label
    outside it, so the same expression is grouped on every backend."""
    query = _first_answers_query(kind, answer, per)
    return [
        (row.question, row.answer, int(row.learners))
        for row in connection.execute(query, {"course": course})
    ]


def rows_to_counts(
    rows: list[tuple[str | None, str | None, int]],
) -> dict[str, dict[str, int]]:
    """{question: {answer: learners}}, leaving out answers the payload did not hold."""
    counts: dict[str, dict[str, int]] = {}
    for question, answer, learners in rows:
        if question is None or answer is None:
            continue
        counts.setdefault(question, {})[answer] = learners
    return counts


def _storable_decision(decision: Decision) -> list[tuple[EventKind, dict[str, Any]]]:
    return [(EventKind(kind), storable(payload)) for kind, payload in decision]


def _last_event_id(learner_id: str) -> Any:
    """The learner's last event id, 0 when they have none (a scalar subquery)."""
    last = select(func.max(EventRecord.id)).where(EventRecord.learner_id == learner_id)
    return func.coalesce(last.scalar_subquery(), 0)


def _postgresql_insert_if_last(
    connection: Connection,
    learner_id: str,
    kind: EventKind,
    payload: dict[str, Any],
    last_id: int,
) -> Event | None:
    """Insert one event if the learner's last event id is still `last_id`, in the transaction
    that holds the learner's advisory lock (Store._locked); None if another append came first.
    The check and the insert are one statement, one round trip: READ COMMITTED takes the
    statement's snapshot after the lock was granted, so it sees every append of this learner
    committed before (each holds the same lock until it commits)."""
    with _raw_cursor(connection) as cursor:
        values = {"learner": learner_id, "kind": kind.value, "payload": json.dumps(payload)}
        cursor.execute(_POSTGRESQL_APPEND_IF_LAST, {**values, "last": last_id})
        row = cursor.fetchone()
    if row is None:
        return None
    event_id, created_at = row
    return Event(event_id, learner_id, kind, payload, as_utc(created_at))


def _extended(connection: Connection, learner_id: str, start: FoldedT) -> FoldedT:
    """`start` extended by the learner's events after its last_event_id, oldest first,
    skipping kinds this version does not know (their ids still move last_event_id on).

    Reading only what is newer than the last id read is exact because one learner's events
    are committed in the order of their ids: every append of a learner holds the learner's
    write lock from taking its id to its commit (SQLite has one writer at a time; PostgreSQL
    appends under the learner's advisory lock, `Store._locked`), so no event of theirs with a
    smaller id can become visible after a larger one was read."""
    sqlite_backend = connection.dialect.name == "sqlite"
    query = _SQLITE_EVENTS_AFTER if sqlite_backend else _POSTGRESQL_EVENTS_AFTER
    with _raw_cursor(connection) as cursor:
        cursor.execute(query, (learner_id, start.last_event_id))
        rows = cursor.fetchall()
    if not rows:
        return start
    events = [
        Event(
            event_id,
            learner_id,
            EventKind(kind),
            json.loads(payload) if sqlite_backend else dict(payload),
            _sqlite_time(created_at) if sqlite_backend else as_utc(created_at),
        )
        for event_id, kind, payload, created_at in rows
        if kind in KNOWN_KINDS  # written by a newer version; that version derives from it
    ]
    return start.extended(events, rows[-1][0])


# Event kinds this version folds (a newer version may have written others).
KNOWN_KINDS = frozenset(kind.value for kind in EventKind)
# The hot path's statements in each driver's own SQL (sqlite3: ? parameters, payloads as JSON
# text, times as "YYYY-MM-DD HH:MM:SS" text in UTC; psycopg: %s, JSONB as dicts, aware times),
# run on the pooled connection's own cursor: compiling and running them through SQLAlchemy
# costs four times as much as the query itself (bench/RESULTS.md, "One millisecond").
# One learner's events after a given id, oldest first (ix_events_learner_id_id).
_EVENTS_AFTER = (
    "SELECT id, kind, payload, created_at FROM events "
    "WHERE learner_id = {0} AND id > {0} ORDER BY id"
)
_SQLITE_EVENTS_AFTER = _EVENTS_AFTER.format("?")
_POSTGRESQL_EVENTS_AFTER = _EVENTS_AFTER.format("%s")
# Append if the learner's last event id is still the one given (0: none); see _append_if_last.
_SQLITE_APPEND_IF_LAST = (
    "INSERT INTO events (learner_id, kind, payload) SELECT ?1, ?2, ?3 "
    "WHERE (SELECT coalesce(max(id), 0) FROM events WHERE learner_id = ?1) = ?4"
)
_SQLITE_CREATED_AT = "SELECT created_at FROM events WHERE id = ?"
_POSTGRESQL_APPEND_IF_LAST = (
    "INSERT INTO events (learner_id, kind, payload) "
    "SELECT %(learner)s, %(kind)s, %(payload)s::jsonb "
    "WHERE (SELECT coalesce(max(id), 0) FROM events WHERE learner_id = %(learner)s) = %(last)s "
    "RETURNING id, created_at"
)


@contextlib.contextmanager
def _raw_cursor(connection: Connection) -> Iterator[Any]:
    """The pooled connection's own driver cursor, for the hot path's statements, raising what
    SQLAlchemy would have raised for them: the driver's error wrapped in its SQLAlchemy class
    (OperationalError, IntegrityError, ...), so that callers and the web app's 503 meet one
    family of errors whichever path failed. A connection the driver reports lost, or one the
    database failed (store.db.discards_connection), is invalidated, as SQLAlchemy does on its
    own path."""
    dialect = connection.dialect
    dbapi_error = dialect.loaded_dbapi.Error
    raw = connection.connection.dbapi_connection
    cursor = connection.connection.cursor()
    try:
        yield cursor
    except dbapi_error as error:
        lost = dialect.is_disconnect(error, raw, cursor) or discards_connection(error)
        if lost:
            connection.invalidate(error)
            release_read_only_view(connection.engine, error)
        raise DBAPIError.instance(
            None, None, error, dbapi_error, connection_invalidated=lost, dialect=dialect
        ) from error
    finally:
        with contextlib.suppress(dbapi_error):
            cursor.close()


def _roll_back(connection: Connection) -> None:
    """End the SQLite transaction begun by hand, if it is still open (SQLite ends it itself
    on some failures). A rollback that fails throws the connection away: the pool never hands
    out one whose transaction is still open, and what the transaction wrote is discarded with
    it; the error that made the rollback needed is the one that propagates. A connection
    already invalidated (store.db: it met a read-only file) was thrown away with its
    transaction."""
    if connection.invalidated:
        return
    raw = connection.connection.dbapi_connection
    try:
        if not isinstance(raw, sqlite3.Connection) or raw.in_transaction:
            connection.exec_driver_sql("ROLLBACK")
    except DBAPIError as error:
        logger.warning("rollback failed; connection discarded: %s", error.orig)
        connection.invalidate()


def _sqlite_time(text: str) -> datetime:
    # CURRENT_TIMESTAMP: UTC, as text.
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def as_utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC time: what every reader of a stored time uses, on either
    database."""
    # SQLite hands back CURRENT_TIMESTAMP as naive text, which is UTC by definition.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
