"""Grade passback (LTI Assignment and Grade Services 2.0) through the score outbox.

What goes back is the gate's progress as a score: the parts done out of the gate's parts
(the six numbers, the reading, the four row predictions, the best row played; 12 with the
shipped lesson). Once the gate closes the score is full and final (a closed gate stays closed
whatever recording is served later), with activityProgress Completed and gradingProgress
FullyGraded; before, InProgress and Pending.

Where it goes: a launch offering the score scope records a grade target (lti_grade_targets):
the launch's line item, or, when it names only the line items container, one this tool
creates there (label and scoreMaximum) the first time it sends.

How: a write that may change the gate puts the learner in the outbox in the same
transaction (a trigger on events; migration 0005). `normdive lti passback` sends what is due:
it derives the score from the learner's whole history at send time (so it always sends the
latest, and a score never goes backwards: its parts only grow), skips a score the platform
has already, stamps a new one with the time of the learner's latest event, but always later
than the last one sent there (the platform keeps the score with the latest timestamp), gets an
access token with OAuth 2 client credentials and a client assertion JWT signed with the
tool's key (RFC 7523; tool_keys), and posts it. A learner leaves the outbox only once every
target took the score and no write came meanwhile (the row's version); a worker claims a row
before sending (so several workers may run); a failure waits,
doubling from FIRST_RETRY_S to MAX_RETRY_S, and a crash loses nothing: the row is still there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from joserfc import jwt
from sqlalchemy import Connection, Engine, delete, func, insert, select, update

from normdive.lesson.content import Lesson
from normdive.lti import registrations, tool_keys
from normdive.lti.launch import Launch
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.lti.registrations import Registration, url_problem
from normdive.progress.events import Event
from normdive.progress.facts import recording_facts_at
from normdive.progress.state import derive
from normdive.store.event_store import Store, as_utc
from normdive.store.tables import LtiGradeTarget, LtiScoreOutbox

logger = logging.getLogger(__name__)

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
# How long one request to a platform may take, in seconds.
PASSBACK_TIMEOUT_S = 10.0
# A failed send waits this long, doubling with each failure, up to MAX_RETRY_S.
FIRST_RETRY_S = 5.0
MAX_RETRY_S = 3600.0
# A client assertion is good for this long (RFC 7523 asks for a short life).
ASSERTION_LIFETIME_S = 300
# An access token is used until this long before the platform says it expires.
TOKEN_MARGIN_S = 30
# How long a worker holds a learner's row while it sends: beyond the few requests one send
# makes (each at most PASSBACK_TIMEOUT_S).
CLAIM_LEASE_S = 60.0
# Learners sent in one round of `normdive lti passback`.
ROUND_SIZE = 50
# How much later than the last score sent a new score is stamped, at the least.
SCORE_TIMESTAMP_STEP = timedelta(milliseconds=1)
# How often the passback worker looks for due scores, in seconds.
POLL_INTERVAL_S = 2.0


class PassbackFailed(Exception):
    """A platform did not take a score (or a token, or a line item): why, in one line."""


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


def _target_key(launch: Launch) -> str:
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
    launch's transaction). True when it does."""
    endpoint = launch.ags_endpoint or {}
    scopes = endpoint.get("scope")
    lineitem = endpoint.get("lineitem")
    lineitems = endpoint.get("lineitems")
    if not isinstance(scopes, list) or SCORE_SCOPE not in scopes:
        return False
    if not isinstance(lineitem, str) and not isinstance(lineitems, str):
        return False
    key = _target_key(launch)
    values = {
        "registration_id": launch.registration.id,
        "user_id": launch.subject,
        "resource_link_id": launch.resource_link_id,
        "lineitems_url": lineitems if isinstance(lineitems, str) else None,
    }
    if isinstance(lineitem, str):
        values["lineitem_url"] = lineitem
    updated = connection.execute(
        update(LtiGradeTarget)
        .where(LtiGradeTarget.learner_id == learner_id, LtiGradeTarget.target_key == key)
        .values(**values)
    ).rowcount
    if not updated:
        connection.execute(
            insert(LtiGradeTarget).values(learner_id=learner_id, target_key=key, **values)
        )
    # A launch sends the score as it stands (a first launch: nothing done yet).
    enqueue(connection, learner_id)
    return True


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


@dataclass(frozen=True)
class Queued:
    learner_id: str
    version: int
    due_at: datetime
    attempts: int
    last_error: str | None


