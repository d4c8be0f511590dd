"""The grade-sync doctor: what each grade target's last answer means, and what to do, in
plain words. Passback writes these sentences as each target's reason; `normdive lti outbox
--why` and the instructor view read them back. Known platform answers (KNOWN_ANSWERS) get their
own sentence; anything else is explained by its kind and quotes the platform.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Engine, select

from normdive.i18n.catalogues import N_, gettext
from normdive.like_named import like_named
from normdive.store.tables import LtiGradeTarget, course_learners


class TargetStatus(StrEnum):
    """What the platform last made of a grade target (lti_grade_targets.status)."""

    DUE = "due"
    SENT = "sent"
    # An outage: tried again at due_at.
    FAILING = "failing"
    # Tried again with a changed score.
    REFUSED = "refused"
    # Line item deleted: nothing is sent until a launch names one.
    GONE = "gone"
    # On no origin of the registration: no token goes there.
    FOREIGN = "foreign"


# Translated where the instructor view shows them (advice); stored reasons and the CLI stay
# English. %(resend)s is RESEND.
RESEND = N_("then use Resend changed grades (or `normdive lti resend --context KEY`)")
ANSWERED = N_("%(sentence)s (%(platform)s answered %(said)s)")
NO_ANSWER = N_("no answer")

LINEITEM_RECREATED = (
    "the line item was deleted in the gradebook: D9 created a new one and sent the score there"
)
LINEITEM_BEING_MADE = (
    "another learner's score is finding or creating this link's line item: D9 sends this "
    "score as soon as it is there"
)
# A refusal's meaning and what to check, split at "; ".
SCORE_REFUSED = (
    "the platform refused this score; check that this user is enrolled in the course as a "
    "learner who can be graded"
)
NO_LINEITEM = (
    "the platform refused to create a line item for D9; check that the tool may manage grade "
    "columns (the line item scope) in this course"
)


@dataclass(frozen=True)
class KnownAnswer:
    """An answer D9 recognises: its status, words it contains (lower case), what to do."""

    platform: str
    status: int
    words: str
    sentence: str
    # A send before whose answer was lost took the score: the target is sent.
    holds_score: bool = False


# Each from the platform's own source or its documentation's error table.
KNOWN_ANSWERS = (
    # Moodle (mod/lti/service/gradebookservices): a user it cannot grade in this course.
    KnownAnswer(
        "Moodle",
        400,
        "incorrect score received",
        N_(
            "Moodle says this user cannot be graded here (not enrolled as a student, or their "
            "enrolment is suspended or over): check their enrolment in the course, %(resend)s"
        ),
    ),
    # Canvas (Lti::IMS::ScoresController and its documented error table).
    KnownAnswer(
        "Canvas",
        422,
        "user not found in course or is not a student",
        N_(
            "Canvas says this user is not a student of the course (a removed student, a teacher, "
            "or the Test Student of Student View): check their enrolment; nothing to do for the "
            "Test Student"
        ),
    ),
    KnownAnswer(
        "Canvas",
        422,
        "this course has concluded",
        N_(
            "Canvas says the course has concluded and takes no more grades: reopen it (its end "
            "date) in Canvas, %(resend)s"
        ),
    ),
    KnownAnswer(
        "Canvas",
        422,
        "unpublished",
        N_(
            "Canvas says the assignment is unpublished, so it cannot be graded: publish the "
            "assignment (and the course), %(resend)s"
        ),
    ),
    KnownAnswer(
        "Canvas",
        400,
        "not published",
        N_(
            "Canvas says the course is not published, so it cannot be graded: publish the course, "
            "%(resend)s"
        ),
    ),
    KnownAnswer(
        "Canvas",
        422,
        "cannot be graded",
        N_(
            "Canvas says this submission cannot be graded now (an unpublished course or "
            "assignment, or a closed period): publish it or reopen it, %(resend)s"
        ),
    ),
    # Open edX (xblock-lti-consumer's AGS serializers).
    KnownAnswer(
        "Open edX",
        400,
        "score timestamp can only be updated to a later point in time",
        N_(
            "Open edX holds a later score for this user than the one D9 sent (a clock ahead, or "
            "another tool): nothing is lost, D9 sends the next score stamped later"
        ),
    ),
    KnownAnswer(
        "Open edX",
        400,
        "score already exists for the provided timestamp",
        N_(
            "Open edX has a score with this timestamp already: D9 sends the next score stamped "
            "later; nothing to do"
        ),
        holds_score=True,
    ),
    KnownAnswer(
        "Open edX",
        400,
        "invalid usage key",
        N_(
            "Open edX takes line items only for its own blocks: add D9 as an LTI component that "
            "names its line item (its grading settings), then launch it again"
        ),
    ),
)


def known_answer(status: int | None, words: str | None) -> KnownAnswer | None:
    if status is None or not words:
        return None
    said = words.lower()
    for known in KNOWN_ANSWERS:
        if known.status == status and known.words in said:
            return known
    return None


def quoted(status: int | None, words: str | None) -> str:
    """What the platform said, for a sentence: '422 its words', 'no answer'."""
    said = f"{status if status is not None else ''} {words or ''}".strip()
    return said or NO_ANSWER


def _filled(sentence: str, translate: bool) -> str:
    if translate:
        return gettext(sentence) % {"resend": gettext(RESEND)}
    return sentence % {"resend": RESEND}


def _answered(known: KnownAnswer, status: int | None, words: str | None, translate: bool) -> str:
    said = quoted(status, words)
    return (gettext(ANSWERED) if translate else ANSWERED) % {
        "sentence": _filled(known.sentence, translate),
        "platform": known.platform,
        "said": gettext(said) if translate and said == NO_ANSWER else said,
    }


def outage(what: str, said: str, retry_minutes: float) -> str:
    return (
        f"{what} is unreachable or failing ({said}): D9 tries again, at least every "
        f"{retry_minutes:g} minutes; nothing to do unless it lasts"
    )


def gone(what: str, said: str) -> str:
    return (
        f"the platform says {what} is gone ({said}): it was deleted in the gradebook. D9 sends "
        "this learner's score again once a launch names a line item (the learner opens D9 from "
        "the course again)"
    )


def access_refused(what: str, said: str) -> str:
    return (
        f"the platform refused the tool's access to {what}, even with a new token ({said}): "
        "check that the tool may use the grade services in this course, and that the client "
        "is on"
    )


def redirected(what: str) -> str:
    return f"the platform sent {what} elsewhere; check the URLs it names"


def refused(refusal: str, status: int, words: str) -> str:
    """A known answer's sentence, else `refusal` ("meaning; check") quoting the platform."""
    known = known_answer(status, words)
    if known is not None:
        return _answered(known, status, words, translate=False)
    meaning, check = refusal.split("; ", 1)
    return f"{meaning} ({quoted(status, words)}): {check}. D9 tries again when the score changes"


