"""Grade passback (LTI Assignment and Grade Services 2.0): the gate's progress as a score,
sent to each grade target (one per learner and resource link) on its own.

A write that may change the gate queues the learner in lti_score_outbox (a trigger on events,
migration 0005); `Sender` fans them out to their targets, claims each due target with one
UPDATE (several workers may run) and writes its outcome on it alone, so a crash loses nothing.
What each answer leads to: README, "Use it from an LMS"; the reasons' words: lti.grade_doctor.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from sqlalchemy import ColumnElement, Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from normdive.config import origin_of
from normdive.lesson.content import Lesson
from normdive.lti import grade_doctor, registrations
from normdive.lti.grade_doctor import TargetStatus
from normdive.lti.launch import Launch
from normdive.lti.platform_http import AnswerTooLarge, read_body
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.lti.registrations import Registration, url_problem
from normdive.lti.service_token import token_form
from normdive.progress.events import Event
from normdive.progress.facts import recording_facts_at
from normdive.progress.state import derive
from normdive.store.event_store import Store, as_utc
from normdive.store.tables import (
    LtiGradeTarget,
    LtiLinkLineitem,
    LtiRegistration,
    LtiScoreOutbox,
    course_learners,
)

logger = logging.getLogger(__name__)

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEM_CONTAINER_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
# The line items container's filter on a resource link (AGS 2.0, 3.2).
RESOURCE_LINK_PARAMETER = "resource_link_id"
# Submission Review 1.0, 3.1 (activityProgress values); the review URL is the launch URL, so
# the line item names none.
REVIEWABLE_STATUS = ("InProgress", "Submitted", "Completed")
# One request, its whole answer included.
PASSBACK_TIMEOUT_S = 10.0
# A token or a new line item is a few hundred bytes; an error page a few KiB.
MAX_ANSWER_BYTES = 64 * 1024
ANSWER_EXCERPT_CHARS = 200
# Doubling per outage answer in a row: a platform back from an outage has every score in 5 min.
FIRST_RETRY_S = 5.0
MAX_RETRY_S = 300.0
# An access token is used until this long before the platform says it expires.
TOKEN_MARGIN_S = 30
# A token, a line item, the score, a new token, the score, a new line item, the score there.
REQUESTS_PER_SEND = 7
# A worker that dies holding a target leaves it due again after this.
CLAIM_LEASE_S = REQUESTS_PER_SEND * PASSBACK_TIMEOUT_S
# Targets sent, and learners fanned out, in one round of `normdive lti passback`.
ROUND_SIZE = 50
SCORE_TIMESTAMP_STEP = timedelta(milliseconds=1)
POLL_INTERVAL_S = 2.0
# While another sender makes the link's line item.
LINK_WAIT_S = FIRST_RETRY_S

# Down or busy for now (RFC 9110: Request Timeout, Too Early, Too Many Requests; every 5xx).
OUTAGE_STATUSES = frozenset({408, 425, 429})
GONE_STATUSES = frozenset({404, 410})
AUTH_STATUSES = frozenset({401, 403})


# Due again on a write: the failing keep their backoff (a learner's writes must not hammer a
# platform that is down), the gone stay gone.
FANNED_OUT = (TargetStatus.DUE, TargetStatus.SENT, TargetStatus.REFUSED, TargetStatus.FOREIGN)


class LineitemSource(StrEnum):
    """Who made a target's line item URL (None in the column: the launch named it)."""

    CREATED = "created"
    # After the one it created was deleted: never created a third time.
    RECREATED = "recreated"


@dataclass(frozen=True)
class Score:
    given: int
    maximum: int
    completed: bool
    timestamp: datetime

    def content(self, user_id: str) -> dict[str, Any]:
        """The score's JSON without its timestamp (what tells two scores apart)."""
        return {
            "userId": user_id,
            "scoreGiven": self.given,
            "scoreMaximum": self.maximum,
            "activityProgress": "Completed" if self.completed else "InProgress",
            "gradingProgress": "FullyGraded" if self.completed else "Pending",
        }


def stamped(content: dict[str, Any], timestamp: datetime) -> dict[str, Any]:
    return {**content, "timestamp": timestamp.astimezone(UTC).isoformat()}


def next_timestamp(latest_event: datetime, last_sent: datetime | None) -> datetime:
    """The latest event's time, but after the last score sent to the line item: a platform
    keeps only a score stamped later than the one it has (AGS 2.0, 3.4.5)."""
    moment = latest_event.astimezone(UTC)
    if last_sent is None:
        return moment
    return max(moment, as_utc(last_sent) + SCORE_TIMESTAMP_STEP)


def parts_total(lesson: Lesson) -> int:
    """The gate's parts: each number, the reading, each row's prediction, the best row."""
    return len(lesson.number_fields) + 1 + len(lesson.rows) + 1


