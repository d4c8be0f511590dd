"""Course rosters refreshed on threads of their own (web.infrastructure.roster_refreshes): each
course once at a time, at most so many at once, at most so many waiting, and a refresh that
raises costs only its course.

And the reason for them, over real HTTP: a platform whose roster pages trickle a byte a
second, from eight courses whose staff launch at once, against the app served by uvicorn with
its four request threads. The launches, the lesson and /healthz are answered while the pages
trickle; the rosters are fetched on ROSTER_THREADS threads, and stored once the platform sends
them."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import select

from helpers import SettingsFactory
from live_server import LiveServer
from lti_platform import (
    INSTRUCTOR_ROLE,
    LEARNER_ROLE,
    TOOL_ORIGIN,
    KeySetServer,
    RosterBook,
    authorization,
    launch_claims,
    login_params,
    register_platform,
    roster_server,
    signed,
)
from normdive.lti import roster
from normdive.lti.launch import NRPS_CLAIM
from normdive.store.tables import LtiRosterService
from normdive.web.app import REQUEST_THREADS, create_app
from normdive.web.infrastructure.roster_refreshes import (
    ROSTER_THREADS,
    ROSTER_WAITING,
    RosterRefreshes,
)
from normdive.web.infrastructure.services import Services
from normdive.web.routes.lti import STATE_COOKIE_PREFIX

# Generous: nothing here should take more than a fraction of it.
WAIT_S = 30.0


class Blocking:
    """A refresh that waits until `released`, counting the courses it was given and how many
    ran at once."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.changed = threading.Condition()
        self.courses: list[str] = []
        self.running = 0
        self.most_at_once = 0

    def __call__(self, course: str) -> None:
        with self.changed:
            self.courses.append(course)
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.changed.notify_all()
        self.released.wait(WAIT_S)
        with self.changed:
            self.running -= 1

    def wait_running(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.running == count, timeout=WAIT_S)


@pytest.fixture
def blocking() -> Iterator[Blocking]:
    refresh = Blocking()
    yield refresh
    refresh.released.set()


def test_a_course_asked_for_while_it_is_refreshed_is_refreshed_once(blocking: Blocking) -> None:
    refreshes = RosterRefreshes(blocking)
    assert refreshes.ask("course-a")
    assert blocking.wait_running(1)
    assert refreshes.ask("course-a")  # taken care of: not queued again
    blocking.released.set()
    assert refreshes.wait_until_idle(WAIT_S)
    assert blocking.courses == ["course-a"]
    # Once done, it may be asked for again.
    assert refreshes.ask("course-a") and refreshes.wait_until_idle(WAIT_S)
    assert blocking.courses == ["course-a", "course-a"]


def test_at_most_so_many_courses_are_refreshed_at_once(blocking: Blocking) -> None:
    refreshes = RosterRefreshes(blocking, threads=2)
    courses = [f"course-{number}" for number in range(5)]
    assert all(refreshes.ask(course) for course in courses)
    assert blocking.wait_running(2)
    assert not refreshes.wait_until_idle(0.05)
    blocking.released.set()
    assert refreshes.wait_until_idle(WAIT_S)
    assert sorted(blocking.courses) == courses
    assert blocking.most_at_once == 2


def test_past_so_many_courses_waiting_an_ask_is_dropped(
    blocking: Blocking, caplog: pytest.LogCaptureFixture
) -> None:
    refreshes = RosterRefreshes(blocking, threads=1, waiting=2)
    assert refreshes.ask("running")
    assert blocking.wait_running(1)
    assert refreshes.ask("waiting-1") and refreshes.ask("waiting-2")
    assert not refreshes.ask("dropped")
    assert "roster of course dropped not fetched: 2 courses wait" in caplog.text
    blocking.released.set()
    assert refreshes.wait_until_idle(WAIT_S)
    assert blocking.courses == ["running", "waiting-1", "waiting-2"]