def token_refused(said: str, issuer: str, retry_minutes: float) -> str:
    return (
        f"the platform refused the token ({said}): the client may have been disabled or "
        "deleted, or the tool's key set URL changed in its settings on "
        f"{issuer}. D9 tries again, at least every {retry_minutes:g} minutes"
    )


def error_page_for_token(status: int, issuer: str) -> str:
    """An HTML page instead of a token, never quoted."""
    return (
        f"the platform's token endpoint answered {status} with an error page, not a token: it "
        "most likely could not fetch the tool's key set (/lti/jwks). In Moodle, take the "
        "tool's host off Site administration > General > Security > HTTP security > \"cURL "
        'blocked hosts list" and add its port to "cURL allowed ports list"; elsewhere, '
        f"check that {issuer} can reach the tool"
    )


def no_token(what: str, issuer: str, retry_minutes: float) -> str:
    return (
        f"{what} gave no access token: check the token URL registered for {issuer}. D9 tries "
        f"again, at least every {retry_minutes:g} minutes"
    )


def foreign(origin: str, issuer: str, allowed: tuple[str, ...]) -> str:
    return (
        f"the launch named a grade URL on {origin}, which is none of the origins registered "
        f"for {issuer} ({', '.join(allowed)}): D9 sends no token there. If the platform serves "
        "its grades there, register that host with --frame-origin"
    )


def unusable_lineitem(why: str) -> str:
    return (
        f"the platform created a line item but {why}: D9 tries again when the score changes; "
        "the platform's administrator may report it to the platform's vendor"
    )


