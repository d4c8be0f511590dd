"""A course's roster (LTI Names and Role Provisioning Services 2.0) against a platform served
over real HTTP (tests/lti_platform.py's RosterBook: its token endpoint verifies the tool's
client assertion with the tool's own key set from /lti/jwks; its memberships answer two
members a page with Link rel="next").

A staff launch with the service's claim fetches the roster after its answer, page after
page, learners only; a learner's launch keeps the service and fetches nothing; a refresh
happens at most once per interval; names are kept only when the operator keeps them; each
refusal (the token refused, a next page elsewhere, too many pages, a page too large, a
platform too slow) keeps the roster as it was and says why. The instructor view counts from
the roster, lists who has not opened D9, and the CSV gains their rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi import FastAPI
from fastapi.testclient import TestClient
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from conftest import SettingsFactory
from lti_platform import (
    INSTRUCTOR_ROLE,
    LEARNER_ROLE,
    MEMBERSHIPS_SCOPE,
    KeySetServer,
    RosterBook,
    browser,
    launch,
    launch_claims,
    login,
    register_platform,
    roster_server,
    signed,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lti import roster
from normdive.lti.launch import NRPS_CLAIM
from normdive.lti.roster import Bounds
from normdive.store.tables import LtiRosterMember, LtiRosterService
from normdive.web.identity import COOKIE_NAME
from normdive.web.instructor_report import ROSTER_COLUMNS

# Five learners (one inactive) and an instructor, the first two with names and emails.
MEMBERS: list[dict[str, Any]] = [
    {
        "user_id": "learner-1",
        "roles": [LEARNER_ROLE],
        "status": "Active",
        "name": "Ada Lovelace",
        "email": "ada@school.example",
    },
    {"user_id": "learner-2", "roles": [LEARNER_ROLE], "name": "Grace Hopper"},
    {"user_id": "learner-3", "roles": [LEARNER_ROLE], "status": "Active"},
    {"user_id": "learner-4", "roles": [LEARNER_ROLE], "status": "Inactive"},
    {"user_id": "learner-5", "roles": ["Learner"]},
    {"user_id": "teacher-1", "roles": [INSTRUCTOR_ROLE], "name": "Tess Teacher"},
]


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def book(app: FastAPI, engine: Engine, jwks: KeySetServer) -> Iterator[RosterBook]:
    with roster_server(RosterBook(members=[dict(m) for m in MEMBERS])) as served:
        with browser(app) as client:
            register_platform(engine, jwks.url, token_url=served.token_url)
            served.tool_key_set = client.get("/lti/jwks").json()
        yield served


LaunchAs = Callable[..., TestClient]


@pytest.fixture
def launch_as(app: FastAPI, book: RosterBook, platform_key: RSAKey) -> Iterator[LaunchAs]:
    clients: list[TestClient] = []

    def launched(sub: str, role: str = LEARNER_ROLE, **claims: object) -> TestClient:
        client = browser(app).__enter__()
        clients.append(client)
        asked = login(client)
        claims.setdefault(NRPS_CLAIM, book.claim())
        token = signed(
            launch_claims(asked.nonce, sub=sub, lti_roles=[role], **claims), platform_key
        )
        response = launch(client, token, asked.state)
        assert response.status_code == 303, response.text
        return client

    yield launched
    for client in clients:
        client.__exit__(None, None, None)


def course_key(engine: Engine) -> str:
    with engine.connect() as connection:
        return str(connection.execute(select(LtiRosterService.context_key)).scalar_one())


def stored(engine: Engine) -> dict[str, tuple[str, str | None, str | None]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                LtiRosterMember.link_key,
                LtiRosterMember.status,
                LtiRosterMember.name,
                LtiRosterMember.email,
            )
        ).all()
    return {row.link_key: (row.status, row.name, row.email) for row in rows}


def refresh(engine: Engine, **overrides: Any) -> roster.Refreshed:
    arguments: dict[str, Any] = {"keep_names": True, "interval_s": 0.0, "force": True}
    arguments.update(overrides)
    return roster.refresh(engine, course_key(engine), **arguments)


def test_a_staff_launch_fetches_the_roster_two_members_a_page(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    launch_as("teacher-1", INSTRUCTOR_ROLE)
    # Learners only (the role filter), two a page: three pages for five learners.
    assert len(book.pages_served) == 3
    for path in book.pages_served:
        assert parse_qs(urlsplit(path).query)["role"] == [LEARNER_ROLE]
    assert book.scopes_asked == [MEMBERSHIPS_SCOPE]
    members = stored(engine)
    assert sorted(members.values(), key=repr) == sorted(
        [
            ("Active", "Ada Lovelace", "ada@school.example"),
            ("Active", "Grace Hopper", None),
            ("Active", None, None),
            ("Inactive", None, None),
            ("Active", None, None),
        ],
        key=repr,
    )


def test_a_learner_launch_keeps_the_service_and_fetches_nothing(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    launch_as("learner-1")
    assert book.pages_served == []
    assert roster.roster_of(engine, course_key(engine)) is None


def test_the_roster_is_fetched_at_most_once_per_interval(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    launch_as("teacher-1", INSTRUCTOR_ROLE)
    launch_as("teacher-1", INSTRUCTOR_ROLE)
    assert len(book.pages_served) == 3
    again = refresh(engine, force=False, interval_s=3600.0)
    assert again.members is None
    assert "less than 3600 s ago" in str(again.problem)
    assert refresh(engine).members == 5


def test_names_are_never_kept_when_the_operator_says_so(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    launch_as("teacher-1", INSTRUCTOR_ROLE)
    assert any(name for _, name, _ in stored(engine).values())
    assert refresh(engine, keep_names=False).members == 5
    assert all(name is None and email is None for _, name, email in stored(engine).values())


@pytest.fixture
def fetched(engine: Engine, book: RosterBook, launch_as: LaunchAs) -> dict[str, Any]:
    """A roster fetched whole, which each refusal below must leave as it was."""
    launch_as("teacher-1", INSTRUCTOR_ROLE)
    book.pages_served.clear()
    return stored(engine)


def refused_with(engine: Engine, fetched: dict[str, Any], **overrides: Any) -> str:
    done = refresh(engine, **overrides)
    assert done.members is None
    assert stored(engine) == fetched
    assert roster.roster_of(engine, course_key(engine)) is not None
    return str(done.problem)


def test_a_refused_token_keeps_the_roster_and_says_why(
    engine: Engine, book: RosterBook, fetched: dict[str, Any]
) -> None:
    book.token_refusal = "client disabled"
    problem = refused_with(engine, fetched)
    assert "the platform refused the token (400" in problem
    assert "client disabled" in problem
    assert book.pages_served == []
    shown = roster.roster_of(engine, course_key(engine))
    assert shown is not None and shown.problem == problem


def test_a_next_page_on_another_origin_gets_no_token(
    engine: Engine, book: RosterBook, fetched: dict[str, Any]
) -> None:
    # The same server under another name: a request there would be counted.
    book.next_origin = book.base.replace("127.0.0.1", "localhost")
    problem = refused_with(engine, fetched)
    assert "http://localhost:" in problem
    assert "D9 sends no token there" in problem
    assert len(book.pages_served) == 1


def test_a_roster_over_the_page_bound_is_not_kept(
    engine: Engine, book: RosterBook, fetched: dict[str, Any]
) -> None:
    problem = refused_with(engine, fetched, bounds=Bounds(max_pages=2))
    assert "over 2 pages" in problem
    assert len(book.pages_served) == 2


def test_a_page_over_the_byte_bound_is_not_read(
    engine: Engine, book: RosterBook, fetched: dict[str, Any]
) -> None:
    book.padding = 64 * 1024
    problem = refused_with(engine, fetched, bounds=Bounds(max_page_bytes=16 * 1024))
    assert "page 1 of the roster was over 16 KiB" in problem


def test_a_platform_trickling_its_pages_is_given_up_at_the_deadline(
    engine: Engine, book: RosterBook, fetched: dict[str, Any]
) -> None:
    # A byte every 50 ms: a page of a few hundred bytes would take many seconds.
    book.trickle_s = 0.05
    problem = refused_with(engine, fetched, bounds=Bounds(deadline_s=0.5))
    assert "did not answer within 0.5 s" in problem
    assert len(book.pages_served) == 1


def test_the_instructor_view_counts_from_the_roster(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    launch_as("learner-1")
    launch_as("learner-3")
    teacher = launch_as("teacher-1", INSTRUCTOR_ROLE)
    page = teacher.get("/instructor")
    assert page.status_code == 200, page.text
    soup = BeautifulSoup(page.text, "html.parser")
    funnel = soup.find("figure", attrs={"aria-labelledby": "funnel-caption"})
    assert funnel is not None
    bars = [
        (item.find(class_="bar-label").get_text(), item.find(class_="bar-value").get_text())
        for item in funnel.find_all("li")
    ]
    # Four active learners; the two who launched and the teacher opened the lesson.
    assert bars[0] == ("Enrolled", "4")
    assert bars[1] == ("Opened the lesson", "3")
    listed = soup.find("ul", class_="not-opened")
    assert listed is not None
    names = [item.get_text(" ", strip=True) for item in listed.find_all("li")]
    assert names[0] == "Grace Hopper"
    assert len(names) == 2 and names[1].startswith("member ")


def test_the_csv_gains_a_row_per_member_who_never_launched(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    learner = launch_as("learner-1")
    learner_id = str(learner.cookies.get(COOKIE_NAME)).split(".")[0]
    teacher = launch_as("teacher-1", INSTRUCTOR_ROLE)
    answer = teacher.get("/instructor/export.csv")
    assert answer.status_code == 200
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    header = next(csv.reader(io.StringIO(answer.text)))
    assert tuple(header[-len(ROSTER_COLUMNS) :]) == ROSTER_COLUMNS
    launched = [row for row in rows if row["learner"]]
    never = [row for row in rows if not row["learner"]]
    # The learner and the teacher launched; four learners on the roster never did.
    assert len(launched) == 2
    ada = next(row for row in launched if row["learner"] == learner_id)
    assert (ada["name"], ada["email"], ada["roster_status"]) == (
        "Ada Lovelace",
        "ada@school.example",
        "Active",
    )
    assert sorted(row["roster_status"] for row in never) == [
        "Active",
        "Active",
        "Active",
        "Inactive",
    ]
    assert all(row["opened_at"] == "" and row["roster_member"] for row in never)


def test_normdive_lti_roster_refreshes_one_course(
    engine: Engine, book: RosterBook, launch_as: LaunchAs, settings: Settings
) -> None:
    launch_as("learner-2")
    env = {
        "DATABASE_URL": settings.database_url,
        "NORMDIVE_SECRET_KEY": settings.secret_key.get_secret_value(),
        "NORMDIVE_ROSTER_REFRESH_S": "3600",
    }
    key = course_key(engine)
    first = CliRunner().invoke(cli, ["lti", "roster", "--context", key], env=env)
    assert first.exit_code == 0, first.output
    assert "The roster lists 5 learner(s)" in first.output
    again = CliRunner().invoke(cli, ["lti", "roster", "--context", key], env=env)
    assert again.exit_code == 1
    assert "less than 3600 s ago" in again.output
    forced = CliRunner().invoke(cli, ["lti", "roster", "--context", key, "--force"], env=env)
    assert forced.exit_code == 0, forced.output
    wrong = CliRunner().invoke(cli, ["lti", "roster", "--context", "nope"], env=env)
    assert wrong.exit_code == 1
    assert "is not a context key" in wrong.output
