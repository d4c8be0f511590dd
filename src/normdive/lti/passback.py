"""Grade passback (LTI Assignment and Grade Services 2.0): each grade target on its own.

What goes back is the gate's progress as a score: the parts done out of the gate's parts
(the six numbers, the reading, the four row predictions, the best row played; 12 with the
shipped lesson). Once the gate closes the score is full and final (a closed gate stays closed
whatever recording is served later), with activityProgress Completed and gradingProgress
FullyGraded; before, InProgress and Pending.

Where it goes: a launch offering the score scope records a grade target (lti_grade_targets),
one per (learner, resource link): the launch's line item, or, when it names only the line
items container, the resource link's one line item there, shared by the link's learners
(lti_link_lineitems): the first send claims the link's row (unique, so two learners' first
sends at once make one), asks the container for a line item of the link (AGS 2.0, 3.2: GET
filtered by resource_link_id), and creates one only when there is none (label, scoreMaximum,
resourceLinkId, and submissionReview: Submission Review 1.0, lti.submission_review). A target
whose link is being claimed by another send waits LINK_WAIT_S.
A line item that a launch names is never changed, though the lineitem scope would let the
tool PUT submissionReview on it: a PUT replaces the whole line item (AGS 2.0, 3.2), so the
tool would write back the label, maximum and dates it read, over an instructor's edit made
meanwhile in the gradebook; the platform that made the column chose what its gradebook
offers; and the review is declared where Submission Review 1.0 lets a tool declare it for the
line items of its links: the deep linking response's line item and the registration's
messages (lti.submission_review).
A bearer token goes only to a URL on one of the registration's origins (platform_origins: its
issuer, its three endpoints and its --frame-origin hosts); a line item elsewhere is `foreign`
and never sent to.

How, in two steps per round of `normdive lti passback`:
1. Fan-out. A write that may change the gate puts the learner in lti_score_outbox in the same
   transaction (a trigger on events; migration 0005). The worker turns each such row into
   "due now" on the learner's targets that may take a new score (sent, refused, foreign, not
   tried yet), bumps each target's score_version, and deletes the row. A failing target keeps
   its backoff (a learner's writes must not hammer a platform that is down), and a gone one
   stays gone.
2. Send. Each due target is claimed (one UPDATE, so several workers may run), sent, and its
   outcome written on it alone, so one target's failure never delays another's, the same
   learner's or anyone's. The score is derived from the learner's whole history at send time
   (the latest; its parts only grow), skipped when the platform has it already (or refused
   exactly it), stamped with the time of the learner's latest event but always later than the
   last one sent there, kept before the request so that a send cut short is never stamped
   the same again (the platform keeps the score with the latest timestamp; a strict one
   refuses a repeated timestamp, and its "already exists" means it took that score), and posted
   with an access token from OAuth 2 client credentials and a client assertion JWT signed
   with the tool's key (RFC 7523; tool_keys).

What the platform answers decides the target's state (TargetStatus; `normdive lti outbox`
shows it with the reason in words for the platform's administrator; every reason is
lti.grade_doctor's sentence, which also says what to do, and `resend_changed` queues again
the targets of a course whose platform copy may be stale):
- 2xx: sent.
- 404 or 410 on a line item: it was deleted in the gradebook. A line item this tool created is
  created again, once, and the score sent there; one the launch named is `gone` until a launch
  names a line item again.
- 401 or 403: a new token is fetched and the request made once more (once per registration
  and round); refused again, it is `refused` with the platform's words.
- Any other 3xx or 4xx (400 and 422 above all: Moodle answers 400 "Incorrect score received"
  for a user who cannot be graded): `refused`; tried again only with a changed score.
- 5xx, 408, 425, 429, a timeout, a refused connection: an outage, `failing`, tried again after
  FIRST_RETRY_S doubling up to MAX_RETRY_S. A token endpoint that fails fails every target of
  its registration in that round with one request.
Answers are read up to MAX_ANSWER_BYTES as they arrive, within PASSBACK_TIMEOUT_S; a crash loses
nothing, as each state is in the database before and after each request.
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
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from sqlalchemy import Connection, Engine, delete, func, insert, select, update
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
# What a learner's state may be reviewed in (Submission Review 1.0, 3.1: the line item's
# submissionReview.reviewableStatus, from the score's activityProgress values): the tool's
# launch URL is the review URL (the resource link's target), so the line item names none.
REVIEWABLE_STATUS = ("InProgress", "Submitted", "Completed")
# How long one request to a platform may take, in seconds, its whole answer included.
PASSBACK_TIMEOUT_S = 10.0
# A token or a new line item is a few hundred bytes; an error page a few KiB.
MAX_ANSWER_BYTES = 64 * 1024
# How much of a platform's words a target keeps and shows.
ANSWER_EXCERPT_CHARS = 200
# A failing target waits this long, doubling with each outage answer in a row, up to
# MAX_RETRY_S: a platform back from an outage gets every score within five minutes.
FIRST_RETRY_S = 5.0
MAX_RETRY_S = 300.0
# An access token is used until this long before the platform says it expires.
TOKEN_MARGIN_S = 30
# The most requests one target's send makes: a token, a line item, the score, a new token and
# the score again, a line item again and the score there.
REQUESTS_PER_SEND = 7
# How long a worker holds a target while it sends it; a worker that dies holding it leaves it
# due again after this.
CLAIM_LEASE_S = REQUESTS_PER_SEND * PASSBACK_TIMEOUT_S
# Targets sent, and learners fanned out, in one round of `normdive lti passback`.
ROUND_SIZE = 50
# How much later than the last score sent a new score is stamped, at the least.
SCORE_TIMESTAMP_STEP = timedelta(milliseconds=1)
# How often the passback worker looks for due scores, in seconds.
POLL_INTERVAL_S = 2.0
# How long a target waits while another sender makes its link's line item, in seconds.
LINK_WAIT_S = FIRST_RETRY_S

# Answers that say the platform is down or busy for now (RFC 9110: 408 Request Timeout, 425
# Too Early, 429 Too Many Requests; every 5xx).
OUTAGE_STATUSES = frozenset({408, 425, 429})
GONE_STATUSES = frozenset({404, 410})
AUTH_STATUSES = frozenset({401, 403})


# The targets a write may make due now: the failing keep their backoff, the gone stay gone.
FANNED_OUT = (TargetStatus.DUE, TargetStatus.SENT, TargetStatus.REFUSED, TargetStatus.FOREIGN)


class LineitemSource(StrEnum):
    """Who made a target's line item URL (None in the column: the launch named it)."""

    # This tool, in the launch's line items container.
    CREATED = "created"
    # This tool again, after the one it created was deleted: not created a third time.
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
    """The new score's timestamp: its latest event's time, but always after the last score
    sent to the same line item (events may share a second, and a platform keeps only a score
    stamped later than the one it has; AGS 2.0, 3.4.5)."""
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
    """The origins a bearer token for this registration may go to: its issuer's, its three
    endpoints' and its frame origins (the hosts its courses are on: Canvas serves its grade
    services on the school's host, https://school.instructure.com, while its issuer and token
    endpoint are canvas.instructure.com and sso.canvaslms.com)."""
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
    """Why a token must not go to `url`, or None when it is on one of the registration's
    origins."""
    allowed = platform_origins(registration)
    if origin_of(url) in allowed:
        return None
    return grade_doctor.foreign(origin_of(url) or repr(url), registration.issuer, allowed)


