"""Dynamic registration: the URL `normdive lti invite` prints, opened by a platform (served
here over real HTTP: its OpenID configuration and its registration endpoint), stores the
registration; without a valid invitation, or with a platform that gets something wrong,
nothing is stored and the page says why."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from pydantic import SecretStr
from sqlalchemy import Engine, select
from starlette.applications import Starlette
from typer.testing import CliRunner

from helpers import SECRET_KEY, SettingsFactory
from lti_platform import (
    TOOL_ORIGIN,
    MovableClock,
    browser,
    new_key,
    serving,
    trickling_server,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lti import dynamic_registration
from normdive.lti.dynamic_registration import MAX_ANSWER_BYTES, invite_digest, invite_url
from normdive.lti.platform_json import MAX_JSON_DEPTH
from normdive.lti.registrations import (
    InviteUsed,
    all_registrations,
    invite_used,
    register,
    registrant_url_problem,
    validated,
)
from normdive.store.tables import LtiPlatformKeySet
from normdive.web.app import create_app

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"


# The platform's key, served as its key set at /jwks.
PLATFORM_KEY = new_key("platform-key-1")


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    """The platforms of these tests are on this machine (http://127.0.0.1), which a platform
    registering itself may name only with the development setting."""
    return make_settings(dev_lti_loopback=True)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> MovableClock:
    """The clock an invitation's retry interval is measured on, moved by the test."""
    moved = MovableClock()
    monkeypatch.setattr(dynamic_registration, "clock", moved)
    return moved


@dataclass
class RegisteringPlatform:
    base: str = ""
    issuer: str | None = None  # None: its own base
    registration_status: int = 201
    registrations: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Answered instead of the OpenID configuration, or the registration, when set.
    raw_configuration: bytes | None = None
    raw_registration: bytes | None = None

    @property
    def configuration_url(self) -> str:
        return f"{self.base}/.well-known/openid-configuration"


@pytest.fixture
def platform() -> Iterator[RegisteringPlatform]:
    served = RegisteringPlatform()

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: dict[str, Any], raw: bytes | None = None) -> None:
            data = json.dumps(body).encode() if raw is None else raw
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            # The tool stops reading an answer over its limit and closes the connection.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def do_GET(self) -> None:
            base = served.base
            if self.path == "/jwks":
                self._json(200, {"keys": [PLATFORM_KEY.as_dict(private=False)]})
                return
            if self.path != "/.well-known/openid-configuration":
                self._json(404, {})
                return
            self._json(
                200,
                {
                    "issuer": served.issuer or base,
                    "authorization_endpoint": f"{base}/auth",
                    "token_endpoint": f"{base}/token",
                    "jwks_uri": f"{base}/jwks",
                    "registration_endpoint": f"{base}/register",
                    "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                        "product_family_code": "test-platform"
                    },
                },
                served.raw_configuration,
            )

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            served.registrations.append((self.headers.get("Authorization", ""), body))
            self._json(
                served.registration_status,
                {
                    "client_id": "dynamic-client-1",
                    **body,
                    TOOL_CONFIGURATION: {
                        **body[TOOL_CONFIGURATION],
                        "deployment_id": "dynamic-deployment-1",
                    },
                },
                served.raw_registration,
            )

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield served


def invite() -> str:
    result = CliRunner().invoke(
        cli,
        ["lti", "invite", "--base-url", TOOL_ORIGIN],
        env={"NORMDIVE_SECRET_KEY": SECRET_KEY},
    )
    assert result.exit_code == 0, result.output
    url = result.output.strip()
    assert url.startswith(f"{TOOL_ORIGIN}/lti/register?invite=")
    return url


def open_as_platform(app: Starlette, url: str, platform: RegisteringPlatform) -> Any:
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    query.update(openid_configuration=platform.configuration_url, registration_token="reg-tok")
    with browser(app) as client:
        return client.get("/lti/register", params=query)


