"""Who reaches the instructor view: a course's staff launch (their own course only) and a
signed, expiring link from `normdive instructor-link`; a learner's cookie, a learner's launch,
a forged, mangled or expired link, a cookie signed for something else, and nobody at all are
refused with a readable 403."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from bs4 import BeautifulSoup
from itsdangerous import TimestampSigner, URLSafeTimedSerializer
from joserfc.jwk import RSAKey
from pydantic import SecretStr
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SECRET_KEY, SettingsFactory, client_factory
from lti_platform import (
    INSTRUCTOR_ROLE,
    TOOL_ORIGIN,
    KeySetServer,
    browser,
    key_set_server,
    launch,
    launch_claims,
    login,
    register_platform,
    signed,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lti.learners import latest_course
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.infrastructure.instructor_access import (
    COOKIE_SALT,
    INSTRUCTOR_COOKIE,
    LINK_EXPIRED,
    LINK_INVALID,
    LINK_SALT,
    NO_ACCESS,
    Pool,
    cookie_value,
    instructor_link,
)

TTL_S = 3600
COURSE_A = "course-a"
COURSE_B = "course-b"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(instructor_access_ttl_s=TTL_S)


@pytest.fixture
def jwks(platform_key: RSAKey, engine: Engine) -> Iterator[KeySetServer]:
    with key_set_server([platform_key]) as server:
        register_platform(engine, server.url)
        yield server


@pytest.fixture
def make_browser(app: Starlette) -> Iterator[Callable[[], TestClient]]:
    """Browsers on the tool's https origin (lti_platform.browser), each a learner of its own."""
    with client_factory(app, TestClient, base_url=TOOL_ORIGIN) as make:
        yield make


def launched(client: TestClient, key: RSAKey, **claims: object) -> str:
    asked = login(client)
    response = launch(client, signed(launch_claims(asked.nonce, **claims), key), asked.state)
    assert response.status_code == 303, response.text
    cookie = client.cookies.get(COOKIE_NAME)
    assert cookie is not None
    return cookie.split(".")[0]


def course_learner(
    client: TestClient, key: RSAKey, store: Store, course: str, takeaway: str
) -> str:
    learner = launched(client, key, sub=f"learner-{takeaway}", lti_context={"id": course})
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": takeaway})
    return learner


def refused(response: httpx.Response, message: str) -> None:
    assert response.status_code == 403
    assert "text/html" in response.headers["content-type"]
    assert message in BeautifulSoup(response.text, "html.parser").get_text()
    assert response.headers["cache-control"] == "no-store"


def test_nobody_is_refused_readably(client: TestClient) -> None:
    refused(client.get("/instructor"), NO_ACCESS)


def test_a_learners_cookie_is_refused(client: TestClient) -> None:
    assert client.get("/").status_code == 200
    assert client.cookies.get(COOKIE_NAME)
    refused(client.get("/instructor"), NO_ACCESS)


def test_a_learners_launch_is_refused(
    make_browser: Callable[[], TestClient], jwks: KeySetServer, platform_key: RSAKey
) -> None:
    client = make_browser()
    launched(client, platform_key)
    refused(client.get("/instructor"), NO_ACCESS)


def test_a_staff_launch_opens_its_own_course_only(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    store: Store,
    jwks: KeySetServer,
    platform_key: RSAKey,
) -> None:
    for text in ("alpha-one", "alpha-two"):
        course_learner(make_browser(), platform_key, store, COURSE_A, text)
    course_learner(make_browser(), platform_key, store, COURSE_B, "bravo-one")
    teacher = make_browser()
    asked = login(teacher)
    claims = launch_claims(
        asked.nonce, sub="teacher-a", lti_roles=[INSTRUCTOR_ROLE], lti_context={"id": COURSE_A}
    )
    landed = launch(teacher, signed(claims, platform_key), asked.state)
    assert landed.status_code == 303
    assert landed.headers["location"] == "/instructor"
    page = teacher.get("/instructor")
    assert page.status_code == 200, page.text
    # Two learners of course A (the teacher is staff, not a learner), none of course B.
    assert "2 learners" in page.text
    assert "alpha-one" in page.text and "alpha-two" in page.text
    assert "bravo-one" not in page.text
    # Course B's instructor sees B's and not A's.
    other = make_browser()
    launched(
        other,
        platform_key,
        sub="teacher-b",
        lti_roles=[INSTRUCTOR_ROLE],
        lti_context={"id": COURSE_B},
    )
    theirs = other.get("/instructor")
    assert "bravo-one" in theirs.text and "alpha-one" not in theirs.text
    # A course's cookie is good for that course: tampering with it to name another fails.
    course_a = latest_course(engine, teacher.cookies.get(COOKIE_NAME).split(".")[0])
    assert course_a is not None
    value = teacher.cookies.get(INSTRUCTOR_COOKIE)
    assert value is not None
    forged = value.replace(value[5], "A" if value[5] != "A" else "B", 1)
    with browser(teacher.app) as stranger:  # type: ignore[arg-type]
        stranger.cookies.set(INSTRUCTOR_COOKIE, forged, domain="tool.test", path="/instructor")
        refused(stranger.get("/instructor"), NO_ACCESS)


def test_a_learner_launch_after_a_staff_one_drops_the_view(
    make_browser: Callable[[], TestClient], jwks: KeySetServer, platform_key: RSAKey
) -> None:
    client = make_browser()
    launched(client, platform_key, lti_roles=[INSTRUCTOR_ROLE])
    assert client.get("/instructor").status_code == 200
    launched(client, platform_key, sub="someone-else")
    refused(client.get("/instructor"), NO_ACCESS)