def link_key(launch: Launch) -> str:
    """The resource link's key: SHA-256 of (issuer, client id, deployment id, resource link
    id), the grade targets' target_key and the learner links' link_key."""
    registration = launch.registration
    parts = (
        registration.issuer,
        registration.client_id,
        launch.deployment_id,
        launch.resource_link_id,
    )
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def record_grade_target(connection: Connection, launch: Launch, learner_id: str) -> bool:
    """Remember where this launch's scores go, when it offers the score scope (in the
    launch's transaction). True when it does. A launch that names a line item makes a gone
    target due again (the platform's gradebook has a line item for the link again)."""
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
            # A line item of the platform's own: what was sent or refused went elsewhere.
            values.update(
                lineitem_url=lineitem, lineitem_source=None, sent_score=None, refused_score=None
            )
        if isinstance(lineitem, str) and kept.status == TargetStatus.GONE:
            values.update(status=TargetStatus.DUE, due_at=now, attempts=0)
        connection.execute(update(LtiGradeTarget).where(*where).values(**values))
    # A launch sends the score as it stands (a first launch: nothing done yet).
    enqueue(connection, learner_id)
    return True


def forget_grade_target(connection: Connection, launch: Launch, learner_id: str) -> None:
    """Drop the user's grade target for this launch's link, in the launch's transaction: a
    launch whose roles make them no learner of the course (lti.roles) is never graded there,
    and what was refused for them is nothing the instructor must fix."""
    connection.execute(
        delete(LtiGradeTarget).where(
            LtiGradeTarget.learner_id == learner_id,
            LtiGradeTarget.target_key == link_key(launch),
        )
    )


