"""Submission Review 1.0: a gradebook opens one learner's D9 in the tool, as they left it.

Staff of the course may review any learner who launched from it, a learner only themselves.
The reviewer's session never becomes the learner's: the request signs nobody in, and answers
with a short-lived grant in a cookie scoped to that learner's review page, which no write of
the lesson takes. README, "Use it from an LMS", says where each platform offers it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from pydantic import SecretStr
from sqlalchemy import Connection, Engine, select

from normdive.i18n.catalogues import gettext, ngettext
from normdive.lesson.content import Lesson
from normdive.lti import launch as launches
from normdive.lti.launch import MAX_NAME_CHARS, Launch, person_name
from normdive.lti.learners import context_key, user_key
from normdive.lti.refusal import Refusal
from normdive.lti.roles import is_staff
from normdive.progress.events import Event, EventKind
from normdive.store.tables import LtiContextMember, LtiLearner, LtiRosterMember

# A reviewer reads one learner's work, then launches the next from the gradebook.
REVIEW_GRANT_TTL_S = 15 * 60
# Distinguishes a review grant's signature from any other use of the secret key.
GRANT_SALT = "normdive.lti-review-grant"
# REVIEW_PATH/{learner id}, the grant's cookie scoped to it; a grant in a link is ?grant=.
REVIEW_PATH = "/lti/review"
REVIEW_COOKIE = "normdive_review"
GRANT_PARAMETER = "grant"
TIMELINE_SHOWN = 500

EXPIRED_OR_FORGED = (
    "This review link is not valid here: it has expired (a review opens for "
    f"{REVIEW_GRANT_TTL_S // 60} minutes), was altered, or names another learner. Open the "
    "review again from the platform's gradebook."
)


@dataclass(frozen=True)
class Review:
    """Whose work a submission review request opens, for whom."""

    # The learner reviewed; None when the platform's user never opened D9 from the course.
    learner_id: str | None
    context_key: str | None
    # learners.user_key: who the grant was given to.
    reviewer: str
    # for_user's name, else the roster's, else their own launch's, else the user_id.
    label: str
    own: bool


@dataclass(frozen=True)
class ReviewGrant:
    learner_id: str
    context_key: str | None
    reviewer: str
    label: str
    own: bool
    expires_at: float


def _launch_name(connection: Connection, user: str) -> str | None:
    return connection.execute(
        select(LtiLearner.name).where(LtiLearner.link_key == user)
    ).scalar_one_or_none()


def _roster_name(connection: Connection, course: str | None, member: str) -> str | None:
    if course is None:
        return None
    name = connection.execute(
        select(LtiRosterMember.name).where(
            LtiRosterMember.context_key == course, LtiRosterMember.link_key == member
        )
    ).scalar_one_or_none()
    return name[:MAX_NAME_CHARS] if name else None


def open_review(
    engine: Engine, launch: Launch, *, administrators_are_staff: bool = False
) -> Review:
    """Check who may review whom (a Refusal, nothing stored, otherwise), consume the
    login, and find the learner reviewed among the course's."""
    for_user = launch.for_user
    if for_user is None:
        raise Refusal(400, "not_a_review", "This launch is not a submission review request.")
    user_id = str(for_user["user_id"])
    own = user_id == launch.subject
    staff = is_staff(launch.roles, administrators_are_staff=administrators_are_staff)
    if not (own or staff):
        raise Refusal(
            403,
            "review_not_allowed",
            "This submission review asks to show another user's work, but the user who opened "
            "it is not staff of the course (an instructor, teaching assistant or "
            "administrator). A learner may review only their own work.",
        )
    course = context_key(launch)
    if course is None and not own:
        raise Refusal(
            400,
            "review_without_course",
            "This submission review names no course (its context claim), so it cannot say "
            "whose learners may be shown.",
        )
    reviewed_key = user_key(replace(launch, subject=user_id))
    with engine.begin() as connection:
        launches.consume(connection, launch.login)
        label = (
            person_name(for_user)
            or _roster_name(connection, course, reviewed_key)
            or _launch_name(connection, reviewed_key)
            or (launch.user_name if own else None)
            or user_id
        )
        learner_id = connection.execute(
            select(LtiLearner.learner_id).where(LtiLearner.link_key == reviewed_key)
        ).scalar_one_or_none()
        if learner_id is not None and course is not None:
            member = connection.execute(
                select(LtiContextMember.learner_id).where(
                    LtiContextMember.context_key == course,
                    LtiContextMember.learner_id == learner_id,
                )
            ).first()
            if member is None:
                learner_id = None  # never opened D9 from this course
    return Review(
        learner_id=learner_id,
        context_key=course,
        reviewer=user_key(launch),
        label=label,
        own=own,
    )


def _serializer(secret_key: SecretStr) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key.get_secret_value(), salt=GRANT_SALT)


