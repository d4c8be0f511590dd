"""The grade-sync doctor and Resend changed grades, against a platform's grade book served
over real HTTP (tests/lti_platform.py).

The doctor's sentences: a known answer of Moodle, Canvas or Open edX gets its own, anything
else quotes the platform; `normdive lti outbox --why` and the instructor view say them.
Resending a course's grades queues only the targets whose platform copy may be stale: the
platform is asked again for those, and never for one it has already taken."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from bs4 import BeautifulSoup
from joserfc.jwk import RSAKey
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SettingsFactory
from lti_platform import (
    INSTRUCTOR_ROLE,
    GradeBook,
    KeySetServer,
    browser,
    grade_book_server,
    launch,
    launch_claims,
    login,
    register_platform,
    signed,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.i18n.catalogues import activated
from normdive.lesson.content import load_lesson
from normdive.lti import grade_doctor, passback
from normdive.lti.learners import latest_course
from normdive.lti.passback import Sender
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.routes.instructor import RESEND_PATH

LESSON = load_lesson()
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def book(app: Starlette, engine: Engine, jwks: KeySetServer) -> Iterator[GradeBook]:
    with grade_book_server(GradeBook()) as served, browser(app) as client:
        register_platform(engine, jwks.url, token_url=served.token_url)
        served.tool_key_set = client.get("/lti/jwks").json()
        yield served


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + timedelta(days=1)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def sender(engine: Engine, settings: Settings) -> Sender:
    return Sender(engine, LESSON, settings.recording_path, clock=Clock())


Launched = tuple[str, TestClient]
LaunchAs = Callable[..., Launched]


@pytest.fixture
def launch_as(app: Starlette, book: GradeBook, platform_key: RSAKey) -> Iterator[LaunchAs]:
    clients: list[TestClient] = []

    def launched(sub: str, *, staff: bool = False) -> Launched:
        client = browser(app).__enter__()
        clients.append(client)
        asked = login(client)
        claims = {AGS_CLAIM: book.endpoint_claim(), "sub": sub}
        if staff:
            claims["lti_roles"] = [INSTRUCTOR_ROLE]
        response = launch(
            client, signed(launch_claims(asked.nonce, **claims), platform_key), asked.state
        )
        assert response.status_code == 303, response.text
        return str(client.cookies.get(COOKIE_NAME)).split(".")[0], client

    yield launched
    for client in clients:
        client.__exit__(None, None, None)


def run_cli(database_url: str, *arguments: str) -> str:
    result = CliRunner().invoke(
        cli, ["lti", *arguments], env={"DATABASE_URL": database_url, "NORMDIVE_SECRET_KEY": None}
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    ("status", "words", "platform", "sentence"),
    [
        (400, "Incorrect score received", "Moodle", "Moodle says this user cannot be graded"),
        (
            422,
            '{"errors":{"type":"unprocessable_entity","message":"User not found in course or '
            'is not a student"}}',
            "Canvas",
            "Canvas says this user is not a student of the course",
        ),
        (
            422,
            '{"errors":{"type":"unprocessable_entity","message":"This course has concluded. '
            'AGS requests will no longer be accepted for this course."}}',
            "Canvas",
            "Canvas says the course has concluded",
        ),
        (
            422,
            '{"errors":[{"field":"grade","message":"cannot be changed at this time: This '
            'assignment is still unpublished","error_code":null}]}',
            "Canvas",
            "Canvas says the assignment is unpublished",
        ),
        (
            400,
            "timestamp: Score timestamp can only be updated to a later point in time",
            "Open edX",
            "Open edX holds a later score",
        ),
    ],
)
def test_a_known_answer_gets_its_own_sentence(
    status: int, words: str, platform: str, sentence: str
) -> None:
    said = grade_doctor.refused(grade_doctor.SCORE_REFUSED, status, words)
    assert said.startswith(sentence)
    assert f"({platform} answered {status} " in said
    assert grade_doctor.advice("refused", status, words, "stale reason").startswith(sentence)


def test_any_other_answer_is_quoted() -> None:
    said = grade_doctor.refused(grade_doctor.SCORE_REFUSED, 418, "I am a teapot")
    assert said == (
        "the platform refused this score (418 I am a teapot): check that this user is enrolled "
        "in the course as a learner who can be graded. D9 tries again when the score changes"
    )
    # The same words under another status are not the known answer.
    assert "Moodle" not in grade_doctor.refused(
        grade_doctor.SCORE_REFUSED, 409, "Incorrect score received"
    )


def test_outbox_why_says_what_to_do(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, database_url: str
) -> None:
    launch_as("ada")
    launch_as("eve")
    book.refused_users.add("eve")
    sender.send_due()
    shown = run_cli(database_url, "outbox", "--why", "--all")
    assert "what to do: the platform has the latest score: nothing to do" in shown
    assert (
        "what to do: Moodle says this user cannot be graded here (not enrolled as a student, "
        "or their enrolment is suspended or over): check their enrolment in the course, then "
        "use Resend changed grades"
    ) in shown


def _score_posts(book: GradeBook) -> list[str]:
    return [path for path in book.requests if path.endswith("/scores")]


def test_resend_sends_again_only_what_the_platform_may_not_have(
    launch_as: LaunchAs,
    book: GradeBook,
    sender: Sender,
    store: Store,
    engine: Engine,
    database_url: str,
) -> None:
    ada, _ = launch_as("ada")
    eve, _ = launch_as("eve")
    book.refused_users.add("eve")
    sender.send_due()
    assert len(_score_posts(book)) == 2
    course = latest_course(engine, ada)
    assert course is not None
    # Ada's copy is the latest: never asked again. Eve's was refused: asked again, alone.
    shown = run_cli(database_url, "resend", "--context", course)
    assert "1 grade(s) queued to be sent again; 1 up to date, not sent" in shown
    assert sender.send_due().failed == 1
    assert len(_score_posts(book)) == 3
    # Eve's enrolment fixed: her score goes once more, and the platform takes it.
    book.refused_users.discard("eve")
    run_cli(database_url, "resend", "--context", course)
    assert sender.send_due().sent == 1
    assert [score["userId"] for _, score in book.scores] == ["ada", "eve"]
    assert len(_score_posts(book)) == 4
    # Both up to date: resending asks the platform nothing.
    shown = run_cli(database_url, "resend", "--context", course)
    assert "0 grade(s) queued to be sent again; 2 up to date, not sent" in shown
    assert sender.send_due().tried == 0
    assert len(_score_posts(book)) == 4
    # A learner whose copy went stale some other way (the platform took an older score).
    store.append(ada, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    from sqlalchemy import update

    from normdive.store.tables import LtiGradeTarget, LtiScoreOutbox

    with engine.begin() as connection:  # as if the outbox row had been lost
        connection.execute(LtiScoreOutbox.__table__.delete())
        connection.execute(update(LtiGradeTarget).values(due_at=None))
    assert sender.send_due().tried == 0
    run_cli(database_url, "resend", "--context", course)
    assert sender.send_due().sent == 1
    assert book.scores[-1][1]["userId"] == "ada"
    assert book.scores[-1][1]["scoreGiven"] == 1
    assert len(_score_posts(book)) == 5
    assert eve != ada


def test_resend_refuses_what_is_not_a_context_key(database_url: str) -> None:
    result = CliRunner().invoke(
        cli,
        ["lti", "resend", "--context", "course-1"],
        env={"DATABASE_URL": database_url, "NORMDIVE_SECRET_KEY": None},
    )
    assert result.exit_code != 0
    assert "is not a context key: 64 hex characters" in result.output


def _instructor_page(client: TestClient) -> BeautifulSoup:
    response = client.get("/instructor")
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def test_the_instructor_view_says_what_to_do_and_resends(
    launch_as: LaunchAs, book: GradeBook, sender: Sender
) -> None:
    launch_as("ada")
    launch_as("eve")
    book.refused_users.add("eve")
    sender.send_due()
    _, teacher = launch_as("teacher", staff=True)
    assert sender.send_due().tried == 0  # the teacher is no grade target
    page = _instructor_page(teacher)
    section = page.find("section", attrs={"aria-labelledby": "grades-title"})
    assert section is not None
    text = " ".join(section.get_text().split())
    assert "1 refused by the platform, 1 up to date" in text
    assert "1 needs action" in text
    assert "User eve (the platform answered 400): Moodle says this user cannot be graded" in text
    form = section.find("form")
    assert form is not None and form["action"] == RESEND_PATH
    token = form.find("input", attrs={"name": "csrf_token"})["value"]

    # Without the form's token, or from another site: refused, nothing queued.
    assert teacher.post(RESEND_PATH, data={}).status_code == 403
    assert (
        teacher.post(
            RESEND_PATH, data={"csrf_token": token}, headers={"Origin": "https://evil.example"}
        ).status_code
        == 403
    )
    assert sender.send_due().tried == 0

    book.refused_users.discard("eve")
    answer = teacher.post(RESEND_PATH, data={"csrf_token": token})
    assert answer.status_code == 303
    shown = teacher.get(answer.headers["location"])
    resent = BeautifulSoup(shown.text, "html.parser").find(class_="grades-resent")
    assert resent is not None
    assert " ".join(resent.get_text().split()) == (
        "1 grade queued to be sent again; 1 up to date, not sent."
    )
    # Counts in a link made elsewhere are not shown.
    forged = teacher.get("/instructor?resent=9&current=0&nowhere=0&sig=" + "0" * 64)
    assert BeautifulSoup(forged.text, "html.parser").find(class_="grades-resent") is None
    asked = len(_score_posts(book))
    assert sender.send_due().sent == 1
    assert len(_score_posts(book)) == asked + 1
    assert book.scores[-1][1]["userId"] == "eve"
    assert "Nothing needs action." in _instructor_page(teacher).get_text()


def test_a_learner_cannot_resend(launch_as: LaunchAs, book: GradeBook) -> None:
    _, learner = launch_as("ada")
    assert learner.post(RESEND_PATH, data={"csrf_token": "x" * 64}).status_code == 403


def test_the_doctor_counts_only_the_course(
    launch_as: LaunchAs, book: GradeBook, engine: Engine, sender: Sender
) -> None:
    ada, _ = launch_as("ada")
    sender.send_due()
    course = latest_course(engine, ada)
    assert course is not None
    assert grade_doctor.course_grades(engine, course).counts == {"sent": 1}
    assert grade_doctor.course_grades(engine, "0" * 64).total == 0
    assert (
        passback.resend_changed(
            engine, "0" * 64, LESSON, Settings.model_construct().recording_path
        ).queued
        == 0
    )


def test_the_instructor_reads_the_advice_in_their_language_and_the_store_keeps_english() -> None:
    moodle = (400, '{"error": "Incorrect score received"}')
    with activated("de"):
        said = grade_doctor.advice(grade_doctor.TargetStatus.REFUSED, *moodle, None)
        stored = grade_doctor.refused(grade_doctor.SCORE_REFUSED, *moodle)
        waiting = grade_doctor.advice(grade_doctor.TargetStatus.DUE, None, None, None)
    assert said.startswith("Moodle meldet, dass diese Person hier nicht bewertet werden kann")
    assert "„Geänderte Noten erneut senden“" in said and "(Moodle antwortete 400" in said
    # What passback stores, and so the command line shows, stays English in any request.
    assert stored.startswith("Moodle says this user cannot be graded here")
    assert "then use Resend changed grades" in stored
    assert waiting == "wartet auf das Senden: nichts zu tun"


def test_the_grades_summary_counts_in_the_language() -> None:
    grades = grade_doctor.CourseGrades(
        counts={grade_doctor.TargetStatus.SENT: 40, grade_doctor.TargetStatus.REFUSED: 2},
        needing_action=(),
    )
    assert grades.summary() == "2 refused by the platform, 40 up to date"
    with activated("ar"):
        assert grades.summary() == "2 رفضتها المنصة، 40 محدَّثة"


def test_the_instructor_views_grades_in_german(
    launch_as: LaunchAs, book: GradeBook, sender: Sender
) -> None:
    launch_as("ada")
    launch_as("eve")
    book.refused_users.add("eve")
    sender.send_due()
    _, teacher = launch_as("teacher", staff=True)
    sender.send_due()
    response = teacher.get("/instructor", headers={"Accept-Language": "de"})
    assert response.status_code == 200, response.text
    section = BeautifulSoup(response.text, "html.parser").find(
        "section", attrs={"aria-labelledby": "grades-title"}
    )
    assert section is not None
    text = " ".join(section.get_text().split())
    assert "1 von der Plattform abgelehnt, 1 aktuell" in text
    assert "1 erfordert Handeln" in text
    assert "Nutzer eve (die Plattform antwortete 400): Moodle meldet, dass diese Person" in text
