"""What a real Moodle 4.5 sends, on the independent platform (reviewing_platform): a teacher's
launch carries the grade service claim but is no grade target and no learner of the course;
a link whose column D9 made in the container is launched with `"lineitem": ""`, which is no
line item; a review request names only the user_id, and the review names the learner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import Engine
from starlette.applications import Starlette

from helpers import SettingsFactory, words
from lti_platform import INSTRUCTOR_ROLE, LEARNER_ROLE, TOOL_ORIGIN, browser
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lti import passback
from normdive.lti.passback import Sender
from page_client import PageClient
from reviewing_platform import ResourceLink, ReviewingPlatform, registered_by_hand, served_platform

LESSON = load_lesson()
# A teacher as Moodle sends one: the context's Instructor, and the site's roles besides.
TEACHER_ROLES = [
    INSTRUCTOR_ROLE,
    "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor",
]


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def platform(app: Starlette, engine: Engine) -> Iterator[ReviewingPlatform]:
    with served_platform() as served:
        registered_by_hand(app, engine, served)
        with browser(app) as client:
            served.registration.set_tool_key_set(client.get("/lti/jwks").json())
        yield served


@pytest.fixture
def sender(engine: Engine, settings: Settings) -> Sender:
    return Sender(engine, LESSON, settings.recording_path)


def _opens(
    app: Starlette, platform: ReviewingPlatform, user: str, name: str, link: ResourceLink
) -> None:
    """`user` opens the link and commits the opening prediction."""
    with PageClient(app, base_url=TOOL_ORIGIN, follow_redirects=False) as client:
        answer = platform.launch(client, user, name, link)
        assert answer.status_code == 303, answer.text
        sent = client.post(
            "/predict", data={"choice": "residual"}, headers={"Accept": "application/json"}
        )
        assert sent.status_code == 200, sent.text


def test_a_teachers_launch_is_no_grade_target_and_no_learner(
    app: Starlette, engine: Engine, platform: ReviewingPlatform, sender: Sender
) -> None:
    link = platform.add_by_deep_linking(app, "teacher-1")
    _opens(app, platform, "learner-7", "Ada Lovelace", link)
    teacher = browser(app)
    with teacher:
        landed = platform.launch(teacher, "teacher-1", "Grace Hopper", link, TEACHER_ROLES)
        assert landed.headers["location"] == "/instructor"
        report = sender.send_due()
        assert (report.sent, report.failed) == (1, 0)
        assert platform.refusals == [] and platform.errors == []
        assert [t.user_id for t in passback.targets(engine)] == ["learner-7"]
        page = BeautifulSoup(teacher.get("/instructor").text, "html.parser")
    funnel = page.find("figure", attrs={"aria-labelledby": "funnel-caption"})
    assert funnel is not None
    bars = [item.get_text(" ", strip=True) for item in funnel.find_all("li")]
    assert bars[0] == "Opened the lesson 1", bars
    grades = page.find("section", attrs={"aria-labelledby": "grades-title"})
    assert grades is not None and "Nothing needs action." in words(grades)


def test_an_empty_line_item_is_the_link_has_none(
    app: Starlette, engine: Engine, platform: ReviewingPlatform, sender: Sender
) -> None:
    link = platform.add_without_grades("D9")
    _opens(app, platform, "learner-7", "Ada Lovelace", link)
    assert sender.send_due().sent == 1  # D9 made the column in the container
    column = platform.link_lineitem(link)
    assert column is not None
    assert (
        platform.ags_claim(link)["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"][
            "lineitem"
        ]
        == ""
    )
    _opens(app, platform, "learner-8", "Alan Turing", link)
    report = sender.send_due()
    assert (report.sent, report.failed) == (1, 0)
    assert {user for url, user in platform.scores if url == column.url} == {
        "learner-7",
        "learner-8",
    }
    assert [t.status for t in passback.targets(engine)] == ["sent", "sent"]
    assert len(platform.lineitems) == 1


def test_a_review_that_names_only_the_user_id_names_the_learner(
    app: Starlette, platform: ReviewingPlatform, sender: Sender
) -> None:
    link = platform.add_by_deep_linking(app, "teacher-1")
    _opens(app, platform, "learner-7", "Sam Student", link)
    sender.send_due()
    reviewer, answer = platform.review(
        app, "teacher-1", TEACHER_ROLES, link, "learner-7", for_user={"user_id": "learner-7"}
    )
    with reviewer:
        assert answer.status_code == 303, answer.text
        page = BeautifulSoup(reviewer.get(answer.headers["location"]).text, "html.parser")
        assert words(page.find(id="review-banner")).startswith(
            "Viewing Sam Student as they left it."
        )
    own, answer = platform.review(
        app, "learner-7", [LEARNER_ROLE], link, "learner-7", for_user={"user_id": "learner-7"}
    )
    with own:
        page = BeautifulSoup(own.get(answer.headers["location"]).text, "html.parser")
        assert words(page.find(id="review-banner")).startswith("Your work as you left it.")