def queue(engine: Engine) -> list[Queued]:
    """The outbox, soonest due first (`normdive lti outbox`)."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(LtiScoreOutbox).order_by(LtiScoreOutbox.due_at, LtiScoreOutbox.learner_id)
        ).all()
    return [
        Queued(row.learner_id, row.version, row.due_at, row.attempts, row.last_error)
        for row in rows
    ]


def retry_delay(attempts: int) -> float:
    """Seconds to wait after the `attempts`-th failure in a row (1, 2, ...)."""
    return float(min(FIRST_RETRY_S * 2 ** max(0, attempts - 1), MAX_RETRY_S))


@dataclass
class RoundReport:
    sent: int = 0
    failed: int = 0


class Sender:
    """Sends the outbox's due scores; keeps access tokens between rounds."""

    def __init__(
        self,
        engine: Engine,
        lesson: Lesson,
        recording_path: Path,
        client: httpx.Client | None = None,
    ) -> None:
        self.engine = engine
        self.store = Store(engine)
        self.lesson = lesson
        self.recording_path = recording_path
        self.client = client or httpx.Client(timeout=PASSBACK_TIMEOUT_S, follow_redirects=False)
        self._tokens: dict[int, tuple[str, float]] = {}

    def send_due(self, limit: int = ROUND_SIZE) -> RoundReport:
        now = datetime.now(UTC)
        with self.engine.connect() as connection:
            due = connection.execute(
                select(LtiScoreOutbox.learner_id, LtiScoreOutbox.version, LtiScoreOutbox.attempts)
                .where(LtiScoreOutbox.due_at <= now)
                .order_by(LtiScoreOutbox.due_at)
                .limit(limit)
            ).all()
        report = RoundReport()
        for learner_id, version, attempts in due:
            if not self._claim(learner_id, version, now):
                continue  # another worker took it first
            try:
                self._send(learner_id)
            except PassbackFailed as failure:
                report.failed += 1
                self._postpone(learner_id, version, attempts + 1, str(failure))
            else:
                report.sent += 1
                with self.engine.begin() as connection:
                    connection.execute(
                        delete(LtiScoreOutbox).where(
                            LtiScoreOutbox.learner_id == learner_id,
                            LtiScoreOutbox.version == version,
                        )
                    )
        return report

    def _claim(self, learner_id: str, version: int, now: datetime) -> bool:
        """Take the learner's row for CLAIM_LEASE_S (one UPDATE, so two workers never both
        take it); a worker that dies holding it leaves it due again after the lease."""
        with self.engine.begin() as connection:
            claimed = connection.execute(
                update(LtiScoreOutbox)
                .where(
                    LtiScoreOutbox.learner_id == learner_id,
                    LtiScoreOutbox.version == version,
                    LtiScoreOutbox.due_at <= now,
                )
                .values(due_at=now + timedelta(seconds=CLAIM_LEASE_S))
            ).rowcount
        return bool(claimed)

    def _postpone(self, learner_id: str, version: int, attempts: int, why: str) -> None:
        logger.warning("score passback for %s failed (try %d): %s", learner_id, attempts, why)
        due = datetime.now(UTC) + timedelta(seconds=retry_delay(attempts))
        with self.engine.begin() as connection:
            connection.execute(
                update(LtiScoreOutbox)
                .where(LtiScoreOutbox.learner_id == learner_id, LtiScoreOutbox.version == version)
                .values(attempts=attempts, due_at=due, last_error=why[:500])
            )

    def _send(self, learner_id: str) -> None:
        score = gate_score(self.store.events_for(learner_id), self.lesson, self.recording_path)
        with self.engine.connect() as connection:
            targets = connection.execute(
                select(LtiGradeTarget).where(LtiGradeTarget.learner_id == learner_id)
            ).all()
        for target in targets:
            registration = registrations.by_id(self.engine, target.registration_id)
            if registration is None:
                continue  # the platform was removed: nowhere to send
            content = score.content(target.user_id)
            if content == target.sent_score:
                continue  # the platform has this score already
            lineitem = target.lineitem_url or self._create_lineitem(registration, target)
            timestamp = next_timestamp(score.timestamp, target.sent_timestamp)
            self._post(
                registration, scores_url(lineitem), stamped(content, timestamp), SCORE_MEDIA_TYPE
            )
            with self.engine.begin() as connection:
                connection.execute(
                    update(LtiGradeTarget)
                    .where(
                        LtiGradeTarget.learner_id == target.learner_id,
                        LtiGradeTarget.target_key == target.target_key,
                    )
                    .values(sent_score=content, sent_timestamp=timestamp)
                )

    def _create_lineitem(self, registration: Registration, target: Any) -> str:
        body = {
            "scoreMaximum": parts_total(self.lesson),
            "label": f"{self.lesson.id.upper()} {self.lesson.title}",
            "resourceLinkId": target.resource_link_id,
        }
        answer = self._post(registration, target.lineitems_url, body, LINEITEM_MEDIA_TYPE)
        try:
            created = parsed(answer.content)["id"]
        except (NotPlatformJson, KeyError, TypeError):
            raise PassbackFailed("the platform created a line item but named no id") from None
        # Kept in lineitem_url: a URL that fits the column, with no character it cannot hold.
        if not isinstance(created, str) or not created.isprintable():
            raise PassbackFailed("the platform's new line item id is not a URL")
        problem = url_problem(created)
        if problem is not None:
            raise PassbackFailed(f"the platform's new line item id is not usable: {problem}")
        with self.engine.begin() as connection:
            connection.execute(
                update(LtiGradeTarget)
                .where(
                    LtiGradeTarget.learner_id == target.learner_id,
                    LtiGradeTarget.target_key == target.target_key,
                )
                .values(lineitem_url=created)
            )
        return created

    def _post(
        self, registration: Registration, url: str, body: dict[str, Any], media_type: str
    ) -> httpx.Response:
        token = self._token(registration)
        try:
            answer = self.client.post(
                url,
                json=body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": media_type},
            )
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise PassbackFailed(f"{url}: {type(error).__name__}") from None
        if answer.status_code == 401:
            self._tokens.pop(registration.id, None)  # expired early: a new one next time
        if not 200 <= answer.status_code < 300:
            raise PassbackFailed(f"{url} answered {answer.status_code}")
        return answer

    def _token(self, registration: Registration) -> str:
        kept = self._tokens.get(registration.id)
        if kept is not None and kept[1] > time.monotonic():
            return kept[0]
        key = tool_keys.signing_key(self.engine)
        now = int(time.time())
        assertion = jwt.encode(
            {"alg": tool_keys.SIGNING_ALGORITHM, "kid": key.kid, "typ": "JWT"},
            {
                "iss": registration.client_id,
                "sub": registration.client_id,
                "aud": registration.token_url,
                "iat": now,
                "exp": now + ASSERTION_LIFETIME_S,
                "jti": secrets.token_urlsafe(16),
            },
            key,
        )
        try:
            answer = self.client.post(
                registration.token_url,
                data={
                    "grant_type": "client_credentials",
                    "client_assertion_type": CLIENT_ASSERTION_TYPE,
                    "client_assertion": assertion,
                    "scope": f"{SCORE_SCOPE} {LINEITEM_SCOPE}",
                },
            )
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise PassbackFailed(f"{registration.token_url}: {type(error).__name__}") from None
        if answer.status_code != 200:
            raise PassbackFailed(f"{registration.token_url} answered {answer.status_code}")
        try:
            granted = parsed(answer.content)
            token = granted["access_token"]
            lifetime = float(granted.get("expires_in", 3600))
        except (NotPlatformJson, ValueError, KeyError, TypeError, OverflowError):
            raise PassbackFailed(f"{registration.token_url} gave no access token") from None
        if not isinstance(token, str):
            raise PassbackFailed(f"{registration.token_url} gave no access token")
        self._tokens[registration.id] = (token, time.monotonic() + lifetime - TOKEN_MARGIN_S)
        return token


def scores_url(lineitem_url: str) -> str:
    """The line item's scores endpoint: its path + /scores, its query kept (AGS 2.0, 3.4)."""
    parts = urlsplit(lineitem_url)
    return urlunsplit(
        (parts.scheme, parts.netloc, parts.path.rstrip("/") + "/scores", parts.query, "")
    )


def outbox_size(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(select(func.count()).select_from(LtiScoreOutbox)).scalar_one()
        )


def run(sender: Sender, *, once: bool = False, poll_s: float = POLL_INTERVAL_S) -> None:
    """Send due scores round after round (until stopped), or one round with `once`."""
    while True:
        report = sender.send_due()
        if report.sent or report.failed:
            logger.info("score passback: %d sent, %d failed", report.sent, report.failed)
        if once:
            return
        if report.sent < ROUND_SIZE:
            time.sleep(poll_s)