def grant_token(review: Review, secret_key: SecretStr, now: float | None = None) -> str:
    """The review grant for a review that found its learner."""
    if review.learner_id is None:
        raise ValueError("a review that found no learner grants nothing")
    issued = time.time() if now is None else now
    return str(
        _serializer(secret_key).dumps(
            {
                "learner": review.learner_id,
                "context": review.context_key,
                "reviewer": review.reviewer,
                "label": review.label,
                "own": review.own,
                "exp": issued + REVIEW_GRANT_TTL_S,
            }
        )
    )


def grant_from(
    token: str | None, learner_id: str, secret_key: SecretStr, now: float | None = None
) -> ReviewGrant:
    """Valid now and naming `learner_id`, or a Refusal (403)."""
    refused = Refusal(403, "review_grant_refused", EXPIRED_OR_FORGED)
    if not token:
        raise refused
    try:
        payload = _serializer(secret_key).loads(token)
    except (BadSignature, UnicodeError, ValueError):
        raise refused from None
    if not isinstance(payload, dict):
        raise refused
    expires_at = payload.get("exp")
    fields = (payload.get("learner"), payload.get("reviewer"), payload.get("label"))
    if not isinstance(expires_at, int | float) or not all(isinstance(f, str) for f in fields):
        raise refused
    moment = time.time() if now is None else now
    if moment >= expires_at or payload["learner"] != learner_id:
        raise refused
    context = payload.get("context")
    return ReviewGrant(
        learner_id=payload["learner"],
        context_key=context if isinstance(context, str) else None,
        reviewer=payload["reviewer"],
        label=payload["label"],
        own=payload.get("own") is True,
        expires_at=float(expires_at),
    )


def review_path(learner_id: str) -> str:
    """Also the path its grant's cookie is scoped to."""
    return f"{REVIEW_PATH}/{learner_id}"


def review_url(learner_id: str, token: str) -> str:
    """The page exchanges the grant for its cookie on arrival."""
    return f"{review_path(learner_id)}?{GRANT_PARAMETER}={token}"


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: EventKind
    text: str


def _choice_label(choices: Sequence[Any], choice_id: object) -> str:
    found = next((choice.label for choice in choices if choice.id == choice_id), None)
    return found if found is not None else str(choice_id)


def _describe(event: Event, lesson: Lesson) -> str:
    payload = event.payload
    rows: dict[str, str] = {row.key: row.label for row in lesson.rows}
    outcomes: dict[str, str] = {outcome.id: outcome.label for outcome in lesson.outcomes}
    match event.kind:
        case EventKind.PREREQUISITE_DONE:
            return gettext("Lesson 8.5 recorded as done")
        case EventKind.PREDICTION_COMMITTED:
            choice = _choice_label(lesson.predict.choices, payload.get("choice"))
            return gettext("Committed the opening prediction: %(choice)s") % {"choice": choice}
        case EventKind.NUMBERS_CHECKED:
            answers = payload.get("answers")
            count = len(answers) if isinstance(answers, list) else 0
            return ngettext(
                "Checked the numbers (%(num)d entry)",
                "Checked the numbers (%(num)d entries)",
                count,
            ) % {"num": count}
        case EventKind.READING_LOCKED:
            choice = _choice_label(lesson.reading.choices, payload.get("choice"))
            if payload.get("right") is True:
                return gettext("Locked a reading (right): %(choice)s") % {"choice": choice}
            return gettext("Locked a reading (not right): %(choice)s") % {"choice": choice}
        case EventKind.TAKEAWAY_SAVED:
            return gettext("Saved the takeaway")
        case EventKind.ROW_PREDICTED:
            row = rows.get(str(payload.get("row")), str(payload.get("row")))
            outcome = outcomes.get(str(payload.get("outcome")), str(payload.get("outcome")))
            return gettext("Predicted the row %(row)s: %(outcome)s") % {
                "row": row,
                "outcome": outcome,
            }
        case EventKind.ROW_PLAYED:
            row = rows.get(str(payload.get("row")), str(payload.get("row")))
            return gettext("Played the row %(row)s") % {"row": row}
        case EventKind.HINT_OPENED:
            return gettext("Opened hint %(rung)s") % {"rung": payload.get("rung")}
        case EventKind.GATE_CLOSED:
            return gettext("The gate closed: every part done")
        case EventKind.LAB_COMMITTED:
            return gettext("Committed a lab prediction")
        case EventKind.LAB_FINISHED:
            return gettext("Finished the lab")
        case EventKind.RERUN_ROW_FINISHED:
            row = rows.get(str(payload.get("row")), str(payload.get("row")))
            return gettext("Re-ran the row %(row)s on their device") % {"row": row}


def timeline(events: Sequence[Event], lesson: Lesson) -> tuple[TimelineEntry, ...]:
    """The learner's latest TIMELINE_SHOWN events, oldest first, each in words."""
    shown = events[-TIMELINE_SHOWN:]
    return tuple(
        TimelineEntry(at=event.created_at, kind=event.kind, text=_describe(event, lesson))
        for event in shown
    )
