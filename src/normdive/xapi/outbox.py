"""Delivering the learners' statements to the LRS, once, whatever fails: the outbox's sender.

A trigger (migration 0013) queues each event a statement is made of in xapi_outbox, in the
event's own transaction, so no learner's request waits for an LRS. `Sender` claims due rows in
one UPDATE (several may run), POSTs their statements to each LRS at once, and narrows a refusal
down to the statement refused. A statement's id derives from its event, so one sent twice is
kept once. What each answer leads to: README, "Learning records (xAPI)".
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from importlib import metadata
from typing import Any, TypeVar

import httpx
from sqlalchemy import Engine, Select, and_, func, insert, select, update

from normdive.config import Settings
from normdive.i18n.locales import DEFAULT_LOCALE, supported
from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.lti.passback import MAX_RETRY_S, platform_words, retry_delay
from normdive.progress.events import Event, EventKind
from normdive.store.event_store import as_utc
from normdive.store.tables import (
    EventRecord,
    LtiLearner,
    LtiLearnerLink,
    LtiRegistration,
    LtiRosterMember,
    XapiOutbox,
)
from normdive.xapi import lrs as stores
from normdive.xapi.lrs import Lrs
from normdive.xapi.statements import (
    STATEMENT_KINDS,
    XAPI_VERSION,
    Learner,
    LtiLink,
    Statement,
    Tool,
    statements_of,
    voiding,
)

logger = logging.getLogger(__name__)

# One request, its whole answer included.
XAPI_TIMEOUT_S = 10.0
ROUND_SIZE = 200
# A sender that dies leaves its rows due again after this; a round's requests fit well within.
CLAIM_LEASE_S = 120.0
POLL_INTERVAL_S = 1.0
MAX_RETRY_AFTER_S = MAX_RETRY_S
# Down, busy, or a key or URL wrong for now (once fixed, every statement goes): tried again,
# never refused (RFC 9110).
OUTAGE_STATUSES = frozenset({401, 403, 404, 408, 425, 429})
# Communication 2.1.2: the LRS holds the id with other content (an earlier wording).
CONFLICT = 409


class StatementStatus(StrEnum):
    """Where an outbox row stands (xapi_outbox.status)."""

    DUE = "due"  # not tried yet
    SENT = "sent"
    FAILING = "failing"  # an outage: tried again at due_at
    REFUSED = "refused"  # the LRS refused a statement of it; reason says why
    NO_LRS = "no_lrs"  # no LRS takes its learner's course (tried again when one is added)
    VOIDING = "voiding"  # sent, and to be voided on request
    VOIDED = "voided"
    WITHHELD = "withheld"  # removed on request before it was sent: never sent


class NoPublicOrigin(ValueError):
    """Statements name activities under the tool's public origin, which is not set."""


def deployment_tool(settings: Settings, lesson: Lesson) -> Tool:
    """What this deployment's statements share. NORMDIVE_PUBLIC_ORIGIN is required: a
    statement's IRIs must not depend on the host a request named."""
    if settings.public_origin is None:
        raise NoPublicOrigin(
            "NORMDIVE_PUBLIC_ORIGIN is not set: the statements' activity IRIs are built from "
            "the origin learners reach the tool at (https://host)"
        )
    return Tool(
        origin=settings.public_origin,
        version=metadata.version("normdive"),
        lesson=lesson,
        identity=settings.xapi_actor,
    )


def system_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no answer
    words: str
    retry_after_s: float | None = None


@dataclass(frozen=True)
class Outcome:
    """What one try made of a row, as it is written on it."""

    status: StatementStatus
    last_status: int | None = None
    reason: str | None = None
    retry_after_s: float | None = None


@dataclass
class RoundReport:
    # Rows taken (or voided).
    sent: int = 0
    # Failing, refused, no LRS.
    failed: int = 0
    tried: int = 0
    statements: int = 0


@dataclass
class _Row:
    event_id: int
    status: StatementStatus
    attempts: int
    # The round's claim: an outcome is written only on a row still held by it.
    claim: str
    lrs: Lrs | None = None
    statements: list[Statement] = field(default_factory=list)


def outage(answer: Answer) -> Outcome:
    said = f"{answer.status} {answer.words}".strip() if answer.status else answer.words
    return Outcome(
        StatementStatus.FAILING,
        last_status=answer.status,
        reason=f"The LRS did not take the statements ({said}); they are sent again after a "
        f"wait that doubles up to {MAX_RETRY_S / 60:g} minutes.",
        retry_after_s=answer.retry_after_s,
    )


