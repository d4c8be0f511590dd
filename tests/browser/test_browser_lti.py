"""The lesson framed by a platform on another site, in Chromium with third-party cookies
blocked, over HTTPS (a throwaway certificate for tool.test and platform.test, both mapped to
127.0.0.1): the platform's course page frames the tool's login, the platform's authorization
endpoint posts the signed id_token back, and the learner works in the frame (the form token
and the learner cookie keep working there).

Twice: with the login's partitioned cookie (CHIPS), and with that cookie stripped from the
login's answer (a browser that keeps no third-party cookie at all), where the platform's
storage (lti-cs-oidc / lti-pm-s postMessages, answered by the course page) carries the login.
A control checks that the browser really blocks an unpartitioned third-party cookie.

The platform here is written for the test (its storage, its auth endpoint); its id_tokens
are signed with a real RSA key whose set the tool fetches over real HTTP."""

from __future__ import annotations

import asyncio
import datetime
import html
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from joserfc.jwk import RSAKey
from playwright.sync_api import Browser, FrameLocator, Page, Route, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route as Path_

from conftest import (
    ACTION_TIMEOUT_MS,
    CHROMIUM,
    CHROMIUM_ARGS,
    SERVER_START_TIMEOUT_S,
    build_settings,
    migrated_sqlite_url,
)
from lesson_answers import LESSON
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    KeySetServer,
    key_set_server,
    launch_claims,
    new_key,
    signed,
    unique_sub,
)
from normdive.lti.registrations import register, validated
from normdive.store.db import make_engine
from normdive.web.app import create_app

pytestmark = pytest.mark.browser

TOOL_HOST = "tool.test"
PLATFORM_HOST = "platform.test"
BROWSER_ARGS = [
    *CHROMIUM_ARGS,
    f"--host-resolver-rules=MAP {TOOL_HOST} 127.0.0.1, MAP {PLATFORM_HOST} 127.0.0.1",
    # Chromium's switch for the third-party cookie phase-out: cookies not partitioned are
    # blocked in third-party contexts (the control test shows it).
    "--test-third-party-cookie-phaseout",
    # A response the test fulfils itself (the login's, its cookies stripped) has no address,
    # so Chromium would count it as public and block its navigation on to 127.0.0.1.
    "--disable-features=LocalNetworkAccessChecks",
]


def _certificate(folder: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "normdive test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(TOOL_HOST), x509.DNSName(PLATFORM_HOST)]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class TlsServer:
    """uvicorn serving one ASGI app over TLS on 127.0.0.1, in a daemon thread."""

    def __init__(self, app: Any, cert: Path, key: Path) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_level="warning",
            ws="none",
            lifespan="on",
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])), daemon=True
        )

    def __enter__(self) -> TlsServer:
        self._thread.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the TLS test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=SERVER_START_TIMEOUT_S)
        self._sock.close()


# The course page's storage (lti-pm-s): answers lti.put_data and lti.get_data from the tool's
# origin only, keeping values in the page. The auth endpoint's form posts itself.
STORAGE_SCRIPT = """
const kept = new Map();
window.addEventListener("message", (event) => {
  if (event.origin !== TOOL_ORIGIN || !event.data) return;
  const { subject, message_id, key, value } = event.data;
  if (subject === "lti.put_data") {
    kept.set(key, value);
    event.source.postMessage(
      { subject: "lti.put_data.response", message_id, key, value }, event.origin);
  } else if (subject === "lti.get_data") {
    event.source.postMessage(
      { subject: "lti.get_data.response", message_id, key, value: kept.get(key) }, event.origin);
  }
});
"""


@dataclass
class Platform:
    """The platform's side: its origin, its key, and what it served."""

    origin: str
    tool_origin: str
    key: RSAKey
    storage: bool = True
    # The platform's user who launches (each test its own: the same one would resume).
    subject: str = "ada"

    def app(self) -> Starlette:
        async def course(request: Request) -> Response:
            params = {
                "iss": self.origin,
                "login_hint": "ada",
                "target_link_uri": f"{self.tool_origin}/lti/launch",
                "client_id": CLIENT_ID,
                "lti_deployment_id": DEPLOYMENT_ID,
                "lti_message_hint": "resource-link-1",
            }
            if self.storage:
                params["lti_storage_target"] = "_parent"
            login = html.escape(f"{self.tool_origin}/lti/login?{urlencode(params)}")
            return HTMLResponse(
                "<!doctype html><title>Course</title><h1>Course page</h1>"
                f"<script>const TOOL_ORIGIN = {self.tool_origin!r};{STORAGE_SCRIPT}</script>"
                f'<iframe title="D9" src="{login}" width="1000" height="800"></iframe>'
            )

        async def authorize(request: Request) -> Response:
            query = request.query_params
            claims = launch_claims(
                query["nonce"],
                sub=self.subject,
                iss=self.origin,
                lti_target_link_uri=f"{self.tool_origin}/lti/launch",
            )
            token = signed(claims, self.key)
            return HTMLResponse(
                f'<form method="post" action="{html.escape(query["redirect_uri"])}">'
                f'<input type="hidden" name="id_token" value="{token}">'
                f'<input type="hidden" name="state" value="{html.escape(query["state"])}">'
                "</form><script>document.forms[0].submit()</script>"
            )

        async def plain_cookie(request: Request) -> Response:
            return PlainTextResponse("cookies: " + request.headers.get("cookie", ""))

        return Starlette(
            routes=[
                Path_("/course", course),
                Path_("/auth", authorize),
                Path_("/show", plain_cookie),
            ]
        )


@dataclass
class Sites:
    tool: str
    platform: Platform


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    folder = tmp_path_factory.mktemp("lti-browser")
    cert, key = _certificate(folder)
    platform_key = new_key("platform-key-1")
    url = migrated_sqlite_url(folder)
    settings = build_settings(url, folder, dev_prerequisite_done=False)
    keys: KeySetServer
    with (
        key_set_server([platform_key]) as keys,
        TlsServer(create_app(settings), cert, key) as tool_server,
    ):
        tool = f"https://{TOOL_HOST}:{tool_server.port}"
        platform = Platform(origin="", tool_origin=tool, key=platform_key)
        with TlsServer(platform.app(), cert, key) as platform_server:
            platform.origin = f"https://{PLATFORM_HOST}:{platform_server.port}"
            engine = make_engine(url)
            register(
                engine,
                validated(
                    issuer=platform.origin,
                    client_id=CLIENT_ID,
                    auth_login_url=f"{platform.origin}/auth",
                    token_url=f"{platform.origin}/token",
                    jwks_url=keys.url,
                    deployment_ids=(DEPLOYMENT_ID,),
                ),
            )
            engine.dispose()
            yield Sites(tool=tool, platform=platform)


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
def browser_lti() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
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