def gate_score(events: Sequence[Event], lesson: Lesson, recording_path: Path) -> Score:
    """The score the learner's history earns, stamped with their latest event's time."""
    state = derive(
        events, lesson, recording=recording_facts_at(recording_path), dev_prerequisite_done=False
    )
    gate = state.gate
    total = parts_total(lesson)
    done = (
        gate.numbers_landed
        + int(gate.reading_right)
        + min(gate.predictions_recorded, len(lesson.rows))
        + int(gate.best_row_played)
    )
    latest = max((event.created_at for event in events), default=datetime.now(UTC))
    return Score(
        given=total if gate.closed else min(done, total),
        maximum=total,
        completed=gate.closed,
        timestamp=latest,
    )


def platform_origins(registration: Registration) -> tuple[str, ...]:
    """Where a bearer token may go: the issuer's, endpoints' and frame origins (Canvas serves
    grades on the school's host, its token endpoint on sso.canvaslms.com)."""
    found = [
        origin_of(url)
        for url in (
            registration.issuer,
            registration.auth_login_url,
            registration.token_url,
            registration.jwks_url,
        )
    ]
    found.extend(registration.frame_origins)
    return tuple(dict.fromkeys(origin for origin in found if origin is not None))


def foreign_reason(url: str, registration: Registration) -> str | None:
    """Why a token must not go to `url`; None when it may."""
    allowed = platform_origins(registration)
    if origin_of(url) in allowed:
        return None
    return grade_doctor.foreign(origin_of(url) or repr(url), registration.issuer, allowed)


def link_key(launch: Launch) -> str:
    """SHA-256 of (issuer, client id, deployment id, resource link id)."""
    registration = launch.registration
    parts = (
        registration.issuer,
        registration.client_id,
        launch.deployment_id,
        launch.resource_link_id,
    )
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def record_grade_target(connection: Connection, launch: Launch, learner_id: str) -> bool:
    """Where this launch's scores go, if it offers the score scope (True). A launch naming a
    line item makes a gone target due again."""
    endpoint = launch.ags_endpoint or {}
    scopes = endpoint.get("scope")
    lineitem = endpoint.get("lineitem")
    lineitems = endpoint.get("lineitems")
    if not isinstance(scopes, list) or SCORE_SCOPE not in scopes:
        return False
    if not isinstance(lineitem, str) and not isinstance(lineitems, str):
        return False
    for url in (lineitem, lineitems):
        if isinstance(url, str) and (why := foreign_reason(url, launch.registration)):
            logger.warning("grade target of learner %s: %s", learner_id, why)
    key = link_key(launch)
    where = (LtiGradeTarget.learner_id == learner_id, LtiGradeTarget.target_key == key)
    values: dict[str, Any] = {
        "registration_id": launch.registration.id,
        "user_id": launch.subject,
        "resource_link_id": launch.resource_link_id,
        "lineitems_url": lineitems if isinstance(lineitems, str) else None,
    }
    now = datetime.now(UTC)
    kept = connection.execute(
        select(LtiGradeTarget.lineitem_url, LtiGradeTarget.status).where(*where)
    ).first()
    if kept is None:
        connection.execute(
            insert(LtiGradeTarget).values(
                learner_id=learner_id,
                target_key=key,
                lineitem_url=lineitem if isinstance(lineitem, str) else None,
                status=TargetStatus.DUE,
                due_at=now,
                **values,
            )
        )
    else:
        if isinstance(lineitem, str) and lineitem != kept.lineitem_url:
            # What was sent or refused went to another line item.
            values.update(
                lineitem_url=lineitem, lineitem_source=None, sent_score=None, refused_score=None
            )
        if isinstance(lineitem, str) and kept.status == TargetStatus.GONE:
            values.update(status=TargetStatus.DUE, due_at=now, attempts=0)
        connection.execute(update(LtiGradeTarget).where(*where).values(**values))
    enqueue(connection, learner_id)
    return True


def forget_grade_target(connection: Connection, launch: Launch, learner_id: str) -> None:
    """For a launch whose roles make the user no learner (lti.roles): never graded there, and
    nothing refused for them for the instructor to fix."""
    connection.execute(
        delete(LtiGradeTarget).where(
            LtiGradeTarget.learner_id == learner_id,
            LtiGradeTarget.target_key == link_key(launch),
        )
    )


def enqueue(connection: Connection, learner_id: str) -> None:
    """Queue the learner in lti_score_outbox now, as the trigger on events does."""
    now = datetime.now(UTC)
    bumped = connection.execute(
        update(LtiScoreOutbox)
        .where(LtiScoreOutbox.learner_id == learner_id)
        .values(version=LtiScoreOutbox.version + 1, due_at=now, attempts=0)
    ).rowcount
    if not bumped:
        connection.execute(
            insert(LtiScoreOutbox).values(learner_id=learner_id, version=1, due_at=now, attempts=0)
        )


def retry_delay(attempts: int) -> float:
    """Seconds a failing target waits after the `attempts`-th outage answer in a row."""
    return float(min(FIRST_RETRY_S * 2 ** max(0, min(attempts, 64) - 1), MAX_RETRY_S))