def refused(answer: Answer) -> Outcome:
    """A refusal, kept as the LRS's own words (worded where it is shown: refusal_sentence)."""
    return Outcome(StatementStatus.REFUSED, last_status=answer.status, reason=answer.words)


def refusal_sentence(row: RowState) -> str:
    """What `normdive xapi status` says of a refused row."""
    return (
        f"The LRS refused it ({row.last_status or 'no status'}, {row.reason or 'no reason'}). "
        "Once its administrator has fixed what it refused, `normdive xapi resend` sends it."
    )


def _is_outage(answer: Answer) -> bool:
    status = answer.status
    return status is None or status >= 500 or status in OUTAGE_STATUSES or 300 <= status < 400


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (RFC 9110 10.2.3, the delay form), capped; None without one."""
    try:
        return min(float(response.headers.get("retry-after", "")), MAX_RETRY_AFTER_S)
    except ValueError:
        return None


class Sender:
    round_size = ROUND_SIZE
    poll_s = POLL_INTERVAL_S
    what = "xAPI events"
    """Sends the due rows of the outbox. `clock`: tests move it instead of waiting."""

    def __init__(
        self,
        engine: Engine,
        tool: Tool,
        client: httpx.Client | None = None,
        clock: Callable[[], datetime] = system_clock,
    ) -> None:
        self.engine = engine
        self.tool = tool
        self._own_client = client is None
        self.client = client or httpx.Client(timeout=XAPI_TIMEOUT_S, follow_redirects=False)
        self.clock = clock

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def send_due(self, limit: int = ROUND_SIZE) -> RoundReport:
        now = self.clock()
        claimed = self._claim(now, limit)
        report = RoundReport(tried=len(claimed))
        if not claimed:
            return report
        rows = self._made(claimed)
        by_lrs: dict[int, list[_Row]] = {}
        for row in rows:
            if row.lrs is None:
                self._settle([row], Outcome(StatementStatus.NO_LRS, reason=NO_LRS_REASON))
                report.failed += 1
            elif not row.statements:
                self._settle([row], Outcome(_done(row)))
                report.sent += 1
            else:
                by_lrs.setdefault(row.lrs.id, []).append(row)
        for batch in by_lrs.values():
            self._deliver(batch, report)
        return report

    def _claim(self, now: datetime, limit: int) -> list[Any]:
        """Take up to `limit` due rows for this round (one UPDATE), and read them back."""
        token = secrets.token_hex(32)
        due = (
            select(XapiOutbox.event_id)
            .where(XapiOutbox.due_at <= now)
            .order_by(XapiOutbox.due_at, XapiOutbox.event_id)
            .limit(limit)
            .scalar_subquery()
        )
        with self.engine.begin() as connection:
            connection.execute(
                update(XapiOutbox)
                .where(XapiOutbox.event_id.in_(due), XapiOutbox.due_at <= now)
                .values(claim=token, due_at=now + timedelta(seconds=CLAIM_LEASE_S))
            )
            return list(
                connection.execute(
                    select(XapiOutbox)
                    .where(XapiOutbox.claim == token)
                    .order_by(XapiOutbox.event_id)
                ).all()
            )

    def _made(self, claimed: Sequence[Any]) -> list[_Row]:
        """Each claimed row's LRS and statements (to send, or their voiding statements)."""
        learners = _learners(self.engine, claimed)
        events = _events(self.engine, [row.event_id for row in claimed])
        routes = stores.stored(self.engine)
        now = self.clock().astimezone(UTC).isoformat()
        made = []
        for row in claimed:
            learner, language = learners[(row.learner_id, row.link_key)]
            found = _Row(row.event_id, StatementStatus(row.status), row.attempts, row.claim)
            context_key = learner.link.context_key if learner.link is not None else None
            found.lrs = stores.route(routes, context_key)
            event = events.get(row.event_id)
            if event is not None:
                translated = localized(self.tool.lesson, language)
                found.statements = statements_of(event, learner, self.tool, translated, language)
            if found.status is StatementStatus.VOIDING:
                found.statements = [
                    voiding(self.tool, statement["id"], now) for statement in found.statements
                ]
            made.append(found)
        return made

    def _deliver(self, rows: list[_Row], report: RoundReport) -> None:
        """POST the rows' statements to their LRS; on a refusal, row by row."""
        lrs = rows[0].lrs
        assert lrs is not None
        statements = [statement for row in rows for statement in row.statements]
        answer = self._post(lrs, statements)
        if answer.status is not None and 200 <= answer.status < 300:
            self._settle_each(rows, lambda row: Outcome(_done(row), last_status=answer.status))
            report.sent += len(rows)
            report.statements += len(statements)
            return
        if _is_outage(answer):
            self._settle(rows, outage(answer))
            report.failed += len(rows)
            return
        if len(rows) > 1:
            for row in rows:
                self._deliver([row], report)
            return
        outcome = self._one_by_one(lrs, rows[0], answer, report)
        self._settle(rows, outcome)
        if outcome.status in (StatementStatus.SENT, StatementStatus.VOIDED):
            report.sent += 1
        else:
            report.failed += 1

    def _one_by_one(self, lrs: Lrs, row: _Row, answer: Answer, report: RoundReport) -> Outcome:
        """A refused row's statements, each on its own: the outcome of the first that is not
        taken, else the row's success. A statement the LRS holds already (409) counts as taken."""
        held = None
        for statement in row.statements:
            if len(row.statements) > 1:
                answer = self._post(lrs, [statement])
            if answer.status is not None and 200 <= answer.status < 300:
                report.statements += 1
                continue
            if answer.status == CONFLICT:
                held = f"The LRS holds an earlier version of statement {statement['id']} (409 "
                held += f"{answer.words}); it keeps that one."
                continue
            if _is_outage(answer):
                return outage(answer)
            return refused(answer)
        return Outcome(_done(row), last_status=answer.status, reason=held)

    def _post(self, lrs: Lrs, statements: list[Statement]) -> Answer:
        try:
            response = self.client.post(
                lrs.endpoint,
                json=statements,
                auth=(lrs.key, lrs.secret),
                headers={"X-Experience-API-Version": XAPI_VERSION},
            )
        except httpx.HTTPError as error:
            return Answer(None, f"no answer: {type(error).__name__}")
        words = "" if response.is_success else platform_words(response.content)
        return Answer(response.status_code, words, _retry_after(response))

    def _settle_each(self, rows: list[_Row], outcome: Callable[[_Row], Outcome]) -> None:
        by_outcome: dict[Outcome, list[_Row]] = {}
        for row in rows:
            by_outcome.setdefault(outcome(row), []).append(row)
        for found, same in by_outcome.items():
            self._settle(same, found)

    def _settle(self, rows: list[_Row], outcome: Outcome) -> None:
        """Write one outcome on `rows` (their claim ends with it)."""
        now = self.clock()
        values: dict[str, Any] = {
            "status": outcome.status,
            "claim": None,
            "updated_at": now,
            "last_status": outcome.last_status,
            "reason": outcome.reason,
            "lrs_id": rows[0].lrs.id if rows[0].lrs is not None else None,
        }
        if outcome.status is StatementStatus.FAILING:
            # A row that was being voided stays so; its backoff is the same.
            for row in rows:
                attempts = row.attempts + 1
                wait = max(retry_delay(attempts), outcome.retry_after_s or 0.0)
                status = (
                    StatementStatus.VOIDING
                    if row.status is StatementStatus.VOIDING
                    else StatementStatus.FAILING
                )
                self._write(
                    [row],
                    {
                        **values,
                        "status": status,
                        "attempts": attempts,
                        "due_at": now + timedelta(seconds=wait),
                    },
                )
            logger.warning("xAPI: %d event(s) not delivered: %s", len(rows), outcome.reason)
            return
        if outcome.status is StatementStatus.REFUSED:
            logger.warning("xAPI: event %d refused: %s", rows[0].event_id, outcome.reason)
        self._write(rows, {**values, "attempts": 0, "due_at": None})

    def _write(self, rows: list[_Row], values: dict[str, Any]) -> None:
        """Write `values` on the rows this round still holds: one resent, voided or withheld
        meanwhile (its claim cleared) keeps what that made of it."""
        with self.engine.begin() as connection:
            connection.execute(
                update(XapiOutbox)
                .where(
                    XapiOutbox.event_id.in_([row.event_id for row in rows]),
                    XapiOutbox.claim == rows[0].claim,
                )
                .values(**values)
            )