def test_the_pasted_url_registers_the_platform(
    app: Starlette, engine: Engine, platform: RegisteringPlatform
) -> None:
    response = open_as_platform(app, invite(), platform)
    assert response.status_code == 200, response.text
    assert "is registered" in response.text
    assert "lti-registered.js" in response.text  # tells the platform to close the window
    [(authorization, sent)] = platform.registrations
    assert authorization == "Bearer reg-tok"
    assert sent["initiate_login_uri"] == f"{TOOL_ORIGIN}/lti/login"
    assert sent["redirect_uris"] == [f"{TOOL_ORIGIN}/lti/launch"]
    assert sent["jwks_uri"] == f"{TOOL_ORIGIN}/lti/jwks"
    assert sent["token_endpoint_auth_method"] == "private_key_jwt"
    assert sent[TOOL_CONFIGURATION]["domain"] == "tool.test"
    # Every message the tool takes, the gradebook's review among them, at the launch URL.
    assert sent[TOOL_CONFIGURATION]["messages"] == [
        {"type": message, "target_link_uri": f"{TOOL_ORIGIN}/lti/launch"}
        for message in (
            "LtiResourceLinkRequest",
            "LtiDeepLinkingRequest",
            "LtiSubmissionReviewRequest",
        )
    ]
    [registration] = all_registrations(engine)
    assert registration.issuer == platform.base
    assert registration.client_id == "dynamic-client-1"
    assert registration.deployment_ids == ("dynamic-deployment-1",)
    assert registration.auth_login_url == f"{platform.base}/auth"
    assert registration.token_url == f"{platform.base}/token"
    assert registration.jwks_url == f"{platform.base}/jwks"
    # The key set was fetched with the registration, and kept for the first launch.
    with engine.connect() as connection:
        [kept] = connection.execute(select(LtiPlatformKeySet.key_set)).scalars()
    assert kept == {"keys": [PLATFORM_KEY.as_dict(private=False)]}


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("no invite", "no_invite"),
        ("forged invite", "no_invite"),
        ("issuer on another site", "registration_failed"),
        ("registration refused", "registration_failed"),
    ],
)
def test_a_registration_that_cannot_be_trusted_stores_nothing(
    app: Starlette, engine: Engine, platform: RegisteringPlatform, case: str, code: str
) -> None:
    url = invite()
    if case == "no invite":
        url = f"{TOOL_ORIGIN}/lti/register"
    elif case == "forged invite":
        url = f"{TOOL_ORIGIN}/lti/register?invite=abc.def.ghi"
    elif case == "issuer on another site":
        platform.issuer = "https://elsewhere.example"
    else:
        platform.registration_status = 400
    response = open_as_platform(app, url, platform)
    assert response.status_code in (400, 403), response.text
    assert f"<code>{code}</code>" in response.text
    assert BeautifulSoup(response.text, "html.parser").find("h1") is not None
    assert all_registrations(engine) == []


def nested_object(depth: int) -> bytes:
    """A JSON object whose "issuer" member holds objects `depth` levels deep in all."""
    return b'{"issuer":' * depth + b"1" + b"}" * depth


CONFIGURATION = "OpenID configuration"
REGISTRATION = "registration"
# (case, which answer, its body, what the refusal says of it)
HOSTILE_ANSWERS = [
    ("configuration of arrays 50,000 deep", CONFIGURATION, b"[" * 50_000, "is not JSON"),
    (
        "configuration of objects 10,000 deep",
        CONFIGURATION,
        nested_object(10_000),
        "is not JSON",
    ),
    (
        "configuration nested past the depth limit",
        CONFIGURATION,
        nested_object(MAX_JSON_DEPTH + 1),
        f"is nested deeper than {MAX_JSON_DEPTH} levels",
    ),
    ("configuration not JSON", CONFIGURATION, b"<html>", "is not JSON"),
    # More digits than Python converts to an int (4,300): json raises a plain ValueError.
    (
        "configuration with a number of 5,000 digits",
        CONFIGURATION,
        b'{"issuer": ' + b"9" * 5_000 + b"}",
        "is not JSON",
    ),
    (
        "registration with a number of 5,000 digits",
        REGISTRATION,
        b'{"client_id": -' + b"9" * 5_000 + b"}",
        "is not JSON",
    ),
    ("registration of arrays 50,000 deep", REGISTRATION, b"[" * 50_000, "is not JSON"),
    (
        "registration of objects 10,000 deep",
        REGISTRATION,
        b'{"client_id":' * 10_000 + b"1" + b"}" * 10_000,
        "is not JSON",
    ),
]


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("case", "answer", "body", "words"),
    HOSTILE_ANSWERS,
    ids=[case[0] for case in HOSTILE_ANSWERS],
)
def test_a_platform_answering_json_nested_too_deep_is_refused_readably(
    app: Starlette,
    engine: Engine,
    platform: RegisteringPlatform,
    case: str,
    answer: str,
    body: bytes,
    words: str,
) -> None:
    if answer == CONFIGURATION:
        platform.raw_configuration = body
    else:
        platform.raw_registration = body
    response = open_as_platform(app, invite(), platform)
    assert response.status_code == 400, response.text
    assert "<code>registration_failed</code>" in response.text
    assert f"The platform&#39;s {answer} {words}." in response.text
    assert all_registrations(engine) == []
    # The registration was posted only when the configuration could be read.
    assert len(platform.registrations) == (answer == REGISTRATION)


