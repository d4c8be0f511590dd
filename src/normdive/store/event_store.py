"""Learners and their append-only events.

The Store can create a learner, append an event and read a learner's events in order. It has
no update and no delete: the page's state is derived from the history (normdive.progress), so
the history is never rewritten. Every query is filtered by one learner id, except
`prediction_counts`, which reads across learners but returns bare counts (no id, no payload):
    Store.prediction_counts(course=None) -> normdive.progress.aggregate.PredictionCounts
        learners per opening choice and per (row, outcome), each learner counted once by their
        first prediction_committed / first row_predicted for that row, plus how many learners
        committed; over one pool: a course's learners (an LTI context's key) or, without one,
        the learners no LMS launched. Portable SQL: JSON path access through SQLAlchemy
        (JSON_EXTRACT on SQLite, ->> on PostgreSQL), grouped on subquery columns so PostgreSQL
        sees one expression.

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
import logging
import math
import re
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    bindparam,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from normdive.progress.aggregate import PredictionCounts
from normdive.progress.events import Event, EventKind
from normdive.store.tables import (
    LEARNER_ID_LENGTH,
    EventRecord,
    Learner,
    LtiContextMember,
    LtiLearner,
)

__all__ = [
    "Decision",
    "Store",
    "UnknownLearner",
    "is_learner_id",
    "new_learner_id",
    "storable",
]

logger = logging.getLogger(__name__)

# What a request decides from a learner's history: the events to append, in order (none:
# nothing to store). Deciding may raise instead (a refusal); then nothing is appended.
Decision = Sequence[tuple[EventKind, Mapping[str, Any]]]
# How many times a request re-reads and re-decides after another request of the same learner
# appended first, before it takes the learner's lock for its read, decision and append.
OPTIMISTIC_TRIES = 3

# Characters PostgreSQL cannot keep in JSONB text: NUL and UTF-16 surrogates.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_REPLACEMENT = "\ufffd"
_LEARNER_ID = re.compile(rf"^[0-9a-f]{{{LEARNER_ID_LENGTH}}}$")


class UnknownLearner(LookupError):
    """No learner with this id exists in the store."""

    def __init__(self, learner_id: str) -> None:
        super().__init__(f"no learner with id {learner_id!r}")
        self.learner_id = learner_id


def is_learner_id(text: str) -> bool:
    """True when `text` has the shape of a learner id: 32 lowercase hex characters."""
    return bool(_LEARNER_ID.fullmatch(text))


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
        with self._engine.connect() as connection:
            query = select(exists().where(Learner.id == learner_id))
            return bool(connection.execute(query).scalar())

    def append(self, learner_id: str, kind: EventKind, payload: Mapping[str, Any]) -> Event:
        """Append one event to the learner's history, whatever it holds. Raises UnknownLearner,
        ValueError. For scripts that seed a store; it goes through append_decided, so it waits
        its turn behind any request of the same learner deciding a once-only fact."""
        _, appended = self.append_decided(learner_id, lambda _events: [(EventKind(kind), payload)])
        return appended[0]

    def events_for(self, learner_id: str) -> list[Event]:
        """The learner's events, oldest first. Kinds this version does not know are skipped."""
        if not is_learner_id(learner_id):
            return []
        with self._engine.connect() as connection:
            return _history(connection, learner_id)[0]

    def append_decided(
        self, learner_id: str, decide: Callable[[list[Event]], Decision]
    ) -> tuple[list[Event], list[Event]]:
        """Read the learner's events, decide from them what to append, and append it only if
        no event of theirs was appended in between. Returns (the events the decision was made
        on, the events appended). Raises what `decide` raises (then nothing is appended),
        UnknownLearner and ValueError.

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
        for _ in range(OPTIMISTIC_TRIES):
            with self._engine.connect() as connection:
                events, last_id = _history(connection, learner_id)
            planned = _storable_decision(decide(events))
            if not planned:
                return events, []
            appended = self._append_if_last(learner_id, planned, last_id)
            if appended is not None:
                return events, appended
        logger.info("learner %s raced themselves; deciding under their lock", learner_id)
        try:
            with self._locked(learner_id) as connection:
                events, _ = _history(connection, learner_id)
                planned = _storable_decision(decide(events))
                return events, [self._insert(connection, learner_id, *entry) for entry in planned]
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
                except BaseException:
                    conn.exec_driver_sql("ROLLBACK")
                    raise
                conn.exec_driver_sql("COMMIT")
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
            if self._sqlite and len(planned) == 1:
                # One statement, in autocommit: SQLite takes the write lock when a writing
                # statement starts, before its subquery reads, so the check and the insert
                # are one step; the lock is let go inside the same call into SQLite.
                kind, payload = planned[0]
                values = select(
                    literal(learner_id, EventRecord.learner_id.type),
                    literal(kind.value, EventRecord.kind.type),
                    literal(payload, EventRecord.payload.type),
                ).where(_last_event_id(learner_id) == last_id)
                statement = insert(EventRecord).from_select(
                    ["learner_id", "kind", "payload"], values
                )
                with self._writing() as connection:
                    result = connection.execute(statement)
                    if result.rowcount != 1:
                        return None
                    event_id = result.lastrowid
                    created_at = connection.execute(
                        select(EventRecord.created_at).where(EventRecord.id == event_id)
                    ).scalar_one()
                return [Event(event_id, learner_id, kind, payload, _utc(created_at))]
            with self._locked(learner_id) as connection:
                if connection.execute(select(_last_event_id(learner_id))).scalar_one() != last_id:
                    return None
                return [self._insert(connection, learner_id, *entry) for entry in planned]
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
        return Event(event_id, learner_id, kind, payload, _utc(created_at))

    def prediction_counts(self, course: str | None = None) -> PredictionCounts:
        """How the learners of one pool predicted, each counted once by their first
        prediction. The pool is a course's learners (`course`: an LTI context's key, see
        normdive.lti.learners) or, with None, the learners who came outside any LMS."""
        pool = {"course": course} if course is not None else {}
        with self._engine.connect() as connection:
            committed = connection.execute(_committed_query(course is not None), pool).scalar_one()
            opening = _first_answers(
                connection, EventKind.PREDICTION_COMMITTED, "choice", course=course
            )
            rows = _first_answers(
                connection, EventKind.ROW_PREDICTED, "outcome", per="row", course=course
            )
        return PredictionCounts(
            committed=int(committed),
            opening=rows_to_counts(opening).get("", {}),
            rows=rows_to_counts(rows),
        )


def _storable_decision(decision: Decision) -> list[tuple[EventKind, dict[str, Any]]]:
    return [(EventKind(kind), storable(payload)) for kind, payload in decision]


def _last_event_id(learner_id: str) -> Any:
    """The learner's last event id, 0 when they have none (a scalar subquery)."""
    last = select(func.max(EventRecord.id)).where(EventRecord.learner_id == learner_id)
    return func.coalesce(last.scalar_subquery(), 0)