NO_LRS_REASON = (
    "No LRS takes this learner's statements: their course has none, and the deployment has "
    "none (`normdive xapi add`). They are sent once one is added and `normdive xapi resend` runs."
)


def _done(row: _Row) -> StatementStatus:
    return StatementStatus.VOIDED if row.status is StatementStatus.VOIDING else StatementStatus.SENT


def _events(engine: Engine, event_ids: list[int]) -> dict[int, Event]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                EventRecord.id,
                EventRecord.learner_id,
                EventRecord.kind,
                EventRecord.payload,
                EventRecord.created_at,
            ).where(EventRecord.id.in_(event_ids))
        ).all()
    return {
        row.id: Event(
            row.id, row.learner_id, EventKind(row.kind), row.payload, as_utc(row.created_at)
        )
        for row in rows
        if row.kind in STATEMENT_KINDS
    }


def _learners(
    engine: Engine, claimed: Iterable[Any]
) -> dict[tuple[str, str | None], tuple[Learner, str]]:
    """Each (learner, link) of the claimed rows, with the launch's language, else the lesson's."""
    pairs = {(row.learner_id, row.link_key) for row in claimed}
    learner_ids = sorted({learner_id for learner_id, _ in pairs})
    with engine.connect() as connection:
        links = {
            (row.learner_id, row.link_key): row
            for row in connection.execute(
                select(*LtiLearnerLink.__table__.columns, LtiRegistration.issuer)
                .join(LtiRegistration, LtiRegistration.id == LtiLearnerLink.registration_id)
                .where(LtiLearnerLink.learner_id.in_(learner_ids))
            ).all()
        }
        # A roster member's name and email, where the platform sent them and they were kept.
        people = {
            row.learner_id: (row.name, row.email)
            for row in connection.execute(
                select(LtiLearner.learner_id, LtiRosterMember.name, LtiRosterMember.email)
                .join(LtiRosterMember, LtiRosterMember.link_key == LtiLearner.link_key)
                .where(LtiLearner.learner_id.in_(learner_ids))
            ).all()
        }
    found = {}
    for learner_id, link_key in pairs:
        row = links.get((learner_id, link_key)) if link_key is not None else None
        link = None
        language = DEFAULT_LOCALE
        if row is not None:
            link = LtiLink(
                link_key=row.link_key,
                issuer=row.issuer,
                user_id=row.user_id,
                resource_link_id=row.resource_link_id,
                resource_link_title=row.resource_link_title,
                context_key=row.context_key,
                context_id=row.context_id,
                context_title=row.context_title,
                platform=row.platform,
            )
            language = supported(row.locale) or DEFAULT_LOCALE
        name, email = people.get(learner_id, (None, None))
        found[(learner_id, link_key)] = (Learner(learner_id, link, name, email), language)
    return found


