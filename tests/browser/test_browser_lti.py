"""The lesson framed by a platform on another site, in Chromium with third-party cookies
blocked, over HTTPS (a throwaway certificate for tool.test and platform.test, both mapped to
127.0.0.1): the platform's course page frames the tool's login, the platform's authorization
endpoint posts the signed id_token back, and the learner works in the frame (the form token
and the learner cookie keep working there).

Twice: with the login's partitioned cookie (CHIPS), and with that cookie stripped from the
login's answer (a browser that keeps no third-party cookie at all), where the platform's
storage (lti-cs-oidc / lti-pm-s postMessages, answered by the course page) carries the login.
A control checks that the browser really blocks an unpartitioned third-party cookie. And the
score of the work done in the frame arrives at the platform's grade book, sent by the
passback sender over real HTTP with the tool's client assertion: part of the work (the right
reading: 1 of 12, Pending), and the whole lesson walked in the frame through the gate (the six
numbers, the reading, four row predictions, the best row played: 12 of 12, FullyGraded).

The platform here is written for the test (its storage, its auth endpoint); its id_tokens
are signed with a real RSA key whose set the tool fetches over real HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, FrameLocator, Page, Playwright, Route, expect
from sqlalchemy import update

from conftest import ACTION_TIMEOUT_MS, CHROMIUM, CHROMIUM_ARGS
from lesson_answers import LESSON, RIGHT_NUMBERS, RIGHT_READING_CHOICE
from lti_browser_sites import SITES_ARGS, TOOL_HOST, Sites, serve_sites
from lti_platform import GradeBook, grade_book_server, unique_sub
from normdive.lti import tool_keys
from normdive.lti.passback import Sender
from normdive.store.db import make_engine
from normdive.store.tables import LtiRegistration

pytestmark = pytest.mark.browser

BROWSER_ARGS = [*CHROMIUM_ARGS, *SITES_ARGS]


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    with serve_sites(tmp_path_factory.mktemp("lti-browser")) as served:
        yield served


@pytest.fixture
def course_page(browser_lti: Browser) -> Iterator[Page]:
    context = browser_lti.new_context(ignore_https_errors=True)
    page = context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []


@pytest.fixture(scope="module")
def browser_lti(playwright_driver: Playwright) -> Iterator[Browser]:
    chromium = playwright_driver.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS
    )
    yield chromium
    chromium.close()


def _work_in_the_frame(frame: FrameLocator) -> None:
    expect(frame.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    frame.get_by_role("radio", name="Residual connections").check()
    frame.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(frame.locator("#committed-prediction")).to_have_text("Residual connections")


def test_third_party_cookies_are_blocked_in_this_browser(sites: Sites, course_page: Page) -> None:
    # The control: an unpartitioned SameSite=None cookie set by the tool's site, first-party,
    # is not sent when that site is framed by the platform.
    course_page.goto(f"{sites.tool}/")
    course_page.context.add_cookies(
        [
            {
                "name": "unpartitioned",
                "value": "1",
                "url": sites.tool,
                "sameSite": "None",
                "secure": True,
            }
        ]
    )
    course_page.goto(f"{sites.platform.origin}/course")
    frame = course_page.frame_locator("iframe")
    expect(frame.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    # The frame's own requests carried no unpartitioned cookie: the lesson shows a learner the
    # launch made, and the control cookie never reached the tool in the frame.
    request_cookies: list[str] = []
    course_page.on(
        "request",
        lambda request: (
            request_cookies.append(request.headers.get("cookie", ""))
            if request.url.startswith(sites.tool)
            else None
        ),
    )
    course_page.reload()
    expect(frame.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    assert request_cookies
    assert not any("unpartitioned=1" in cookies for cookies in request_cookies)


def test_framed_with_the_partitioned_login_cookie(sites: Sites, course_page: Page) -> None:
    sites.platform.storage = False
    sites.platform.subject = unique_sub()
    course_page.goto(f"{sites.platform.origin}/course")
    _work_in_the_frame(course_page.frame_locator("iframe"))


def test_framed_with_no_cookie_the_platform_storage_carries_the_login(
    sites: Sites, course_page: Page
) -> None:
    sites.platform.storage = True
    sites.platform.subject = unique_sub()

    def without_cookies(route: Route) -> None:
        # Fetched here (Playwright's own fetch does not see the browser's host mapping).
        request = route.request
        port = sites.tool.rsplit(":", 1)[1]
        answer = httpx.get(
            request.url.replace(f"https://{TOOL_HOST}:{port}", f"https://127.0.0.1:{port}", 1),
            headers={"Host": f"{TOOL_HOST}:{port}"},
            verify=False,
            follow_redirects=False,
        )
        headers = {k: v for k, v in answer.headers.items() if k.lower() != "set-cookie"}
        headers.pop("content-encoding", None)
        headers.pop("content-length", None)
        route.fulfill(status=answer.status_code, headers=headers, body=answer.content)

    # The login's answer keeps none of its cookies, as in a browser that keeps no
    # third-party cookie at all: only the platform's storage can carry the login.
    course_page.route(f"{sites.tool}/lti/login*", without_cookies)
    launches: list[int] = []
    course_page.on(
        "response",
        lambda response: (
            launches.append(response.status) if response.url == f"{sites.tool}/lti/launch" else None
        ),
    )
    course_page.goto(f"{sites.platform.origin}/course")
    _work_in_the_frame(course_page.frame_locator("iframe"))
    # The first launch answered with the page reading the storage, the second signed in.
    assert launches[:2] == [200, 303]


def test_the_score_of_the_work_in_the_frame_arrives_at_the_platform(
    sites: Sites, course_page: Page
) -> None:
    engine = make_engine(sites.database_url)
    with grade_book_server(GradeBook()) as book:
        with engine.begin() as connection:
            connection.execute(update(LtiRegistration).values(token_url=book.token_url))
        book.tool_key_set = dict(tool_keys.public_key_set(engine))
        sites.platform.storage = False
        sites.platform.subject = unique_sub()
        sites.platform.ags_endpoint = book.endpoint_claim()
        try:
            course_page.goto(f"{sites.platform.origin}/course")
            frame = course_page.frame_locator("iframe")
            _work_in_the_frame(frame)
            frame.get_by_role("radio", name=RIGHT_READING_CHOICE.label).check()
            frame.get_by_role("button", name=LESSON.reading.lock_label).click()
            expect(frame.locator("#gate-reading")).to_have_text("The right reading is locked.")
            sender = Sender(engine, LESSON, sites.recording)
            assert sender.send_due().sent == 1
        finally:
            sites.platform.ags_endpoint = None
    engine.dispose()
    assert book.refused == []
    [(path, score)] = book.scores
    assert path == "/lineitems/d9/scores?course=1"
    assert score["userId"] == sites.platform.subject
    assert score["scoreGiven"] == 1  # the right reading
    assert score["gradingProgress"] == "Pending"


def _walk_to_the_gate(frame: FrameLocator) -> None:
    """The six numbers, the right reading, the four row predictions, the best row played."""
    for field_id, value in RIGHT_NUMBERS.items():
        label = next(f.label for f in LESSON.number_fields if f.id == field_id)
        frame.get_by_label(label, exact=True).fill(value)
    frame.get_by_role("button", name=LESSON.numbers.check_label).click()
    expect(frame.locator("#gate-numbers")).to_have_text("6 of 6 numbers landed.")
    frame.get_by_role("radio", name=RIGHT_READING_CHOICE.label).check()
    frame.get_by_role("button", name=LESSON.reading.lock_label).click()
    expect(frame.locator("#gate-reading")).to_have_text("The right reading is locked.")
    outcome = LESSON.outcomes[0].label
    for row in LESSON.rows:
        group = frame.get_by_role("group", name=f"{row.label}: your prediction")
        group.get_by_role("radio", name=outcome, exact=True).check()
        frame.get_by_role("button", name=f"{LESSON.ablation.predict_label} ({row.label})").click()
        expect(frame.locator(f"#row-{row.key}-prediction")).to_have_text(outcome)
    best = next(row for row in LESSON.rows if row.key == "both")
    frame.get_by_role("button", name=re.compile(rf"^Play this row \({best.label}\)$")).click()
    expect(frame.locator("#gate-status")).to_contain_text("met")


def test_through_the_gate_full_marks_arrive_at_the_platform(
    sites: Sites, course_page: Page
) -> None:
    engine = make_engine(sites.database_url)
    with grade_book_server(GradeBook()) as book:
        with engine.begin() as connection:
            connection.execute(update(LtiRegistration).values(token_url=book.token_url))
        book.tool_key_set = dict(tool_keys.public_key_set(engine))
        sites.platform.storage = False
        sites.platform.subject = unique_sub()
        sites.platform.ags_endpoint = book.endpoint_claim()
        try:
            course_page.goto(f"{sites.platform.origin}/course")
            frame = course_page.frame_locator("iframe")
            _work_in_the_frame(frame)
            _walk_to_the_gate(frame)
            assert Sender(engine, LESSON, sites.recording).send_due().sent == 1
        finally:
            sites.platform.ags_endpoint = None
    engine.dispose()
    assert book.refused == []
    score = book.scores[-1][1]
    assert score["scoreGiven"] == score["scoreMaximum"] == 12
    assert score["activityProgress"] == "Completed"
    assert score["gradingProgress"] == "FullyGraded"
