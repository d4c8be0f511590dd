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
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from joserfc.jwk import RSAKey
from lti1p3platform.membership import Context
from lti1p3platform.registration import Registration as PlatformRegistration
from lti1p3platform.request import Request as PlatformRequest
from lti1p3platform.response import generate_next_link
from lti1p3platform.service_connector import NamesRoleProvisioningService
from sqlalchemy import Engine, event, select
from sqlalchemy.engine import ExceptionContext, make_url
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import UNREACHED_LIMIT, SettingsFactory
from independent_platform import Login, MessageLaunch, PlatformConfig, pem_pair
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    INSTRUCTOR_ROLE,
    ISSUER,
    LAUNCH_URL,
    LEARNER_ROLE,
    MEMBERSHIPS_SCOPE,
    TOOL_ORIGIN,
    KeySetServer,
    RosterBook,
    browser,
    launch,
    launch_claims,
    login,
    register_platform,
    roster_server,
    serving,
    signed,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lti import roster
from normdive.lti.launch import NRPS_CLAIM
from normdive.lti.roster import Bounds
from normdive.store.tables import LtiRosterMember, LtiRosterService
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.infrastructure.services import Services
from normdive.web.views.instructor_report import ROSTER_COLUMNS

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
def busy_timeout_s() -> float | None:
    """SQLite's busy timeout on the app's database, where a test sets one (parametrize)."""
    return None


@pytest.fixture
def settings(
    make_settings: SettingsFactory, database_url: str, busy_timeout_s: float | None
) -> Settings:
    url = database_url if busy_timeout_s is None else f"{database_url}?timeout={busy_timeout_s}"
    # A learner here may write as often as a test has them (the limit's own tests set it).
    return make_settings(
        dev_prerequisite_done=False, DATABASE_URL=url, attempts_per_minute=UNREACHED_LIMIT
    )


@pytest.fixture
def book(app: Starlette, engine: Engine, jwks: KeySetServer) -> Iterator[RosterBook]:
    with roster_server(RosterBook(members=[dict(m) for m in MEMBERS])) as served:
        with browser(app) as client:
            register_platform(engine, jwks.url, token_url=served.token_url)
            served.tool_key_set = client.get("/lti/jwks").json()
        yield served


LaunchAs = Callable[..., TestClient]
# How long the roster threads may take to finish what launches asked for: generous.
SETTLE_TIMEOUT_S = 60.0


def settled(app: Starlette) -> None:
    """Once the roster threads have refreshed every course asked for (a staff launch asks for
    its course's roster, fetched on a thread of its own)."""
    svc: Services = app.state.services
    assert svc.rosters.wait_until_idle(SETTLE_TIMEOUT_S)


@pytest.fixture
def launch_as(app: Starlette, book: RosterBook, platform_key: RSAKey) -> Iterator[LaunchAs]:
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
        settled(app)
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