def test_a_staff_launch_from_outside_any_course_opens_nothing(
    make_browser: Callable[[], TestClient], jwks: KeySetServer, platform_key: RSAKey
) -> None:
    client = make_browser()
    asked = login(client)
    claims = launch_claims(asked.nonce, lti_roles=[INSTRUCTOR_ROLE], lti_context=None)
    landed = launch(client, signed(claims, platform_key), asked.state)
    assert landed.headers["location"] == "/"
    refused(client.get("/instructor"), NO_ACCESS)


def link_from_cli(context: str | None = None) -> str:
    arguments = ["instructor-link", "--base-url", TOOL_ORIGIN]
    if context is not None:
        arguments += ["--context", context]
    result = CliRunner().invoke(cli, arguments, env={"NORMDIVE_SECRET_KEY": SECRET_KEY})
    assert result.exit_code == 0, result.output
    return result.output.strip()


def access_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["access"][0]


def test_the_operators_link_opens_the_anonymous_pool(client: TestClient, store: Store) -> None:
    learner = store.create_learner()
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "outside-any-lms"})
    url = link_from_cli()
    assert url.startswith(f"{TOOL_ORIGIN}/instructor?access=")
    followed = client.get("/instructor", params={"access": access_of(url)})
    assert followed.status_code == 303
    assert followed.headers["location"] == "/instructor"  # the token leaves the address bar
    page = client.get("/instructor")
    assert page.status_code == 200
    assert "outside-any-lms" in page.text


def test_a_link_for_a_course_opens_that_course(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    store: Store,
    jwks: KeySetServer,
    platform_key: RSAKey,
) -> None:
    learner = course_learner(make_browser(), platform_key, store, COURSE_A, "in-course-a")
    course_learner(make_browser(), platform_key, store, COURSE_B, "in-course-b")
    anonymous = store.create_learner()
    store.append(anonymous, EventKind.TAKEAWAY_SAVED, {"text": "anonymous-one"})
    key = latest_course(engine, learner)
    assert key is not None
    client = make_browser()
    client.get("/instructor", params={"access": access_of(link_from_cli(key))})
    page = client.get("/instructor")
    assert "in-course-a" in page.text
    assert "in-course-b" not in page.text and "anonymous-one" not in page.text


@pytest.mark.parametrize("context", ["course-a", "g" * 64, "a" * 63])
def test_the_link_command_refuses_a_context_that_is_not_a_key(context: str) -> None:
    result = CliRunner().invoke(
        cli,
        ["instructor-link", "--base-url", TOOL_ORIGIN, "--context", context],
        env={"NORMDIVE_SECRET_KEY": SECRET_KEY},
    )
    assert result.exit_code == 1
    assert "not a context key" in result.output


class _Past(TimestampSigner):
    """Signs as if it were TTL_S + 60 seconds ago."""

    def get_timestamp(self) -> int:
        return int(time.time()) - TTL_S - 60


def _token(secret: str, salt: str, payload: object, signer: type = TimestampSigner) -> str:
    serializer = URLSafeTimedSerializer(secret, salt=salt, signer=signer)
    return str(serializer.dumps(payload))


def test_an_expired_link_is_refused(client: TestClient) -> None:
    token = _token(SECRET_KEY, LINK_SALT, {"context": None}, _Past)
    refused(client.get("/instructor", params={"access": token}), LINK_EXPIRED)
    assert INSTRUCTOR_COOKIE not in client.cookies


@pytest.mark.parametrize(
    "token",
    [
        _token("another-secret-" + "f" * 32, LINK_SALT, {"context": None}),  # forged
        _token(SECRET_KEY, COOKIE_SALT, {"context": None}),  # the cookie's, not a link's
        _token(SECRET_KEY, LINK_SALT, {"context": "not-a-key"}),
        _token(SECRET_KEY, LINK_SALT, {"context": None, "admin": True}),
        _token(SECRET_KEY, LINK_SALT, ["context"]),
        "",
        "garbage",
    ],
    # Named, not by the tokens: those hold the time they were signed, and every test process
    # must collect the same ids.
    ids=["forged", "the-cookies", "not-a-key", "extra-claim", "not-an-object", "empty", "garbage"],
)
def test_a_forged_or_mangled_link_is_refused(client: TestClient, token: str) -> None:
    refused(client.get("/instructor", params={"access": token}), LINK_INVALID)
    assert INSTRUCTOR_COOKIE not in client.cookies


def test_a_cut_short_link_is_refused(client: TestClient) -> None:
    url = instructor_link(TOOL_ORIGIN, Pool(None), SecretStr(SECRET_KEY))
    refused(client.get("/instructor", params={"access": access_of(url)[:-3]}), LINK_INVALID)


@pytest.mark.parametrize(
    "value",
    [
        _token(SECRET_KEY, COOKIE_SALT, {"context": None}, _Past),  # expired
        _token(SECRET_KEY, LINK_SALT, {"context": None}),  # a link's token, not the cookie's
        _token("another-secret-" + "f" * 32, COOKIE_SALT, {"context": None}),
        "0" * 32,
    ],
    ids=["expired", "a-links", "forged", "not-a-token"],
)
def test_an_expired_or_foreign_cookie_is_refused(client: TestClient, value: str) -> None:
    client.cookies.set(INSTRUCTOR_COOKIE, value, path="/instructor")
    refused(client.get("/instructor"), NO_ACCESS)


def test_a_valid_cookie_opens_the_view(client: TestClient) -> None:
    client.cookies.set(
        INSTRUCTOR_COOKIE, cookie_value(Pool(None), SecretStr(SECRET_KEY)), path="/instructor"
    )
    assert client.get("/instructor").status_code == 200