@dataclass(frozen=True)
class RowState:
    """One outbox row as `normdive xapi status` lists it."""

    event_id: int
    learner_id: str
    kind: str
    status: StatementStatus
    due_at: datetime | None
    attempts: int
    last_status: int | None
    reason: str | None
    lrs: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "learner_id": self.learner_id,
            "kind": self.kind,
            "status": self.status.value,
            "due_at": self.due_at.isoformat() if self.due_at else None,
            "attempts": self.attempts,
            "last_status": self.last_status,
            "reason": self.reason,
            "lrs": self.lrs,
        }


# The rows of the learners no LMS launched.
_OUTSIDE_LMS = XapiOutbox.learner_id.not_in(select(LtiLearner.learner_id))
_Rows = TypeVar("_Rows", bound=Select[*tuple[Any, ...]])


def _chosen(query: _Rows, context_key: str | None, outside_lms: bool) -> _Rows:
    """`query` kept to one course's rows (by the link when the event was stored), or with
    `outside_lms` to the learners no LMS launched; every row otherwise."""
    if outside_lms:
        return query.where(_OUTSIDE_LMS)
    if context_key is None:
        return query
    linked = and_(
        LtiLearnerLink.learner_id == XapiOutbox.learner_id,
        LtiLearnerLink.link_key == XapiOutbox.link_key,
    )
    return query.join(LtiLearnerLink, linked).where(LtiLearnerLink.context_key == context_key)


def counts(
    engine: Engine, context_key: str | None = None, *, outside_lms: bool = False
) -> dict[StatementStatus, int]:
    """Rows by status: all, one course's (by the link when the event was stored), or with
    `outside_lms` those of learners no LMS launched."""
    by_status = select(XapiOutbox.status, func.count()).group_by(XapiOutbox.status)
    query = _chosen(by_status, context_key, outside_lms)
    with engine.connect() as connection:
        found = {StatementStatus(row[0]): int(row[1]) for row in connection.execute(query).all()}
    return {status: found.get(status, 0) for status in StatementStatus}