@dataclass(frozen=True)
class TargetState:
    """One grade target as `normdive lti outbox` shows it."""

    learner_id: str
    user_id: str
    resource_link_id: str
    issuer: str
    lineitem_url: str | None
    status: TargetStatus
    due_at: datetime | None
    attempts: int
    last_status: int | None
    last_answer: str | None
    reason: str | None
    updated_at: datetime | None
    sent_score: dict[str, Any] | None

    @property
    def waiting(self) -> bool:
        return self.due_at is not None

    @property
    def needs_attention(self) -> bool:
        return self.status in (TargetStatus.REFUSED, TargetStatus.GONE, TargetStatus.FOREIGN)

    def as_json(self) -> dict[str, Any]:
        return {
            "learner_id": self.learner_id,
            "user_id": self.user_id,
            "resource_link_id": self.resource_link_id,
            "issuer": self.issuer,
            "lineitem_url": self.lineitem_url,
            "status": self.status.value,
            "due_at": self.due_at.isoformat() if self.due_at else None,
            "attempts": self.attempts,
            "last_status": self.last_status,
            "last_answer": self.last_answer,
            "reason": self.reason,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "sent_score": self.sent_score,
        }


def targets(engine: Engine) -> list[TargetState]:
    """Those needing attention first, then those waiting, soonest first."""
    with engine.connect() as connection:
        issuers = dict(connection.execute(select(LtiRegistration.id, LtiRegistration.issuer)).all())
        rows = connection.execute(
            select(LtiGradeTarget).order_by(LtiGradeTarget.learner_id, LtiGradeTarget.target_key)
        ).all()
    found = [
        TargetState(
            learner_id=row.learner_id,
            user_id=row.user_id,
            resource_link_id=row.resource_link_id,
            issuer=issuers.get(row.registration_id, "?"),
            lineitem_url=row.lineitem_url,
            status=TargetStatus(row.status),
            due_at=as_utc(row.due_at) if row.due_at is not None else None,
            attempts=row.attempts,
            last_status=row.last_status,
            last_answer=row.last_answer,
            reason=row.reason,
            updated_at=as_utc(row.updated_at) if row.updated_at is not None else None,
            sent_score=row.sent_score,
        )
        for row in rows
    ]
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(found, key=lambda t: (not t.needs_attention, not t.waiting, t.due_at or far))


HTML_PAGE = re.compile(rb"\s*<(!doctype|html)", re.IGNORECASE)


def is_error_page(body: bytes) -> bool:
    return HTML_PAGE.match(body) is not None


def platform_words(body: bytes) -> str:
    """One printable line: an OAuth 2 or JSON error's message, an HTML page's text, or the body."""
    text = body.decode("utf-8", "replace")
    try:
        data = parsed(body)
    except NotPlatformJson:
        data = None
    if isinstance(data, dict):
        said = [
            data[name]
            for name in ("error", "error_description", "message", "detail", "reason")
            if isinstance(data.get(name), str)
        ]
        if said:
            text = ": ".join(said)
    elif is_error_page(body):
        text = re.sub(r"<[^>]*>", " ", text)
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if len(line) > ANSWER_EXCERPT_CHARS:
        return line[: ANSWER_EXCERPT_CHARS - 1] + "…"
    return line


@dataclass(frozen=True)
class Answer:
    """A platform's answer: its status and, unless it took the request, its words."""

    status: int
    body: bytes
    words: str


class NoAnswer(Exception):
    """No answer came (a timeout, a refused connection, a broken one): an outage."""