def enqueue(connection: Connection, learner_id: str) -> None:
    """Put the learner in the outbox now (as the trigger on events does)."""
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
        """Something to send: due now or later, or never taken yet."""
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
    """Every grade target, those needing attention first, then those waiting, soonest first
    (`normdive lti outbox`)."""
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


# The start of an HTML page, as a platform's error page begins.
HTML_PAGE = re.compile(rb"\s*<(!doctype|html)", re.IGNORECASE)


def is_error_page(body: bytes) -> bool:
    return HTML_PAGE.match(body) is not None


def platform_words(body: bytes) -> str:
    """The start of what a platform said, as one line of printable text: an OAuth 2 or JSON
    error's message where it gave one, an HTML page's text, or the body as it is."""
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
    """Whether a refusal of a score says the platform holds a score with its timestamp (Open
    edX: "Score already exists for the provided timestamp"): a timestamp is never put on two
    different scores (next_timestamp), so it holds this one."""
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
    """The outcome of a request the platform answered with `answer`, as `reason` reads it."""
    return Outcome(
        status,
        answer_status=answer.status,
        answer=answer.words,
        reason=reason,
        refused_score=refused_score,
    )


def _outcome_of(answer: Answer, what: str, content: dict[str, Any], refusal: str) -> Outcome | None:
    """What a non-2xx answer to a request about `what` means (`refusal`: what a 4xx answer
    means; what to check), or None for 2xx."""
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
    # Scores a platform took.
    sent: int = 0
    # Targets tried that did not take one (failing, refused, gone, foreign).
    failed: int = 0
    # Targets claimed (sent, failed, or found to have their score already).
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
    # A registration whose token endpoint failed this round: that outcome, for its targets.
    token_failures: dict[int, Outcome] = field(default_factory=dict)
    # An origin that gave no answer this round (each try may cost PASSBACK_TIMEOUT_S): that
    # outcome, for the other targets there, so that one platform's silence does not hold
    # back every other platform's targets behind it.
    silent: dict[str, Outcome] = field(default_factory=dict)


class Sender:
    """Sends the due grade targets; keeps access tokens between rounds. `clock` gives the
    time targets are due by (the tests move it instead of waiting)."""

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
        """Make the targets of learners in the outbox due (FANNED_OUT), bump their
        score_version, and delete each row as it was read. The learners fanned out."""
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
        """Take the target for CLAIM_LEASE_S (one UPDATE, so two workers never both take
        it), and read it as taken."""
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
        """Write a try's outcome on its target. A write to the learner's score since the
        claim (score_version moved) leaves it due now, whatever this try sent."""
        now = self.clock()
        mine = (
            LtiGradeTarget.learner_id == target.learner_id,
            LtiGradeTarget.target_key == target.target_key,
        )
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
        """Keep the timestamp a score is about to be sent with, before it is sent: a send whose
        answer never came (a crash, a lost connection) is followed by one stamped later, which
        a platform refusing a repeated timestamp takes."""
        with self.engine.begin() as connection:
            connection.execute(
                update(LtiGradeTarget)
                .where(
                    LtiGradeTarget.learner_id == target.learner_id,
                    LtiGradeTarget.target_key == target.target_key,
                )
                .values(sent_timestamp=timestamp)
            )

    def _score(self, learner_id: str, work: _Round) -> Score:
        if learner_id not in work.scores:
            events = self.store.events_for(learner_id)
            work.scores[learner_id] = gate_score(events, self.lesson, self.recording_path)
        return work.scores[learner_id]

    def _send_target(self, target: Any, work: _Round) -> Outcome | None:
        """Send one target its latest score; None when there was nothing to send."""
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
            # Deleted in the gradebook, and this tool made it: make it again, once (or take the
            # one another learner's send made again).
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
        """The resource link's line item, kept on the target (with sent scores forgotten: it
        has none of this learner's yet), or why not. One per link (lti_link_lineitems): the
        one another learner's send made, else, under the link's claim, one the container
        holds for the link (AGS 2.0, 3.2: GET filtered by resource_link_id), else a new one.
        `replacing`: the link's line item the platform says is gone."""
        now = self.clock()
        claimed = self._claim_link(registration, target.target_key, replacing, now)
        if isinstance(claimed, str):
            return self._keep_lineitem(registration, target, claimed, source)
        if not claimed:
            # Another sender holds the claim: this target is tried again once it has made it.
            return Outcome(TargetStatus.DUE, reason=grade_doctor.LINEITEM_BEING_MADE)
        found: str | Outcome | None = None
        try:
            found = self._find_or_create(registration, target, replacing, work)
        finally:
            # However the send ends (a refused token, a store error), the claim ends with it:
            # the line item found or made, or none for the next send to claim again.
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
        """End this sender's claim on the link, with the line item it found or made (or
        none: the next send claims it again)."""
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
        """A line item the container already holds for the link (not `replacing`), an
        outage, or None (none there, or a platform that cannot say: then one is created)."""
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
        """A new line item in the target's container for its resource link, or why not."""
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
                .where(
                    LtiGradeTarget.learner_id == target.learner_id,
                    LtiGradeTarget.target_key == target.target_key,
                )
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
        """POST `body` (GET when None) with the registration's token; on 401 or 403 once more
        with a new token (unless the token is this round's already). An Outcome when no
        answer came."""
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
        """POST `body` as `media_type`; with no body, GET what answers as `media_type`."""
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
        """One request and its answer, read up to MAX_ANSWER_BYTES within
        PASSBACK_TIMEOUT_S."""
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
            # A token endpoint answers OAuth 2 errors in JSON; a page is an exception it did not
            # catch, as Moodle's is when its HTTP security stops it fetching the tool's keys.
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
    """No token from a registration's endpoint: the outcome for each of its targets."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


def _lineitem_id(answer: Answer) -> str:
    """The new line item's id (its URL) from the platform's answer, or Unusable."""
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
    """The line item the tool asks a platform for, wherever it asks: a label, the gate's parts
    as scoreMaximum, and submissionReview (Submission Review 1.0, 3.1: the gradebook may open a
    learner's work in D9 in any of REVIEWABLE_STATUS, at the resource link's own launch URL).
    Deep linking's lineItem (lti.deep_linking) is this; the line item made through the line
    items service (lineitem_body) is this with its resource link."""
    return {
        "label": f"{lesson.id.upper()} {lesson.title}",
        "scoreMaximum": parts_total(lesson),
        "submissionReview": {"reviewableStatus": list(REVIEWABLE_STATUS)},
    }


def lineitem_body(lesson: Lesson, resource_link_id: str) -> dict[str, Any]:
    """The line item this tool creates for a resource link (AGS 2.0, 3.2)."""
    return {**lineitem_declaration(lesson), "resourceLinkId": resource_link_id}


def with_query(url: str, name: str, value: str) -> str:
    """`url` with name=value added to its query (what it had kept)."""
    parts = urlsplit(url)
    added = urlencode({name: value})
    query = f"{parts.query}&{added}" if parts.query else added
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def scores_url(lineitem_url: str) -> str:
    """The line item's scores endpoint: its path + /scores, its query kept (AGS 2.0, 3.4)."""
    parts = urlsplit(lineitem_url)
    return urlunsplit(
        (parts.scheme, parts.netloc, parts.path.rstrip("/") + "/scores", parts.query, "")
    )