def test_a_refresh_that_raises_costs_only_its_course(caplog: pytest.LogCaptureFixture) -> None:
    done: list[str] = []

    def refresh(course: str) -> None:
        if course == "broken":
            raise RuntimeError("a bug in one course's refresh")
        if course == "locked":
            raise sqlite3.OperationalError("database is locked")
        done.append(course)

    refreshes = RosterRefreshes(refresh, threads=1)
    with caplog.at_level(logging.WARNING):
        assert all(refreshes.ask(course) for course in ("broken", "locked", "fine"))
        assert refreshes.wait_until_idle(WAIT_S)
    assert done == ["fine"]
    assert "roster of course broken: the refresh failed" in caplog.text
    assert "a bug in one course's refresh" in caplog.text
    # A failing database, as a request's: one line, no traceback.
    [locked] = [record for record in caplog.records if "course locked" in record.getMessage()]
    assert locked.getMessage() == (
        "roster of course locked not refreshed: the database failed: database is locked"
    )
    assert locked.exc_info is None


# --- a platform trickling its rosters, over real HTTP -----------------------------------------

# Courses whose staff launch while their platform trickles: twice the request threads.
COURSES = 2 * REQUEST_THREADS
# The platform: a byte a second, so a page of a few hundred bytes takes minutes.
TRICKLE_S = 1.0
# One request's patience: generous, and far shorter than any trickled page.
REQUEST_TIMEOUT_S = 20.0


def _staff_launch(http: httpx.Client, key: RSAKey, book: RosterBook, course: str) -> None:
    """A teacher of `course` launches D9 over HTTP: the login, then the launch it asked for,
    with the login's state cookie (sent by hand: the server is reached over http, and the
    cookie is Secure)."""
    asked = http.get("/lti/login", params=login_params())
    assert asked.status_code == 303, asked.text
    state = authorization(asked.headers["location"])
    claims = launch_claims(
        state.nonce,
        sub=f"teacher-of-{course}",
        lti_roles=[INSTRUCTOR_ROLE],
        lti_context={"id": course, "title": course},
        **{NRPS_CLAIM: {"context_memberships_url": f"{book.base}/memberships?context={course}"}},
    )
    launched = http.post(
        "/lti/launch",
        data={"id_token": signed(claims, key), "state": state.state},
        headers={"Cookie": f"{STATE_COOKIE_PREFIX}{state.state}={state.state}"},
    )
    assert launched.status_code == 303, launched.text


def test_rosters_trickling_from_eight_courses_hold_no_learner(
    make_settings: SettingsFactory, tmp_path: Path, jwks: KeySetServer, platform_key: RSAKey
) -> None:
    settings = make_settings(public_origin=TOOL_ORIGIN)
    app = create_app(settings)
    svc: Services = app.state.services
    members = [{"user_id": f"learner-{n}", "roles": [LEARNER_ROLE]} for n in range(3)]
    book = RosterBook(members=members, trickle_s=TRICKLE_S)
    with (
        roster_server(book),
        LiveServer(app) as server,
        httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http,
    ):
        register_platform(svc.engine, jwks.url, token_url=book.token_url)
        book.tool_key_set = http.get("/lti/jwks").json()
        courses = [f"course-{number}" for number in range(COURSES)]
        for course in courses:
            _staff_launch(http, platform_key, book, course)
        # The first courses' pages trickle, one on each roster thread; the rest wait.
        deadline = time.monotonic() + WAIT_S
        while len(book.pages_served) < ROSTER_THREADS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(book.pages_served) == ROSTER_THREADS
        # Meanwhile the lesson, /healthz and another launch are answered.
        assert http.get("/healthz").status_code == 200
        lesson = http.get("/")
        assert lesson.status_code == 200 and "normdive_learner" in lesson.headers["set-cookie"]
        _staff_launch(http, platform_key, book, courses[0])  # its refresh is under way
        assert len(book.pages_served) == ROSTER_THREADS
        # Once the platform sends the pages, every course's roster is stored, each once.
        book.released.set()
        assert svc.rosters.wait_until_idle(WAIT_S)
    assert book.tokens_issued == COURSES
    with svc.engine.connect() as connection:
        keys = connection.execute(select(LtiRosterService.context_key)).scalars().all()
    fetched = [roster.roster_of(svc.engine, key) for key in keys]
    assert len(fetched) == COURSES
    assert all(kept is not None and kept.enrolled == len(members) for kept in fetched)


def test_readme_says_how_many_threads_fetch_rosters() -> None:
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert (
        f"Beside its {REQUEST_THREADS} request threads, each worker fetches course rosters "
        f"(LTI, below) on {ROSTER_THREADS} threads of its own" in readme
    )
    assert f"with at most {ROSTER_WAITING} courses waiting" in readme
    assert f"(up to its {roster.ROSTER_DEADLINE_S:g} s deadline)" in readme