class Unusable(Exception):
    """The platform answered 2xx with something the tool cannot use: why, for the reason."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


@dataclass(frozen=True)
class Outcome:
    """What one try at a target came to, as it is written on the target."""

    status: TargetStatus
    answer_status: int | None = None
    answer: str | None = None
    reason: str | None = None
    # The score the platform took, and its timestamp.
    sent: tuple[dict[str, Any], datetime] | None = None
    refused_score: dict[str, Any] | None = None
    # False: decided without a request (the platform has this score, or refused exactly it).
    requested: bool = True


def holds_it_already(answer: Answer) -> bool:
    """A refusal saying the platform holds a score with this timestamp (Open edX): no timestamp
    goes on two scores (next_timestamp), so it holds this one."""
    known = grade_doctor.known_answer(answer.status, answer.words)
    return known is not None and known.holds_score


def _said(answer: Answer) -> str:
    return f"{answer.status} {answer.words}".strip()


def outage(what: str, answer: Answer | None, error: str | None = None) -> Outcome:
    said = _said(answer) if answer is not None else error or "no answer"
    return Outcome(
        TargetStatus.FAILING,
        answer_status=answer.status if answer is not None else None,
        answer=answer.words if answer is not None else error,
        reason=grade_doctor.outage(what, said, MAX_RETRY_S / 60),
    )


def _answered(
    status: TargetStatus,
    answer: Answer,
    reason: str,
    refused_score: dict[str, Any] | None = None,
) -> Outcome:
    return Outcome(
        status,
        answer_status=answer.status,
        answer=answer.words,
        reason=reason,
        refused_score=refused_score,
    )


def _outcome_of(answer: Answer, what: str, content: dict[str, Any], refusal: str) -> Outcome | None:
    """None for 2xx. `refusal`: what a 4xx means, and what to check."""
    status = answer.status
    if 200 <= status < 300:
        return None
    if status >= 500 or status in OUTAGE_STATUSES:
        return outage("the platform's grade service", answer)
    if status in GONE_STATUSES:
        return _answered(TargetStatus.GONE, answer, grade_doctor.gone(what, _said(answer)))
    if status in AUTH_STATUSES:
        reason = grade_doctor.access_refused(what, _said(answer))
    elif 300 <= status < 400:
        reason = grade_doctor.refused(grade_doctor.redirected(what), status, answer.words)
    else:
        reason = grade_doctor.refused(refusal, status, answer.words)
    return _answered(TargetStatus.REFUSED, answer, reason, refused_score=content)


@dataclass
class RoundReport:
    sent: int = 0
    # Failing, refused, gone, foreign.
    failed: int = 0
    # Claimed: sent, failed, or found to have their score already.
    tried: int = 0


def system_clock() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Token:
    value: str
    expires_at: float
    round: int


@dataclass
class _Round:
    number: int
    scores: dict[str, Score] = field(default_factory=dict)
    # One failed token request fails every target of its registration this round.
    token_failures: dict[int, Outcome] = field(default_factory=dict)
    # Each try may cost PASSBACK_TIMEOUT_S: one silent platform must not hold back the others.
    silent: dict[str, Outcome] = field(default_factory=dict)


class Sender:
    round_size = ROUND_SIZE
    poll_s = POLL_INTERVAL_S
    what = "score passback"
    """Sends the due grade targets; keeps access tokens between rounds. `clock`: tests move it."""

    def __init__(
        self,
        engine: Engine,
        lesson: Lesson,
        recording_path: Path,
        client: httpx.Client | None = None,
        clock: Callable[[], datetime] = system_clock,
    ) -> None:
        self.engine = engine
        self.store = Store(engine)
        self.lesson = lesson
        self.recording_path = recording_path
        self.client = client or httpx.Client(timeout=PASSBACK_TIMEOUT_S, follow_redirects=False)
        self.clock = clock
        self._tokens: dict[int, _Token] = {}
        self._rounds = 0

    def send_due(self, limit: int = ROUND_SIZE) -> RoundReport:
        self._rounds += 1
        work = _Round(self._rounds)
        self.fan_out(limit)
        now = self.clock()
        with self.engine.connect() as connection:
            due = connection.execute(
                select(LtiGradeTarget.learner_id, LtiGradeTarget.target_key)
                .where(LtiGradeTarget.due_at <= now)
                .order_by(LtiGradeTarget.due_at)
                .limit(limit)
            ).all()
        report = RoundReport()
        for learner_id, target_key in due:
            target = self._claim(learner_id, target_key, now)
            if target is None:
                continue  # another worker took it first
            report.tried += 1
            outcome = self._send_target(target, work)
            if outcome is None:
                continue  # its registration was removed meanwhile, and the target with it
            if outcome.sent is not None:
                report.sent += 1
            elif outcome.requested:
                report.failed += 1
            self._settle(target, outcome)
        return report

    def fan_out(self, limit: int = ROUND_SIZE) -> int:
        """Make the outbox's learners' targets due (FANNED_OUT); the number of learners."""
        now = self.clock()
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(LtiScoreOutbox.learner_id, LtiScoreOutbox.version)
                .order_by(LtiScoreOutbox.due_at)
                .limit(limit)
            ).all()
        for learner_id, version in rows:
            with self.engine.begin() as connection:
                mine = LtiGradeTarget.learner_id == learner_id
                connection.execute(
                    update(LtiGradeTarget)
                    .where(mine)
                    .values(score_version=LtiGradeTarget.score_version + 1)
                )
                connection.execute(
                    update(LtiGradeTarget)
                    .where(
                        mine,
                        LtiGradeTarget.due_at.is_(None),
                        LtiGradeTarget.status.in_([status.value for status in FANNED_OUT]),
                    )
                    .values(due_at=now)
                )
                connection.execute(
                    delete(LtiScoreOutbox).where(
                        LtiScoreOutbox.learner_id == learner_id, LtiScoreOutbox.version == version
                    )
                )
        return len(rows)

    def _claim(self, learner_id: str, target_key: str, now: datetime) -> Any:
        """One UPDATE, so two workers never both take it."""
        mine = (LtiGradeTarget.learner_id == learner_id, LtiGradeTarget.target_key == target_key)
        with self.engine.begin() as connection:
            claimed = connection.execute(
                update(LtiGradeTarget)
                .where(*mine, LtiGradeTarget.due_at <= now)
                .values(due_at=now + timedelta(seconds=CLAIM_LEASE_S))
            ).rowcount
            if not claimed:
                return None
            return connection.execute(select(LtiGradeTarget).where(*mine)).one()

    def _settle(self, target: Any, outcome: Outcome) -> None:
        """A write to the learner's score since the claim (score_version moved) leaves the
        target due now, whatever this try sent."""
        now = self.clock()
        mine = _the_target(target)
        values: dict[str, Any] = {"status": outcome.status, "updated_at": now}
        if outcome.answer_status is not None or outcome.answer is not None or outcome.reason:
            values.update(
                last_status=outcome.answer_status, last_answer=outcome.answer, reason=outcome.reason
            )
        if outcome.sent is not None:
            values.update(sent_score=outcome.sent[0], sent_timestamp=outcome.sent[1])
        if outcome.refused_score is not None:
            values["refused_score"] = outcome.refused_score
        if outcome.status is TargetStatus.FAILING:
            attempts = target.attempts + 1
            values.update(attempts=attempts, due_at=now + timedelta(seconds=retry_delay(attempts)))
            logger.warning(
                "score passback for learner %s (%s), try %d: %s",
                target.learner_id,
                target.user_id,
                attempts,
                outcome.reason,
            )
        elif outcome.status is TargetStatus.DUE:
            values["due_at"] = now + timedelta(seconds=LINK_WAIT_S)
        else:
            values.update(attempts=0, due_at=None)
            if outcome.requested and outcome.status is not TargetStatus.SENT:
                logger.warning(
                    "score passback for learner %s (%s): %s %s",
                    target.learner_id,
                    target.user_id,
                    outcome.status.value,
                    outcome.reason,
                )
        with self.engine.begin() as connection:
            connection.execute(update(LtiGradeTarget).where(*mine).values(**values))
            if outcome.status not in (TargetStatus.FAILING, TargetStatus.GONE):
                connection.execute(
                    update(LtiGradeTarget)
                    .where(*mine, LtiGradeTarget.score_version != target.score_version)
                    .values(due_at=now)
                )

    def _stamp(self, target: Any, timestamp: datetime) -> None:
        """Kept before the send: one whose answer never came is followed by one stamped later,
        which a platform refusing a repeated timestamp takes."""
        with self.engine.begin() as connection:
            connection.execute(
                update(LtiGradeTarget).where(*_the_target(target)).values(sent_timestamp=timestamp)
            )

    def _score(self, learner_id: str, work: _Round) -> Score:
        if learner_id not in work.scores:
            events = self.store.events_for(learner_id)
            work.scores[learner_id] = gate_score(events, self.lesson, self.recording_path)
        return work.scores[learner_id]

    def _send_target(self, target: Any, work: _Round) -> Outcome | None:
        """None when there was nothing to send."""
        registration = registrations.by_id(self.engine, target.registration_id)
        if registration is None:
            return None  # removed meanwhile: its targets go with it
        content = self._score(target.learner_id, work).content(target.user_id)
        lineitem = target.lineitem_url
        if lineitem is not None and content == target.sent_score:
            return Outcome(TargetStatus.SENT, requested=False)  # the platform has it already
        if TargetStatus(target.status) is TargetStatus.REFUSED and content == target.refused_score:
            # Refused exactly this: tried again when it changes.
            return Outcome(TargetStatus.REFUSED, requested=False)
        for url in (lineitem,) if lineitem is not None else (target.lineitems_url,):
            why = foreign_reason(url or "", registration)
            if why is not None:
                return Outcome(TargetStatus.FOREIGN, reason=why)
        if registration.id in work.token_failures:
            return work.token_failures[registration.id]
        try:
            return self._deliver(registration, target, content, work)
        except _TokenFailed as failure:
            work.token_failures[registration.id] = failure.outcome
            return failure.outcome

    def _deliver(
        self, registration: Registration, target: Any, content: dict[str, Any], work: _Round
    ) -> Outcome:
        source = LineitemSource(target.lineitem_source) if target.lineitem_source else None
        lineitem = target.lineitem_url
        note = None
        if lineitem is None:
            found = self._link_lineitem(registration, target, LineitemSource.CREATED, None, work)
            if isinstance(found, Outcome):
                return found
            lineitem, source = found, LineitemSource.CREATED
        score = self._score(target.learner_id, work)
        timestamp = next_timestamp(score.timestamp, target.sent_timestamp)
        self._stamp(target, timestamp)
        outcome = self._post_score(registration, lineitem, content, timestamp, work)
        if (
            outcome.status is TargetStatus.GONE
            and source is LineitemSource.CREATED
            and target.lineitems_url is not None
        ):
            # Deleted in the gradebook: made again once (or another learner's send did).
            logger.warning("line item %s of learner %s was deleted", lineitem, target.learner_id)
            again = self._link_lineitem(
                registration, target, LineitemSource.RECREATED, lineitem, work
            )
            if isinstance(again, Outcome):
                return again
            note = grade_doctor.LINEITEM_RECREATED
            outcome = self._post_score(registration, again, content, timestamp, work)
        if note is not None and outcome.status is TargetStatus.SENT:
            return Outcome(
                TargetStatus.SENT,
                answer_status=outcome.answer_status,
                reason=note,
                sent=outcome.sent,
            )
        return outcome

    def _post_score(
        self,
        registration: Registration,
        lineitem: str,
        content: dict[str, Any],
        timestamp: datetime,
        work: _Round,
    ) -> Outcome:
        answer = self._request(
            registration,
            scores_url(lineitem),
            stamped(content, timestamp),
            SCORE_MEDIA_TYPE,
            work,
        )
        if isinstance(answer, Outcome):
            return answer
        failed = _outcome_of(answer, "the line item", content, grade_doctor.SCORE_REFUSED)
        if failed is not None and not holds_it_already(answer):
            return failed
        return Outcome(TargetStatus.SENT, answer_status=answer.status, sent=(content, timestamp))

    def _link_lineitem(
        self,
        registration: Registration,
        target: Any,
        source: LineitemSource,
        replacing: str | None,
        work: _Round,
    ) -> str | Outcome:
        """The resource link's one line item (lti_link_lineitems), or why not: another send's,
        else one the container holds for the link (AGS 2.0, 3.2), else a new one. `replacing`:
        the one the platform says is gone."""
        now = self.clock()
        claimed = self._claim_link(registration, target.target_key, replacing, now)
        if isinstance(claimed, str):
            return self._keep_lineitem(registration, target, claimed, source)
        if not claimed:
            return Outcome(TargetStatus.DUE, reason=grade_doctor.LINEITEM_BEING_MADE)
        found: str | Outcome | None = None
        try:
            found = self._find_or_create(registration, target, replacing, work)
        finally:
            # However the send ends (a refused token, a store error), the claim ends with it.
            self._release_link(target.target_key, found, now)
        if isinstance(found, Outcome):
            return found
        return self._keep_lineitem(registration, target, found, source)

    def _find_or_create(
        self, registration: Registration, target: Any, replacing: str | None, work: _Round
    ) -> str | Outcome:
        found = self._find_lineitem(registration, target, replacing, work)
        if found is None:
            return self._create_lineitem(registration, target, work)
        return found

    def _release_link(self, link_key: str, found: str | Outcome | None, now: datetime) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                update(LtiLinkLineitem)
                .where(LtiLinkLineitem.link_key == link_key)
                .values(
                    lineitem_url=found if isinstance(found, str) else None,
                    claimed_until=None,
                    updated_at=now,
                )
            )

    def _claim_link(
        self, registration: Registration, link_key: str, replacing: str | None, now: datetime
    ) -> str | bool:
        """The link's line item when one is known (and is not `replacing`); otherwise True
        when this sender now holds the link's claim, False when another one does."""
        lease = now + timedelta(seconds=CLAIM_LEASE_S)
        mine = LtiLinkLineitem.link_key == link_key
        try:
            with self.engine.begin() as connection:
                row = connection.execute(
                    select(LtiLinkLineitem.lineitem_url, LtiLinkLineitem.claimed_until).where(mine)
                ).first()
                if row is None:
                    connection.execute(
                        insert(LtiLinkLineitem).values(
                            link_key=link_key,
                            registration_id=registration.id,
                            lineitem_url=None,
                            claimed_until=lease,
                            updated_at=now,
                        )
                    )
                    return True
                if row.lineitem_url is not None and row.lineitem_url != replacing:
                    return str(row.lineitem_url)
                same = (
                    LtiLinkLineitem.lineitem_url.is_(None)
                    if row.lineitem_url is None
                    else LtiLinkLineitem.lineitem_url == row.lineitem_url
                )
                free = LtiLinkLineitem.claimed_until.is_(None) | (
                    LtiLinkLineitem.claimed_until < now
                )
                taken = connection.execute(
                    update(LtiLinkLineitem)
                    .where(mine, same, free)
                    .values(lineitem_url=None, claimed_until=lease, updated_at=now)
                ).rowcount
                return bool(taken)
        except IntegrityError:
            return False  # another sender inserted the claim first

    def _find_lineitem(
        self, registration: Registration, target: Any, replacing: str | None, work: _Round
    ) -> str | Outcome | None:
        """None: none there, or a platform that cannot say (then one is created)."""
        url = with_query(target.lineitems_url, RESOURCE_LINK_PARAMETER, target.resource_link_id)
        answer = self._request(registration, url, None, LINEITEM_CONTAINER_MEDIA_TYPE, work)
        if isinstance(answer, Outcome):
            return answer
        if answer.status >= 500 or answer.status in OUTAGE_STATUSES:
            return outage("the platform's grade service", answer)
        if answer.status != 200:
            return None
        try:
            listed = parsed(answer.body)
        except NotPlatformJson:
            return None
        if not isinstance(listed, list):
            return None
        for item in listed:
            if not isinstance(item, dict) or item.get("resourceLinkId") != target.resource_link_id:
                continue
            try:
                found = _lineitem_id(Answer(answer.status, json.dumps(item).encode(), ""))
            except Unusable:
                continue
            if found != replacing:
                return found
        return None

    def _create_lineitem(
        self, registration: Registration, target: Any, work: _Round
    ) -> str | Outcome:
        body = lineitem_body(self.lesson, target.resource_link_id)
        content = self._score(target.learner_id, work).content(target.user_id)
        answer = self._request(registration, target.lineitems_url, body, LINEITEM_MEDIA_TYPE, work)
        if isinstance(answer, Outcome):
            return answer
        failed = _outcome_of(answer, "the line items container", content, grade_doctor.NO_LINEITEM)
        if failed is not None:
            return failed
        try:
            return _lineitem_id(answer)
        except Unusable as unusable:
            return Outcome(
                TargetStatus.REFUSED,
                answer_status=unusable.status,
                answer=answer.words or None,
                reason=grade_doctor.unusable_lineitem(unusable.why),
                refused_score=content,
            )

    def _keep_lineitem(
        self, registration: Registration, target: Any, lineitem: str, source: LineitemSource
    ) -> str | Outcome:
        with self.engine.begin() as connection:
            connection.execute(
                update(LtiGradeTarget)
                .where(*_the_target(target))
                .values(lineitem_url=lineitem, lineitem_source=source, sent_score=None)
            )
        why = foreign_reason(lineitem, registration)
        if why is not None:
            return Outcome(TargetStatus.FOREIGN, reason=why)
        return lineitem

    def _request(
        self,
        registration: Registration,
        url: str,
        body: dict[str, Any] | None,
        media_type: str,
        work: _Round,
    ) -> Answer | Outcome:
        """POST `body` (GET when None); on 401 or 403 once more with a new token, unless it is
        this round's. An Outcome when no answer came."""
        origin = origin_of(url) or url
        if origin in work.silent:
            return work.silent[origin]
        token = self._token(registration, work)
        try:
            answer = self._post(url, body, media_type, token.value)
            if answer.status in AUTH_STATUSES and token.round != work.number:
                self._tokens.pop(registration.id, None)
                answer = self._post(url, body, media_type, self._token(registration, work).value)
        except NoAnswer as error:
            work.silent[origin] = outage("the platform's grade service", None, str(error))
            return work.silent[origin]
        except httpx.InvalidURL:
            return Outcome(
                TargetStatus.REFUSED,
                reason=grade_doctor.not_a_url(url),
            )
        return answer

    def _post(self, url: str, body: dict[str, Any] | None, media_type: str, token: str) -> Answer:
        if body is None:
            return self._exchange(
                url,
                method="GET",
                headers={"Authorization": f"Bearer {token}", "Accept": media_type},
            )
        return self._exchange(
            url,
            json_body=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": media_type},
        )

    def _exchange(
        self,
        url: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        method: str = "POST",
    ) -> Answer:
        started = time.monotonic()

        def in_time() -> None:
            if time.monotonic() - started > PASSBACK_TIMEOUT_S:
                raise NoAnswer(f"no whole answer within {PASSBACK_TIMEOUT_S:g} s")

        try:
            with self.client.stream(
                method, url, json=json_body, data=form, headers=headers
            ) as response:
                try:
                    data = read_body(response, MAX_ANSWER_BYTES, in_time)
                except AnswerTooLarge:
                    return Answer(
                        response.status_code,
                        b"",
                        f"an answer over {MAX_ANSWER_BYTES // 1024} KiB, not read",
                    )
        except httpx.HTTPError as error:
            raise NoAnswer(type(error).__name__) from None
        status = response.status_code
        if 300 <= status < 400:
            words = "redirect to " + platform_words(response.headers.get("location", "").encode())
        else:
            words = "" if 200 <= status < 300 else platform_words(data)
        return Answer(status, data, words)

    def _token(self, registration: Registration, work: _Round) -> _Token:
        kept = self._tokens.get(registration.id)
        if kept is not None and kept.expires_at > time.monotonic():
            return kept
        what = f"the platform's token endpoint {registration.token_url}"
        try:
            answer = self._exchange(
                registration.token_url,
                form=token_form(self.engine, registration, (SCORE_SCOPE, LINEITEM_SCOPE)),
            )
        except NoAnswer as error:
            raise _TokenFailed(outage(what, None, str(error))) from None
        except httpx.InvalidURL:
            raise _TokenFailed(outage(what, None, "not a URL")) from None
        if answer.status != 200 and is_error_page(answer.body):
            # OAuth 2 errors are JSON; a page is an uncaught exception, as Moodle's when its HTTP
            # security stops it fetching the tool's keys.
            reason = (
                f"{grade_doctor.error_page_for_token(answer.status, registration.issuer)}. D9 "
                f"tries again, at least every {MAX_RETRY_S / 60:g} minutes"
            )
            raise _TokenFailed(Outcome(TargetStatus.FAILING, answer.status, None, reason))
        if answer.status >= 500 or answer.status in OUTAGE_STATUSES:
            raise _TokenFailed(outage(what, answer))
        if answer.status != 200:
            reason = grade_doctor.token_refused(
                _said(answer), registration.issuer, MAX_RETRY_S / 60
            )
            raise _TokenFailed(_answered(TargetStatus.FAILING, answer, reason))
        try:
            granted = parsed(answer.body)
            value = granted["access_token"]
            lifetime = float(granted.get("expires_in", 3600))
        except (NotPlatformJson, ValueError, KeyError, TypeError, AttributeError, OverflowError):
            value, lifetime = None, 0.0
        if not isinstance(value, str):
            raise _TokenFailed(
                Outcome(
                    TargetStatus.FAILING,
                    answer_status=answer.status,
                    answer=answer.words or None,
                    reason=grade_doctor.no_token(what, registration.issuer, MAX_RETRY_S / 60),
                )
            )
        token = _Token(value, time.monotonic() + lifetime - TOKEN_MARGIN_S, work.number)
        self._tokens[registration.id] = token
        return token