def not_a_url(url: str) -> str:
    return f"{url!r} is not a URL a request can go to: check the platform"


# When a target's last try left no sentence of its own.
BY_STATUS: dict[str, str] = {
    TargetStatus.DUE: N_("waiting to be sent: nothing to do"),
    TargetStatus.SENT: N_("the platform has the latest score: nothing to do"),
    TargetStatus.FAILING: N_(
        "the platform did not answer: D9 keeps trying; nothing to do unless it lasts"
    ),
    TargetStatus.REFUSED: N_(
        "the platform refused the score: check the learner's enrolment, %(resend)s"
    ),
    TargetStatus.GONE: N_(
        "the line item was deleted in the gradebook: the learner's next launch names one"
    ),
    TargetStatus.FOREIGN: N_(
        "the grade URL is on a host not registered for the platform: register it with "
        "--frame-origin if the platform serves its grades there"
    ),
}

NEEDS_ACTION = frozenset(
    {TargetStatus.REFUSED, TargetStatus.GONE, TargetStatus.FOREIGN, TargetStatus.FAILING}
)


def advice(status: str, answer_status: int | None, answer: str | None, reason: str | None) -> str:
    """In the current locale: a known answer's sentence, else the last try's (stored in
    English), else its state's."""
    if status in (TargetStatus.REFUSED, TargetStatus.GONE, TargetStatus.FAILING):
        known = known_answer(answer_status, answer)
        if known is not None:
            return _answered(known, answer_status, answer, translate=True)
    if reason:
        return reason
    if status in BY_STATUS:
        return _filled(BY_STATUS[status], translate=True)
    return gettext(UNKNOWN_STATE) % {"status": status}


UNKNOWN_STATE = N_("state %(status)s")


STATE_NAMES: dict[str, str] = {
    TargetStatus.DUE: N_("waiting to be sent"),
    TargetStatus.SENT: N_("up to date"),
    TargetStatus.FAILING: N_("platform not answering"),
    TargetStatus.REFUSED: N_("refused by the platform"),
    TargetStatus.GONE: N_("line item deleted"),
    TargetStatus.FOREIGN: N_("grade URL not registered"),
}


@dataclass(frozen=True)
class Diagnosis:
    """One grade target of a course as the instructor view shows it."""

    learner_id: str
    user_id: str
    resource_link_id: str
    status: str
    last_status: int | None
    advice: str

    @property
    def needs_action(self) -> bool:
        return self.status in NEEDS_ACTION


@dataclass(frozen=True)
class CourseGrades:
    """One course's targets: how many in each state, and those needing action."""

    counts: dict[str, int]
    needing_action: tuple[Diagnosis, ...]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """'2 refused by the platform, 40 up to date', those needing action first."""
        order = sorted(self.counts, key=lambda state: (state not in NEEDS_ACTION, state))
        return gettext(LIST_SEPARATOR).join(
            gettext(COUNTED_STATE) % {"count": self.counts[state], "state": gettext(name)}
            for state in order
            for name in (STATE_NAMES.get(state, state),)
        )


# Arabic joins with its own comma.
COUNTED_STATE = N_("%(count)s %(state)s")
LIST_SEPARATOR = N_(", ")


# The instructor view lists this many (the CLI all).
ACTION_LISTED = 200


def course_grades(engine: Engine, context_key: str) -> CourseGrades:
    learners = course_learners(context_key).scalar_subquery()
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                LtiGradeTarget.learner_id,
                LtiGradeTarget.user_id,
                LtiGradeTarget.resource_link_id,
                LtiGradeTarget.status,
                LtiGradeTarget.last_status,
                LtiGradeTarget.last_answer,
                LtiGradeTarget.reason,
            )
            .where(LtiGradeTarget.learner_id.in_(learners))
            .order_by(LtiGradeTarget.learner_id, LtiGradeTarget.target_key)
        ).all()
    counts = Counter(row.status for row in rows)
    acting = [
        Diagnosis(
            **like_named(row, "learner_id", "user_id", "resource_link_id", "status", "last_status"),
            advice=advice(row.status, row.last_status, row.last_answer, row.reason),
        )
        for row in rows
        if row.status in NEEDS_ACTION
    ]
    return CourseGrades(counts=dict(counts), needing_action=tuple(acting[:ACTION_LISTED]))
