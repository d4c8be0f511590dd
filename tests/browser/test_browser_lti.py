"""The lesson framed by a platform on another site, in Chromium with third-party cookies
blocked, over HTTPS (a throwaway certificate for tool.test and platform.test, both mapped to
127.0.0.1): the platform's course page frames the tool's login, the platform's authorization
endpoint posts the signed id_token back, and the learner works in the frame (the form token
and the learner cookie keep working there).

Twice: with the login's partitioned cookie (CHIPS), and with that cookie stripped from the
login's answer on the tool's side (a browser that keeps no third-party cookie at all), where the
platform's storage (lti-cs-oidc / lti-pm-s postMessages, answered by the course page) carries
the login. What the tool received (the cookies of each request, as its side of the network
saw them) shows which cookie came back. A control checks that the browser really blocks an
unpartitioned third-party cookie. And the
score of the work done in the frame arrives at the platform's grade book, sent by the
passback sender over real HTTP with the tool's client assertion: part of the work (the right
reading: 1 of 12, Pending), and the whole lesson walked in the frame through the gate (the six
numbers, the reading, four row predictions, the best row played: 12 of 12, FullyGraded).

The platform here is written for the test (its storage, its auth endpoint); its id_tokens
are signed with a real RSA key whose set the tool fetches over real HTTP."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator

import pytest
from playwright.sync_api import FrameLocator, Page, Playwright, expect
from sqlalchemy import update

from chromium import (
    ACTION_TIMEOUT_MS,
    CHROMIUM_ARGS,
    chromium_pid,
    close_in_time,
    killed_after,
    launch_chromium,
)
from lesson_answers import LESSON, RIGHT_NUMBERS, RIGHT_READING_CHOICE
from lti_browser_sites import SITES_ARGS, Received, Sites, serve_sites
from lti_platform import GradeBook, grade_book_server, unique_sub
from normdive.lti import tool_keys
from normdive.lti.passback import Sender
from normdive.lti.tool_config import LAUNCH_PATH, LOGIN_PATH
from normdive.store.db import make_engine
from normdive.store.tables import LtiRegistration
from normdive.web.routes.lti import STATE_COOKIE_PREFIX

pytestmark = pytest.mark.browser

# One renderer for both sites. With a process per site, the frame swaps process at each hop
# (tool, platform, tool) and Playwright must re-attach to it each time; on busy cores it lost the
# frame mid-swap: the tool served the lesson, Playwright never saw the frame get there, and a
# wait on it outlived its own timeout. Cookies and storage are decided per site, not per
# process, so what these tests check is the same.
ONE_RENDERER = "--disable-site-isolation-trials"
BROWSER_ARGS = [*CHROMIUM_ARGS, *SITES_ARGS, ONE_RENDERER]
# How long a stopped Chromium's close is given: short, since it never answers.
STOPPED_CLOSE_TIMEOUT_S = 1.0
# How long one test may drive its Chromium before it is killed. A test here takes seconds, tens
# of them on two busy cores; Playwright bounds its actions and assertions, but not every wait
# inside one (a frame whose context never comes), so this ends those before pytest-timeout.
TEST_BOUND_S = 120.0


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    with serve_sites(tmp_path_factory.mktemp("lti-browser")) as served:
        yield served


@pytest.fixture(scope="module", autouse=True)
def expect_as_long_as_an_action() -> Iterator[None]:
    """expect() waits as long as an action does: a launch here walks five answers across two
    sites, longer than expect's own 5 s on two busy cores."""
    expect.set_options(timeout=ACTION_TIMEOUT_MS)
    yield
    expect.set_options(timeout=None)