def test_an_invitation_registers_one_platform(
    app: Starlette, engine: Engine, platform: RegisteringPlatform, clock: MovableClock
) -> None:
    url = invite()
    # A platform that fails (it refuses the tool's registration) does not use it up...
    platform.registration_status = 400
    assert open_as_platform(app, url, platform).status_code == 400
    platform.registration_status = 201
    clock.advance(dynamic_registration.INVITE_RETRY_INTERVAL_S)
    assert open_as_platform(app, url, platform).status_code == 200
    assert len(all_registrations(engine)) == 1
    # ...a registration does: the same URL again is refused before the platform is asked.
    asked = len(platform.registrations)
    again = open_as_platform(app, url, platform)
    assert again.status_code == 403
    assert "<code>invite_used</code>" in again.text
    assert "has registered a platform already" in again.text
    assert len(platform.registrations) == asked
    assert len(all_registrations(engine)) == 1
    # A new invitation registers the next platform (here refused as the same client id).
    assert "<code>invite_used</code>" not in open_as_platform(app, invite(), platform).text


RACERS = 6


@pytest.mark.both_databases
def test_an_invitation_raced_by_several_registrations_registers_one(engine: Engine) -> None:
    digest = invite_digest("one-invitation")
    start = threading.Barrier(RACERS)

    def one(number: int) -> str:
        given = validated(
            issuer=f"https://platform-{number}.example",
            client_id=f"client-{number}",
            auth_login_url=f"https://platform-{number}.example/auth",
            token_url=f"https://platform-{number}.example/token",
            jwks_url=f"https://platform-{number}.example/jwks",
            deployment_ids=("d",),
        )
        start.wait(timeout=30)
        try:
            register(engine, given, invite=digest)
        except InviteUsed:
            return "refused"
        return "registered"

    with ThreadPoolExecutor(max_workers=RACERS) as pool:
        outcomes = sorted(pool.map(one, range(RACERS)))
    assert outcomes == ["refused"] * (RACERS - 1) + ["registered"]
    assert len(all_registrations(engine)) == 1
    assert invite_used(engine, digest)


def test_a_configuration_over_the_limit_is_refused(
    app: Starlette, engine: Engine, platform: RegisteringPlatform
) -> None:
    platform.raw_configuration = b" " * (4 * MAX_ANSWER_BYTES)
    response = open_as_platform(app, invite(), platform)
    assert response.status_code == 400
    assert f"is over {MAX_ANSWER_BYTES // 1024} KiB" in response.text
    assert all_registrations(engine) == []


# --- what a registrant names: deadline, threads, hosts, and what a refusal tells -------------


def registration_query(configuration_url: str, url: str | None = None) -> dict[str, str]:
    """The query a platform opens the invitation `url` (a new one by default) with."""
    given = url or invite_url(TOOL_ORIGIN, SecretStr(SECRET_KEY))
    query = {k: v[0] for k, v in parse_qs(urlsplit(given).query).items()}
    query.update(openid_configuration=configuration_url, registration_token="reg-tok")
    return query