class _TokenFailed(Exception):
    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


def _lineitem_id(answer: Answer) -> str:
    try:
        created = parsed(answer.body)["id"]
    except (NotPlatformJson, KeyError, TypeError):
        raise Unusable(answer.status, "named no id") from None
    # Kept in lineitem_url: a URL that fits the column, with no character it cannot hold.
    if not isinstance(created, str) or not created.isprintable():
        raise Unusable(answer.status, "its id is not a URL")
    problem = url_problem(created)
    if problem is not None:
        raise Unusable(answer.status, f"its id is not usable: {problem}")
    return created


def lineitem_declaration(lesson: Lesson) -> dict[str, Any]:
    """The line item the tool asks for, in deep linking and through the grade service."""
    return {
        "label": f"{lesson.id.upper()} {lesson.title}",
        "scoreMaximum": parts_total(lesson),
        "submissionReview": {"reviewableStatus": list(REVIEWABLE_STATUS)},
    }


def lineitem_body(lesson: Lesson, resource_link_id: str) -> dict[str, Any]:
    """The line item this tool creates for a resource link (AGS 2.0, 3.2)."""
    return {**lineitem_declaration(lesson), "resourceLinkId": resource_link_id}


def with_query(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    added = urlencode({name: value})
    query = f"{parts.query}&{added}" if parts.query else added
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def scores_url(lineitem_url: str) -> str:
    """Path + /scores, query kept (AGS 2.0, 3.4)."""
    parts = urlsplit(lineitem_url)
    return urlunsplit(
        (parts.scheme, parts.netloc, parts.path.rstrip("/") + "/scores", parts.query, "")
    )


def _the_target(target: Any) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """The where-clause of one grade target's row."""
    return (
        LtiGradeTarget.learner_id == target.learner_id,
        LtiGradeTarget.target_key == target.target_key,
    )


class Round(Protocol):
    sent: int
    failed: int
    tried: int


class Worker(Protocol):
    """An outbox's sender, as `run` drives it: this module's, or xAPI's."""

    # Rows a round takes at most, how long to wait after a round that was not full, and how
    # the log names the outbox.
    round_size: int
    poll_s: float
    what: str

    def send_due(self) -> Round: ...


def run(sender: Worker, *, once: bool = False) -> None:
    """Rounds until stopped, or one with `once`."""
    while True:
        report = sender.send_due()
        if report.sent or report.failed:
            logger.info("%s: %d sent, %d not", sender.what, report.sent, report.failed)
        if once:
            return
        if report.tried < sender.round_size:
            time.sleep(sender.poll_s)


@dataclass(frozen=True)
class ResendReport:
    """What `resend_changed` did for one course's targets."""

    queued: int
    up_to_date: int
    # Gone or foreign.
    unsendable: int


def _stale(status: TargetStatus, sent_score: Any, content: dict[str, Any]) -> bool:
    return status is not TargetStatus.SENT or sent_score != content


def resend_changed(
    engine: Engine,
    context_key: str,
    lesson: Lesson,
    recording_path: Path,
    clock: Callable[[], datetime] = system_clock,
) -> ResendReport:
    """Make due every target of the course's learners whose platform copy may be stale, what
    was refused forgotten. A learner's targets in other courses go too when stale."""
    store = Store(engine)
    with engine.connect() as connection:
        learners = course_learners(context_key).scalar_subquery()
        rows = connection.execute(
            select(
                LtiGradeTarget.learner_id,
                LtiGradeTarget.target_key,
                LtiGradeTarget.user_id,
                LtiGradeTarget.status,
                LtiGradeTarget.sent_score,
            ).where(LtiGradeTarget.learner_id.in_(learners))
        ).all()
    scores: dict[str, Score] = {}
    queued = up_to_date = unsendable = 0
    now = clock()
    for row in rows:
        status = TargetStatus(row.status)
        if status in (TargetStatus.GONE, TargetStatus.FOREIGN):
            unsendable += 1
            continue
        if row.learner_id not in scores:
            events = store.events_for(row.learner_id)
            scores[row.learner_id] = gate_score(events, lesson, recording_path)
        content = scores[row.learner_id].content(row.user_id)
        if not _stale(status, row.sent_score, content):
            up_to_date += 1
            continue
        with engine.begin() as connection:
            connection.execute(
                update(LtiGradeTarget)
                .where(
                    LtiGradeTarget.learner_id == row.learner_id,
                    LtiGradeTarget.target_key == row.target_key,
                )
                .values(due_at=now, attempts=0, refused_score=None)
            )
        queued += 1
    return ResendReport(queued=queued, up_to_date=up_to_date, unsendable=unsendable)