def attention(
    engine: Engine, context_key: str | None = None, limit: int = 100, *, outside_lms: bool = False
) -> list[RowState]:
    """Refused, then waiting (failing, voiding, no LRS), newest first; chosen as in `counts`."""
    waiting = [
        StatementStatus.REFUSED,
        StatementStatus.FAILING,
        StatementStatus.NO_LRS,
        StatementStatus.VOIDING,
    ]
    query = (
        select(*XapiOutbox.__table__.columns, EventRecord.kind)
        .join(EventRecord, EventRecord.id == XapiOutbox.event_id)
        .where(XapiOutbox.status.in_([status.value for status in waiting]))
    )
    query = _chosen(query, context_key, outside_lms)
    names = {lrs.id: lrs.name for lrs in stores.stored(engine)}
    with engine.connect() as connection:
        rows = connection.execute(query.order_by(XapiOutbox.event_id.desc()).limit(limit)).all()
    found = [
        RowState(
            event_id=row.event_id,
            learner_id=row.learner_id,
            kind=row.kind,
            status=StatementStatus(row.status),
            due_at=as_utc(row.due_at) if row.due_at else None,
            attempts=row.attempts,
            last_status=row.last_status,
            reason=row.reason,
            lrs=names.get(row.lrs_id) if row.lrs_id else None,
        )
        for row in rows
    ]
    return sorted(found, key=lambda row: row.status is not StatementStatus.REFUSED)


def resend(engine: Engine, learner_id: str, clock: Callable[[], datetime] = system_clock) -> int:
    """Queue all the learner's statements again (the LRS keeps each once), those of events
    stored before an LRS was set included; voided or withheld rows stay so. The rows queued."""
    now = clock()
    with engine.begin() as connection:
        latest = (
            select(LtiLearnerLink.link_key)
            .where(LtiLearnerLink.learner_id == learner_id)
            .order_by(LtiLearnerLink.last_launch_at.desc())
            .limit(1)
            .scalar_subquery()
        )
        queued = (
            select(EventRecord.id)
            .where(EventRecord.learner_id == learner_id)
            .where(EventRecord.kind.in_([kind.value for kind in STATEMENT_KINDS]))
            .where(EventRecord.id.not_in(select(XapiOutbox.event_id)))
        )
        missing = [event_id for (event_id,) in connection.execute(queued).all()]
        link_key = connection.execute(select(latest)).scalar()
        for event_id in missing:
            connection.execute(
                insert(XapiOutbox).values(
                    event_id=event_id,
                    learner_id=learner_id,
                    link_key=link_key,
                    status=StatementStatus.DUE,
                    due_at=now,
                    attempts=0,
                )
            )
        again = connection.execute(
            update(XapiOutbox)
            .where(
                XapiOutbox.learner_id == learner_id,
                XapiOutbox.status.not_in([StatementStatus.VOIDED, StatementStatus.WITHHELD]),
                XapiOutbox.status != StatementStatus.VOIDING,
            )
            .values(status=StatementStatus.DUE, due_at=now, attempts=0, claim=None)
        ).rowcount
    return int(again)


def resend_refused(engine: Engine, clock: Callable[[], datetime] = system_clock) -> int:
    """Queue again every row an LRS refused, or that found no LRS. The rows queued."""
    with engine.begin() as connection:
        queued = connection.execute(
            update(XapiOutbox)
            .where(XapiOutbox.status.in_([StatementStatus.REFUSED, StatementStatus.NO_LRS]))
            .values(status=StatementStatus.DUE, due_at=clock(), attempts=0, claim=None)
        ).rowcount
    return int(queued)


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did with one learner's rows: to be voided, and never to be sent."""

    voiding: int
    withheld: int


def forget(
    engine: Engine, learner_id: str, clock: Callable[[], datetime] = system_clock
) -> Forgotten:
    """Void each statement that may have reached the LRS (xAPI 1.0.3 Data 2.3.2); those never
    tried are never sent."""
    now = clock()
    with engine.begin() as connection:
        mine = XapiOutbox.learner_id == learner_id
        never_tried = and_(
            XapiOutbox.status.in_([StatementStatus.DUE, StatementStatus.NO_LRS]),
            XapiOutbox.updated_at.is_(None),
            XapiOutbox.claim.is_(None),
        )
        withheld = connection.execute(
            update(XapiOutbox)
            .where(mine, never_tried)
            .values(status=StatementStatus.WITHHELD, due_at=None)
        ).rowcount
        voiding_rows = connection.execute(
            update(XapiOutbox)
            .where(
                mine,
                XapiOutbox.status.not_in([StatementStatus.WITHHELD, StatementStatus.VOIDED]),
            )
            .values(status=StatementStatus.VOIDING, due_at=now, attempts=0, claim=None)
        ).rowcount
    return Forgotten(voiding=int(voiding_rows), withheld=int(withheld))