def outbox_size(engine: Engine) -> int:
    """Grade targets with something to send (due now or later)."""
    with engine.connect() as connection:
        return int(
            connection.execute(
                select(func.count())
                .select_from(LtiGradeTarget)
                .where(LtiGradeTarget.due_at.is_not(None))
            ).scalar_one()
        )


def run(sender: Sender, *, once: bool = False, poll_s: float = POLL_INTERVAL_S) -> None:
    """Send due scores round after round (until stopped), or one round with `once`."""
    while True:
        report = sender.send_due()
        if report.sent or report.failed:
            logger.info("score passback: %d sent, %d not", report.sent, report.failed)
        if once:
            return
        if report.tried < ROUND_SIZE:
            time.sleep(poll_s)


@dataclass(frozen=True)
class ResendReport:
    """What `resend_changed` did for one course's targets."""

    # Targets whose platform copy may be stale, now due.
    queued: int
    # Targets the platform took the latest score for: left alone.
    up_to_date: int
    # Targets nothing can be sent to (the line item gone, or on a foreign host).
    unsendable: int


def _stale(status: TargetStatus, sent_score: Any, content: dict[str, Any]) -> bool:
    """Whether a target's platform copy may differ from the learner's latest score: its last
    answer was not a success, or what it took is not this score."""
    return status is not TargetStatus.SENT or sent_score != content


def resend_changed(
    engine: Engine,
    context_key: str,
    lesson: Lesson,
    recording_path: Path,
    clock: Callable[[], datetime] = system_clock,
) -> ResendReport:
    """Make due now every grade target of the course's learners (lti_context_members) whose
    platform copy may be stale (`_stale`), with what the platform refused forgotten, so that the
    next round sends each its latest score once: after an enrolment was fixed or a course
    published. Targets up to date are left alone; gone and foreign ones are counted, not sent
    (nothing can go there until a launch names a line item, or the host is registered). A
    learner's targets on the same platform in another course are theirs too, and go when stale."""
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
