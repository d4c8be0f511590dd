"""A learner's D9 opened from a gradebook (Submission Review 1.0) in a course set up the usual
way: an instructor adds D9 by deep linking, the platform makes the column from the response's
line item, a learner works, D9 scores them there, and the gradebook then sends
LtiSubmissionReviewRequest for that learner on that column.

The platform is `lti1p3platform` (independent_platform: its login, id_tokens signed with its
own key, key set, token endpoint checking the tool's client assertion, deep linking response
check), served over real HTTP on 127.0.0.1 with the gradebook of a platform that follows
Submission Review 1.0: it offers a review only on a line item that declares submissionReview,
only for a score whose activityProgress that declaration lists, and, with a tool that
registered itself, only when the tool's registration lists the review message. It is set up
twice: registered by hand (`normdive lti register`), and by dynamic registration (the URL
`normdive lti invite` prints)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import Engine
from starlette.applications import Starlette

from helpers import SettingsFactory
from lesson_answers import RIGHT_NUMBERS
from lti_platform import INSTRUCTOR_ROLE, LEARNER_ROLE, TOOL_ORIGIN, browser
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lti.passback import Sender
from normdive.web.infrastructure.identity import COOKIE_NAME
from page_client import PageClient
from reviewing_platform import (
    SETUPS,
    ResourceLink,
    ReviewingPlatform,
    served_platform,
)

LESSON = load_lesson()
TAKEAWAY = "Residuals carry the copy; layer norm keeps the scale."


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    """The platform is on this machine (http://127.0.0.1), which a platform registering itself
    may name only with the development setting; 8.5 is checked as in a course (the launch)."""
    return make_settings(dev_prerequisite_done=False, dev_lti_loopback=True)


@pytest.fixture
def platform() -> Iterator[ReviewingPlatform]:
    with served_platform() as served:
        yield served


@pytest.fixture(params=list(SETUPS))
def course(
    request: pytest.FixtureRequest, app: Starlette, engine: Engine, platform: ReviewingPlatform
) -> ResourceLink:
    """The platform set up one way, its copy of the tool's key set taken from /lti/jwks (the
    tool is served in-process, which the platform's own fetch cannot reach), and D9 added to
    the course by deep linking."""
    SETUPS[request.param](app, engine, platform)
    with browser(app) as client:
        platform.registration.set_tool_key_set(client.get("/lti/jwks").json())
    return platform.add_by_deep_linking(app, "teacher-1")


def _learner_works(app: Starlette, platform: ReviewingPlatform, link: ResourceLink) -> str:
    """learner-7 opens the link and works: the opening prediction, the six numbers, a
    takeaway. Their learner id."""
    with PageClient(app, base_url=TOOL_ORIGIN, follow_redirects=False) as client:
        answer = platform.launch(client, "learner-7", "Ada Lovelace", link)
        assert answer.status_code == 303, answer.text
        for path, data in (
            ("/predict", {"choice": "residual"}),
            ("/numbers", RIGHT_NUMBERS),
            ("/takeaway", {"text": TAKEAWAY}),
        ):
            sent = client.post(path, data=data, headers={"Accept": "application/json"})
            assert sent.status_code == 200, (path, sent.text)
        return str(client.cookies.get(COOKIE_NAME)).split(".")[0]


def test_the_gradebook_opens_a_learners_work_on_the_deep_linked_column(
    app: Starlette,
    engine: Engine,
    settings: Settings,
    platform: ReviewingPlatform,
    course: ResourceLink,
) -> None:
    assert course.lineitem.submission_review is not None, "the deep link declared no review"
    _learner_works(app, platform, course)
    report = Sender(engine, LESSON, settings.recording_path).send_due()
    assert (report.sent, report.failed) == (1, 0), platform.errors
    score = platform.scores[(course.lineitem.url, "learner-7")]
    assert (score["scoreGiven"], score["scoreMaximum"]) == (6, 12)
    assert score["activityProgress"] == "InProgress"
    # The column the launch named is the platform's: the tool sent scores to it, never a PUT.
    assert not [request for request in platform.requests if request[0] == "PUT"]

    teacher, answer = platform.review(app, "teacher-1", [INSTRUCTOR_ROLE], course, "learner-7")
    with teacher:
        assert answer.status_code == 303, answer.text
        page = teacher.get(answer.headers["location"])
        assert page.status_code == 200
        text = BeautifulSoup(page.text, "html.parser").get_text(" ")
        assert "Viewing Ada Lovelace as they left it." in text
        assert TAKEAWAY in text
        assert "Checked the numbers (6 entries)" in text
        assert teacher.cookies.get(COOKIE_NAME) is None  # nobody signed in as the learner
    assert platform.errors == []


def test_a_learner_cannot_open_someone_elses_work_from_the_gradebook(
    app: Starlette,
    engine: Engine,
    settings: Settings,
    platform: ReviewingPlatform,
    course: ResourceLink,
) -> None:
    _learner_works(app, platform, course)
    Sender(engine, LESSON, settings.recording_path).send_due()
    with browser(app) as other:
        assert platform.launch(other, "learner-8", "Alan Turing", course).status_code == 303
    prying, answer = platform.review(app, "learner-8", [LEARNER_ROLE], course, "learner-7")
    with prying:
        assert answer.status_code == 403
        assert "review_not_allowed" in answer.text
        assert TAKEAWAY not in answer.text
        assert "location" not in answer.headers