def _history(connection: Connection, learner_id: str) -> tuple[list[Event], int]:
    """The learner's events, oldest first, skipping kinds this version does not know, and
    the id of their last event of any kind (0: none)."""
    known = {kind.value for kind in EventKind}
    query = (
        select(EventRecord.id, EventRecord.kind, EventRecord.payload, EventRecord.created_at)
        .where(EventRecord.learner_id == learner_id)
        .order_by(EventRecord.id)
    )
    rows = connection.execute(query).all()
    events = [
        Event(row.id, learner_id, EventKind(row.kind), dict(row.payload), _utc(row.created_at))
        for row in rows
        if row.kind in known  # written by a newer version; that version derives from it
    ]
    return events, (rows[-1].id if rows else 0)


def _in_pool(in_course: bool) -> ColumnElement[bool]:
    """The learners an aggregate counts: a course's (the bound parameter `course`, an LTI
    context's key) or, outside any course, those no LMS launched (the anonymous pool)."""
    if in_course:
        return EventRecord.learner_id.in_(
            select(LtiContextMember.learner_id).where(
                LtiContextMember.context_key == bindparam("course")
            )
        )
    return EventRecord.learner_id.not_in(select(LtiLearner.learner_id))


@functools.cache
def _committed_query(in_course: bool) -> Select[Any]:
    """Learners of the pool who committed the opening prediction (built once per shape, like
    _first_answers_query)."""
    return select(func.count(EventRecord.learner_id.distinct())).where(
        EventRecord.kind == EventKind.PREDICTION_COMMITTED.value, _in_pool(in_course)
    )


@functools.cache
def _first_answers_query(
    kind: EventKind, answer: str, per: str | None, in_course: bool = False
) -> Select[Any]:
    """The query behind _first_answers, built once per shape: its one parameter is the
    course, bound at execution, and building its subqueries costs more Python than running
    it (bench/RESULTS.md, "Load")."""
    answers = select(
        EventRecord.id.label("id"),
        EventRecord.learner_id.label("learner_id"),
        (EventRecord.payload[per].as_string() if per else literal_column("''")).label("question"),
        EventRecord.payload[answer].as_string().label("answer"),
    ).where(EventRecord.kind == kind.value, _in_pool(in_course))
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
    connection: Connection,
    kind: EventKind,
    answer: str,
    *,
    per: str | None = None,
    course: str | None = None,
) -> list[tuple[str | None, str | None, int]]:
    """(question, answer, learners) for each learner's first `kind` event per question.

    The question is the payload's `per` key ("" when the kind answers one question). Every
    JSON path is labelled in an inner query and grouped by that label outside it, so the
    same expression is grouped on every backend."""
    query = _first_answers_query(kind, answer, per, course is not None)
    pool = {"course": course} if course is not None else {}
    return [
        (row.question, row.answer, int(row.learners)) for row in connection.execute(query, pool)
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


def _utc(moment: datetime) -> datetime:
    # SQLite hands back CURRENT_TIMESTAMP as naive text, which is UTC by definition.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