def test_a_roster_service_on_another_origin_gets_no_token(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    elsewhere = {"context_memberships_url": "https://elsewhere.example/memberships"}
    launch_as("teacher-1", INSTRUCTOR_ROLE, **{NRPS_CLAIM: elsewhere})
    assert book.tokens_issued == 0
    assert roster.roster_of(engine, course_key(engine)) is None
    with engine.connect() as connection:
        problem = connection.execute(select(LtiRosterService.problem)).scalar_one()
    assert problem is not None
    assert problem.startswith("the course's roster service is on https://elsewhere.example")
    assert "D9 sends no token there" in problem


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
    # A byte every 50 ms: a page of a few hundred bytes would take many seconds. The deadline
    # leaves the token (a signed assertion, on two busy cores) time to come first.
    book.trickle_s = 0.05
    problem = refused_with(engine, fetched, bounds=Bounds(deadline_s=2.0))
    assert "did not answer within 2 s" in problem
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
    # Four active learners; the two who launched opened the lesson (the teacher is staff).
    assert bars[0] == ("Enrolled", "4")
    assert bars[1] == ("Opened the lesson", "2")
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
    # The learner launched (the teacher too, but staff are no row); four never did.
    assert len(launched) == 1
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


# The same course against a platform we did not write: lti1p3platform's token endpoint (which
# verifies the tool's client assertion) and its NamesRoleProvisioningService (which checks
# the token's scope and pages by the tool's `limit`), over real HTTP. The library leaves two
# things to its web framework's adapter, written here as its Django adapter does them:
# reading the request (the query's numbers as numbers) and answering (`next` as a Link header).


class IndependentRoster(NamesRoleProvisioningService):
    members: ClassVar[list[dict[str, Any]]] = []

    def get_member_data_page(
        self,
        page: int = 1,
        limit: int | None = None,
        role: str | None = None,
        since: str | None = None,
    ) -> Any:
        wanted = {role, role.rpartition("#")[2]} if role else set()
        listed = [m for m in self.members if not role or wanted & set(m["roles"])]
        size = limit or len(listed)
        start = (page - 1) * size
        return {
            "content": [dict(m) for m in listed[start : start + size]],
            "has_next": start + size < len(listed),
        }

    def get_context_by_id(self) -> Context:
        return Context(id="course-1", label="ML", title="Learn machine learning")


class AdaptedRequest(PlatformRequest):
    def build_metadata(self, request: Any) -> Any:
        handler: BaseHTTPRequestHandler = request
        query = {k: v[0] for k, v in parse_qs(urlsplit(handler.path).query).items()}
        for number in ("page", "limit"):
            if number in query:
                query[number] = int(query[number])
        return {
            "method": handler.command,
            "get_data": query,
            "form_data": {},
            "headers": dict(handler.headers.items()),
            "content_type": handler.headers.get("Content-Type"),
            "path": urlsplit(handler.path).path,
            "json": None,
        }


@dataclass
class IndependentPlatform:
    config: PlatformConfig
    registration: PlatformRegistration
    base: str = ""
    pages: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def memberships_url(self) -> str:
        return f"{self.base}/memberships"


@pytest.fixture
def independent(app: Starlette, engine: Engine) -> Iterator[IndependentPlatform]:
    private, public = pem_pair()
    registration = (
        PlatformRegistration()
        .set_iss(ISSUER)
        .set_client_id(CLIENT_ID)
        .set_deployment_id(DEPLOYMENT_ID)
        .set_oidc_login_url(f"{TOOL_ORIGIN}/lti/login")
        .set_launch_url(LAUNCH_URL)
        .set_platform_private_key(private)
        .set_platform_public_key(public)
    )
    served = IndependentPlatform(PlatformConfig(registration=registration), registration)
    served.config.get_registration()
    IndependentRoster.members = [dict(m) for m in MEMBERS]

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            sent = {"Content-Type": "application/json", **(headers or {})}
            self.send_response(status)
            for name, value in sent.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if urlsplit(self.path).path == "/jwks":
                self._json(200, served.config.get_jwks())
                return
            served.pages.append(self.path)
            service = IndependentRoster(AdaptedRequest(self), served.config, served.memberships_url)
            answer = service.handle_resp(service.handle_get_members)
            headers = {"Content-Type": answer.media_type}
            if answer.result and answer.result.get("next"):
                headers["Link"] = generate_next_link(answer.result["next"])
            if answer.code != 200:
                served.errors.append(f"{answer.code}: {answer.message}")
            self._json(answer.code, answer.result or {"error": answer.message}, headers)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
            form = {k: v[0] for k, v in parse_qs(raw).items()}
            try:
                self._json(200, served.config.get_access_token(form))
            except Exception as error:  # the platform's refusal, kept for the test to show
                served.errors.append(f"token: {type(error).__name__}: {error}")
                self._json(400, {"error": str(error)})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        register_platform(engine, f"{served.base}/jwks", token_url=f"{served.base}/token")
        with browser(app) as client:
            registration.set_tool_key_set(client.get("/lti/jwks").json())
        yield served


def test_the_roster_from_an_independent_platform(
    app: Starlette, engine: Engine, independent: IndependentPlatform
) -> None:
    with browser(app) as client:
        login = Login(None, independent.config)
        login.set_lti_message_hint(hint="resource-link-1")
        answer = client.get(login.initiate_login("teacher-1"))
        assert answer.status_code == 303, answer.text
        query = parse_qs(urlsplit(answer.headers["location"]).query)
        launch_message = MessageLaunch({k: v[0] for k, v in query.items()}, independent.config)
        launch_message.set_user_data("teacher-1", [INSTRUCTOR_ROLE], full_name="Tess Teacher")
        launch_message.set_launch_context_claim("course-1", context_title="Learn ML")
        launch_message.set_resource_link_claim("resource-link-1", title="D9")
        launch_message.set_nrps(context_memberships_url=independent.memberships_url)
        data = launch_message.lti_launch()
        launched = client.post(
            "/lti/launch", data={"id_token": data["id_token"], "state": data["state"]}
        )
        assert launched.status_code == 303, launched.text
    settled(app)
    # The staff launch fetched it, one page of learners (the role filter).
    assert independent.errors == []
    assert len(independent.pages) == 1
    assert len(stored(engine)) == 5
    # Two a page, as the tool asks: three pages, followed by the platform's Link headers.
    independent.pages.clear()
    done = refresh(engine, bounds=Bounds(members_per_page=2))
    assert (done.members, done.problem) == (5, None), independent.errors
    assert len(independent.pages) == 3
    assert all("limit=2" in path for path in independent.pages)
    kept = roster.roster_of(engine, course_key(engine))
    assert kept is not None
    assert sorted(m.label for m in kept.members if m.name) == ["Ada Lovelace", "Grace Hopper"]


# What the platform sends that is stored, and no database stores as sent: a NUL (PostgreSQL
# refuses it in any text), other control characters, a lone surrogate (JSON carries one as
# \ud800; neither database encodes it), a role with a NUL or a space (roles are stored parted
# by spaces).
UNSTORABLE: list[dict[str, Any]] = [
    {
        "user_id": "learner-nul",
        "roles": [LEARNER_ROLE, "urn:lti:role:x\x00y"],
        "name": "Nu\x00ll Name",
        "email": "nul\x00@school.example",
    },
    {"user_id": "learner-lone", "roles": [LEARNER_ROLE, "two words"], "name": "Lone \ud800 Half"},
    {"user_id": "learner-\x00-\ud800", "roles": [LEARNER_ROLE], "name": "Tab\tand\nnewline\x07"},
]


@pytest.mark.both_databases
def test_texts_no_database_stores_are_stored_without_them_and_the_rest_kept(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    book.members.extend(dict(m) for m in UNSTORABLE)
    launch_as("learner-2")
    done = refresh(engine)
    assert (done.members, done.problem) == (8, None)
    kept = roster.roster_of(engine, course_key(engine))
    assert kept is not None and kept.problem is None
    assert sorted(m.name for m in kept.members if m.name) == [
        "Ada Lovelace",
        "Grace Hopper",
        "Lone  Half",
        "Null Name",
        "Tab and newline",
    ]
    assert "nul@school.example" in {m.email for m in kept.members}
    by_name = {m.name: m.roles for m in kept.members}
    assert by_name["Null Name"] == (LEARNER_ROLE,)
    assert by_name["Lone  Half"] == (LEARNER_ROLE,)


@pytest.mark.both_databases
def test_a_memberships_url_no_database_stores_is_not_kept(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    named = {"context_memberships_url": f"{book.memberships_url}\x00"}
    launch_as("teacher-1", INSTRUCTOR_ROLE, **{NRPS_CLAIM: named})  # answered, not a 503
    with engine.connect() as connection:
        assert connection.execute(select(LtiRosterService.context_key)).all() == []
    assert book.tokens_issued == 0


@pytest.mark.parametrize("busy_timeout_s", [0.2])
def test_a_roster_the_database_refused_to_store_is_a_problem_and_tried_again(
    app: Starlette, engine: Engine, book: RosterBook, launch_as: LaunchAs, settings: Settings
) -> None:
    """The write lock held past the busy timeout while the roster is stored: nothing is
    stored, the problem says why, and the next refresh, within the interval, tries again."""
    launch_as("learner-2")  # the course's service is known; nothing fetched yet
    database = make_url(settings.database_url).database
    assert database
    holder = sqlite3.connect(database, check_same_thread=False, isolation_level=None)
    # The lock taken as the platform sends the roster (the refresh has claimed the course),
    # and let go once the store has been refused, so that the refusal can be recorded.
    book.on_page = lambda: holder.in_transaction or holder.execute("BEGIN IMMEDIATE")

    def let_go(context: ExceptionContext) -> None:
        if holder.in_transaction:
            holder.execute("ROLLBACK")

    svc: Services = app.state.services
    event.listen(svc.engine, "handle_error", let_go)
    try:
        done = roster.refresh(svc.engine, course_key(engine), keep_names=True, interval_s=3600.0)
    finally:
        event.remove(svc.engine, "handle_error", let_go)
        book.on_page = None
        holder.close()
    assert done.members is None
    assert "the platform sent 5 learner(s), but the database refused to store them" in str(
        done.problem
    )
    assert "database is locked" in str(done.problem)
    with engine.connect() as connection:
        service = connection.execute(
            select(
                LtiRosterService.fetched_at,
                LtiRosterService.problem,
                LtiRosterService.refresh_started_at,
            )
        ).one()
    assert service.fetched_at is None and service.problem == done.problem
    assert service.refresh_started_at is None  # given up: the next launch tries again
    assert roster.roster_of(engine, course_key(engine)) is None
    # Within the interval, the next try fetches it again.
    env = {
        "DATABASE_URL": settings.database_url,
        "NORMDIVE_SECRET_KEY": settings.secret_key.get_secret_value(),
        "NORMDIVE_ROSTER_REFRESH_S": "3600",
    }
    again = CliRunner().invoke(cli, ["lti", "roster", "--context", course_key(engine)], env=env)
    assert again.exit_code == 0, again.output
    assert "The roster lists 5 learner(s)" in again.output
    kept = roster.roster_of(engine, course_key(engine))
    assert kept is not None and kept.problem is None and len(kept.members) == 5


def test_a_refresh_that_stored_nothing_is_not_said_to_be_done(
    engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    launch_as("learner-2")
    book.token_refusal = "client disabled"
    failed = refresh(engine, force=False, interval_s=3600.0)
    assert failed.members is None and "client disabled" in str(failed.problem)
    busy = refresh(engine, force=False, interval_s=3600.0)
    assert busy.members is None
    assert "refreshed at" not in str(busy.problem)
    assert "less than 3600 s ago, and has stored nothing: it is under way, or failed" in str(
        busy.problem
    )
    assert "the last problem recorded: the platform refused the token" in str(busy.problem)


# A roster as large as a learner's write may wait for, on a disk slow enough to show it: each
# member row SLOW_ROW_S to write. Stored in one transaction it would hold the write lock
# MANY_MEMBERS * SLOW_ROW_S = 2 s, twice a learner's busy timeout here.
MANY_MEMBERS = 10_000
SLOW_ROW_S = 0.0002
LEARNER_BUSY_TIMEOUT_S = 1.0


@pytest.mark.parametrize("busy_timeout_s", [LEARNER_BUSY_TIMEOUT_S])
def test_a_large_roster_costs_no_learner_a_write(
    app: Starlette, engine: Engine, book: RosterBook, launch_as: LaunchAs
) -> None:
    learner = launch_as("learner-1")
    token = learner.get("/api/state").json()["csrf_token"]
    book.members = [
        {"user_id": f"member-{number}", "roles": [LEARNER_ROLE]} for number in range(MANY_MEMBERS)
    ]
    book.page_size = 2_000
    svc: Services = app.state.services

    def slow_disk(
        _connection: Any,
        _cursor: Any,
        statement: str,
        parameters: Any,
        _context: Any,
        executemany: bool,
    ) -> None:
        if statement.startswith("INSERT INTO lti_roster_members"):
            time.sleep(SLOW_ROW_S * (len(parameters) if executemany else 1))

    stored_roster: list[roster.Refreshed] = []
    event.listen(svc.engine, "before_cursor_execute", slow_disk)
    try:
        refreshing = threading.Thread(
            target=lambda: stored_roster.append(
                roster.refresh(svc.engine, course_key(engine), keep_names=True, interval_s=0.0)
            )
        )
        refreshing.start()
        statuses: list[int] = []
        while refreshing.is_alive():
            answer = learner.post(
                "/takeaway",
                data={"text": f"written while the roster is stored ({len(statuses)})"},
                headers={"Accept": "application/json", "X-CSRF-Token": token},
            )
            statuses.append(answer.status_code)
        refreshing.join()
    finally:
        event.remove(svc.engine, "before_cursor_execute", slow_disk)
    assert stored_roster == [roster.Refreshed(MANY_MEMBERS)]
    assert statuses and set(statuses) == {200}, statuses
    kept = roster.roster_of(engine, course_key(engine))
    assert kept is not None and len(kept.members) == MANY_MEMBERS


def test_readme_says_how_a_roster_is_stored() -> None:
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert (
        f"A course roster is stored {roster.STORE_BATCH_ROWS:,} members a transaction, with a "
        f"pause of {roster.SQLITE_BATCH_PAUSE_S:g} s between two on SQLite" in readme
    )
