"""Dynamic registration: the URL `normdive lti invite` prints, opened by a platform (served
here over real HTTP: its OpenID configuration and its registration endpoint), stores the
registration; without a valid invitation, or with a platform that gets something wrong,
nothing is stored and the page says why."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi import FastAPI
from sqlalchemy import Engine
from typer.testing import CliRunner

from conftest import SECRET_KEY
from lti_platform import TOOL_ORIGIN, browser, serving
from normdive.cli import app as cli
from normdive.lti.dynamic_registration import MAX_ANSWER_BYTES, invite_digest
from normdive.lti.platform_json import MAX_JSON_DEPTH
from normdive.lti.registrations import (
    InviteUsed,
    all_registrations,
    invite_used,
    register,
    validated,
)

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"


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


def open_as_platform(app: FastAPI, url: str, platform: RegisteringPlatform) -> Any:
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    query.update(openid_configuration=platform.configuration_url, registration_token="reg-tok")
    with browser(app) as client:
        return client.get("/lti/register", params=query)


def test_the_pasted_url_registers_the_platform(
    app: FastAPI, engine: Engine, platform: RegisteringPlatform
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
    [registration] = all_registrations(engine)
    assert registration.issuer == platform.base
    assert registration.client_id == "dynamic-client-1"
    assert registration.deployment_ids == ("dynamic-deployment-1",)
    assert registration.auth_login_url == f"{platform.base}/auth"
    assert registration.token_url == f"{platform.base}/token"
    assert registration.jwks_url == f"{platform.base}/jwks"


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
    app: FastAPI, engine: Engine, platform: RegisteringPlatform, case: str, code: str
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
    app: FastAPI,
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
    app: FastAPI, engine: Engine, platform: RegisteringPlatform
) -> None:
    url = invite()
    # A platform that fails (it refuses the tool's registration) does not use it up...
    platform.registration_status = 400
    assert open_as_platform(app, url, platform).status_code == 400
    platform.registration_status = 201
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
    app: FastAPI, engine: Engine, platform: RegisteringPlatform
) -> None:
    platform.raw_configuration = b" " * (4 * MAX_ANSWER_BYTES)
    response = open_as_platform(app, invite(), platform)
    assert response.status_code == 400
    assert f"is over {MAX_ANSWER_BYTES // 1024} KiB" in response.text
    assert all_registrations(engine) == []