@pytest.fixture
def course_page(playwright_driver: Playwright, sites: Sites) -> Iterator[Page]:
    """A Chromium of its own (a new learner), killed past TEST_BOUND_S; and the tool's record
    of what it received started afresh."""
    sites.tool_gate.forget()
    chromium = launch_chromium(playwright_driver, BROWSER_ARGS)
    errors: list[str] = []
    navigations: list[str] = []
    with killed_after(chromium, TEST_BOUND_S) as killed:
        page = chromium.new_context(ignore_https_errors=True).new_page()
        page.set_default_timeout(ACTION_TIMEOUT_MS)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        yield page
    sites.tool_gate.strip_login_cookies = False
    close_in_time(chromium)
    if killed.is_set():
        received = [(seen.method, seen.path, seen.status) for seen in sites.tool_gate.received()]
        pytest.fail(
            f"Chromium was killed after {TEST_BOUND_S} s; frames went to {navigations}; "
            f"the tool answered {received}"
        )
    assert errors == []


def _received(sites: Sites, path: str) -> list[Received]:
    return [seen for seen in sites.tool_gate.received() if seen.path == path]


def _state_cookies(seen: Received) -> list[str]:
    return [name for name in seen.cookies if name.startswith(STATE_COOKIE_PREFIX)]


def _work_in_the_frame(frame: FrameLocator) -> None:
    expect(frame.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    frame.get_by_role("radio", name="Residual connections").check()
    frame.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(frame.locator("#committed-prediction")).to_have_text("Residual connections")


def test_third_party_cookies_are_blocked_in_this_browser(sites: Sites, course_page: Page) -> None:
    # The control: an unpartitioned SameSite=None cookie of the tool's site reaches the tool
    # first-party, and not when the platform frames that site.
    sites.platform.storage = False
    sites.platform.subject = unique_sub()
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
    course_page.goto(f"{sites.tool}/")
    [first_party] = _received(sites, "/")
    assert "unpartitioned" in first_party.cookies
    sites.tool_gate.forget()
    course_page.goto(f"{sites.platform.origin}/course")
    frame = course_page.frame_locator("iframe")
    expect(frame.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    framed = sites.tool_gate.received()
    assert {LOGIN_PATH, LAUNCH_PATH} <= {seen.path for seen in framed}
    assert [seen for seen in framed if "unpartitioned" in seen.cookies] == []


def test_framed_with_the_partitioned_login_cookie(sites: Sites, course_page: Page) -> None:
    sites.platform.storage = False
    sites.platform.subject = unique_sub()
    course_page.goto(f"{sites.platform.origin}/course")
    _work_in_the_frame(course_page.frame_locator("iframe"))
    # The launch came back with the login's cookie, and signed the learner in at once.
    [launch] = _received(sites, LAUNCH_PATH)
    assert launch.status == 303
    assert len(_state_cookies(launch)) == 1


def test_framed_with_no_cookie_the_platform_storage_carries_the_login(
    sites: Sites, course_page: Page
) -> None:
    sites.platform.storage = True
    sites.platform.subject = unique_sub()
    # The login's answer keeps none of its cookies, as in a browser that keeps no
    # third-party cookie at all: only the platform's storage can carry the login.
    sites.tool_gate.strip_login_cookies = True
    course_page.goto(f"{sites.platform.origin}/course")
    _work_in_the_frame(course_page.frame_locator("iframe"))
    launches = _received(sites, LAUNCH_PATH)
    # No launch brought the login's cookie back: the first answered with the page reading the
    # storage, the second (with the storage's secret) signed in.
    assert [_state_cookies(launch) for launch in launches] == [[], []]
    assert [launch.status for launch in launches] == [200, 303]


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


def test_a_browser_that_stops_answering_is_killed_at_teardown(
    playwright_driver: Playwright,
) -> None:
    # A stopped Chromium (SIGSTOP) answers nothing: Playwright's close, which has no timeout,
    # would wait for it for ever.
    chromium = launch_chromium(playwright_driver, CHROMIUM_ARGS)
    context = chromium.new_context()
    os.kill(chromium_pid(chromium), signal.SIGSTOP)
    with pytest.raises(pytest.fail.Exception, match="did not close"):
        close_in_time(context, STOPPED_CLOSE_TIMEOUT_S)
    assert not chromium.is_connected()
    close_in_time(chromium)