def http_answer(body: bytes, status: str = "200 OK") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def configuration_of(base: str) -> bytes:
    return json.dumps(
        {
            "issuer": base,
            "authorization_endpoint": f"{base}/auth",
            "token_endpoint": f"{base}/token",
            "jwks_uri": f"{base}/jwks",
            "registration_endpoint": f"{base}/register",
        }
    ).encode()


# Generous bounds on waiting for a test's own servers, so a broken tool fails the test instead
# of hanging it; nothing is asserted of how long anything took.
GUARD_S = 60.0


def test_every_fetch_shares_one_deadline_however_the_bytes_are_paced(
    app: Starlette, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each answer takes about 60 % of the deadline, a byte at a time, every byte far inside
    # any per-read timeout: the configuration arrives whole, the key set (its second fetch)
    # does not, since the two together pass the deadline.
    deadline_s = 3.0
    monkeypatch.setattr(dynamic_registration, "REGISTRATION_DEADLINE_S", deadline_s)
    with trickling_server(b"", pace_s=0.0) as served:
        served.answer = http_answer(configuration_of(served.base))
        served.pace_s = 0.6 * deadline_s / len(served.answer)
        with browser(app) as client:
            response = client.get(
                "/lti/register",
                params=registration_query(f"{served.base}/.well-known/openid-configuration"),
            )
        assert served.wait_for(lambda s: s.sending == 0, GUARD_S)
        assert served.begun == 2
        assert served.cut == 1
    assert response.status_code == 400, response.text
    assert "<code>registration_failed</code>" in response.text
    assert (
        f"The platform&#39;s key set at {served.base}/jwks gave no 2xx answer within the 3 s "
        "a registration may take."
    ) in response.text


def test_registrations_against_a_trickling_platform_leave_the_learners_threads(
    app: Starlette, engine: Engine
) -> None:
    # More registrations at once than the server has threads for requests (anyio's 40), to a
    # platform that sends a byte every 0.2 s for as long as it is let.
    racers = 45
    in_flight = dynamic_registration.MAX_REGISTRATIONS_AT_ONCE
    answer = http_answer(b" " * 100_000)
    with (
        trickling_server(answer, pace_s=0.2) as served,
        browser(app) as client,
        ThreadPoolExecutor(max_workers=racers) as pool,
        ThreadPoolExecutor(max_workers=1) as learners,
    ):
        configuration_url = f"{served.base}/.well-known/openid-configuration"
        try:
            registering = [
                pool.submit(
                    client.get, "/lti/register", params=registration_query(configuration_url)
                )
                for _ in range(racers)
            ]
            assert served.wait_for(lambda s: s.begun >= in_flight, GUARD_S)
            # While they trickle, the learners' pages answer.
            learner = learners.submit(lambda: (client.get("/healthz"), client.get("/")))
            done, _ = wait([learner], timeout=GUARD_S)
            assert learner in done, "the learners' pages waited on the registrations"
            assert served.sending > 0  # they answered while registrations were under way
        except BaseException:
            # The platform finishes its answers, so that the registrations (and a page waiting
            # behind them) end, and the failure is reported instead of hanging the test.
            served.released.set()
            raise
        health, page = learner.result()
        assert health.status_code == 200
        assert page.status_code == 200
        answers = [future.result(timeout=GUARD_S) for future in registering]
    busy = [a for a in answers if a.status_code == 503]
    assert len(busy) == racers - in_flight
    for refusal in busy:
        assert "<code>registrations_busy</code>" in refusal.text
        assert f"registering {in_flight} platforms at this moment" in refusal.text
        assert refusal.headers["retry-after"] == "10"
    cut = [a for a in answers if a.status_code == 400]
    assert len(cut) == in_flight
    assert all("gave no 2xx answer within the 10 s" in a.text for a in cut)
    assert all_registrations(engine) == []


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port that takes connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def refusal_text(response: Any, url: str) -> str:
    """The refusal's sentence, with `url` (which it may quote) written as URL."""
    message = BeautifulSoup(response.text, "html.parser").find("p", role="alert")
    assert message is not None
    return message.get_text().replace(url, "URL")


def test_a_refusal_reads_the_same_whatever_answers_at_the_address(
    app: Starlette, platform: RegisteringPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where the tool fetches (this machine allowed here, as in development): a 404, a port
    # nobody listens on, a port that never answers, a page that is no platform.
    monkeypatch.setattr(dynamic_registration, "REGISTRATION_DEADLINE_S", 1.0)
    with silent_port() as silent, browser(app) as client:
        urls = [
            f"{platform.base}/no-configuration-here",
            f"http://127.0.0.1:{closed_port()}/.well-known/openid-configuration",
            f"http://127.0.0.1:{silent}/.well-known/openid-configuration",
        ]
        texts = set()
        for url in urls:
            response = client.get("/lti/register", params=registration_query(url))
            assert response.status_code == 400
            texts.add(refusal_text(response, url))
    assert len(texts) == 1, texts
    [text] = texts
    assert "gave no 2xx answer within the 1 s" in text
    assert platform.registrations == []


def test_this_machine_is_refused_before_any_connection_without_the_development_setting(
    make_settings: SettingsFactory, engine: Engine, platform: RegisteringPlatform
) -> None:
    production = create_app(make_settings(dev_lti_loopback=False))
    port = urlsplit(platform.base).port
    urls = [
        platform.configuration_url,  # a platform that would register (it does, in development)
        f"http://127.0.0.1:{closed_port()}/.well-known/openid-configuration",
        f"https://127.0.0.1:{port}/.well-known/openid-configuration",
        f"https://localhost:{port}/.well-known/openid-configuration",
        f"https://[::1]:{port}/.well-known/openid-configuration",
        f"https://127.1:{port}/.well-known/openid-configuration",
        f"https://tool.localhost:{port}/.well-known/openid-configuration",
    ]
    texts = set()
    with browser(production) as client:
        for url in urls:
            response = client.get("/lti/register", params=registration_query(url))
            assert response.status_code == 400, response.text
            texts.add(refusal_text(response, url))
    assert texts == {
        "The platform's openid_configuration URL names this machine, where no platform "
        "registering itself is."
    }
    assert platform.registrations == []
    assert all_registrations(engine) == []


@pytest.mark.parametrize(
    ("url", "allowed", "problem"),
    [
        ("https://lms.example.edu/config", False, None),
        ("https://lms.example.edu/config", True, None),
        ("http://lms.example.edu/config", False, "must be https"),
        ("http://lms.example.edu/config", True, "must be https"),
        ("http://127.0.0.1:8080/config", False, "names this machine"),
        ("http://127.0.0.1:8080/config", True, None),
        ("http://localhost/config", True, None),
        ("https://127.0.0.1/config", False, "names this machine"),
        ("https://0x7f.1/config", False, "names this machine"),
        ("https://2130706433/config", False, "names this machine"),
        ("https://[::ffff:127.0.0.1]/config", False, "names this machine"),
        ("https://0.0.0.0/config", False, "names this machine"),
        ("https://a.localhost/config", False, "names this machine"),
        ("https://10.1.2.3/config", False, None),
    ],
)
def test_which_hosts_a_registrant_may_name(url: str, allowed: bool, problem: str | None) -> None:
    found = registrant_url_problem(url, this_machine_allowed=allowed)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_an_invitation_that_failed_waits_before_it_is_tried_again(
    app: Starlette, engine: Engine, platform: RegisteringPlatform, clock: MovableClock
) -> None:
    url = invite()
    platform.registration_status = 400
    with browser(app) as client:
        query = registration_query(platform.configuration_url, url)
        assert client.get("/lti/register", params=query).status_code == 400
        asked = len(platform.registrations)
        # At once again: refused before the platform is asked.
        again = client.get("/lti/register", params=query)
        assert again.status_code == 429
        assert "<code>registration_too_soon</code>" in again.text
        assert again.headers["retry-after"] == "10"
        assert len(platform.registrations) == asked
        # Another invitation is not held back by this one.
        other = registration_query(platform.configuration_url)
        assert client.get("/lti/register", params=other).status_code == 400
        # Once the interval has passed, the same invitation is tried (and now registers).
        clock.advance(dynamic_registration.INVITE_RETRY_INTERVAL_S)
        platform.registration_status = 201
        assert client.get("/lti/register", params=query).status_code == 200
    assert len(all_registrations(engine)) == 1
