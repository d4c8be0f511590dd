"""Two HTTPS sites on this machine for the LTI browser journeys and the launch benchmark:
a throwaway certificate for tool.test and platform.test (Chromium maps both to 127.0.0.1),
each served over TLS (live_server.py), and a small platform (a course page that frames the
tool's login and answers the platform storage's postMessages, and an authorization endpoint
that posts a signed id_token back). In front of the tool, on its side of the network,
a gate records the cookies each request brought and can strip the login's answer of its
cookies (a browser that keeps no third-party cookie at all)."""

from __future__ import annotations

import datetime
import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route as Path_
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from live_server import LiveServer
from lti_platform import CLIENT_ID, DEPLOYMENT_ID, key_set_server, launch_claims, new_key, signed
from normdive.lti.registrations import register, validated
from normdive.lti.tool_config import LOGIN_PATH
from normdive.store.db import make_engine
from normdive.web.app import create_app

AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
TOOL_HOST = "tool.test"
PLATFORM_HOST = "platform.test"


def certificate(folder: Path) -> tuple[Path, Path]:
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


@dataclass(frozen=True)
class Received:
    """One request as the tool received it, and the status it answered."""

    method: str
    path: str
    cookies: frozenset[str]
    status: int


class ToolGate:
    """ASGI in front of the tool: records what each request brought (read by the tests, in
    another thread than the server's) and, while `strip_login_cookies` is set, drops the
    Set-Cookie headers of the login's answer, so the browser never holds the login's cookie."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self.strip_login_cookies = False

    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def forget(self) -> None:
        with self._lock:
            self._received.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        cookie = b"; ".join(v for k, v in scope["headers"] if k == b"cookie").decode("latin-1")
        strip = self.strip_login_cookies and scope["path"] == LOGIN_PATH

        async def gated(message: Message) -> None:
            if message["type"] == "http.response.start":
                if strip:
                    headers = [(k, v) for k, v in message["headers"] if k != b"set-cookie"]
                    message = {**message, "headers": headers}
                seen = Received(
                    scope["method"],
                    scope["path"],
                    frozenset(cookie_parser(cookie)),
                    message["status"],
                )
                with self._lock:
                    self._received.append(seen)
            await send(message)

        await self._app(scope, receive, gated)


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
    # The Assignment and Grade Services endpoint claim its launches carry, if any.
    ags_endpoint: dict[str, Any] | None = None

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
            extra = {AGS_CLAIM: self.ags_endpoint} if self.ags_endpoint else {}
            claims = launch_claims(
                query["nonce"],
                **extra,
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


# Chromium's switches for these sites.
SITES_ARGS = [
    f"--host-resolver-rules=MAP {TOOL_HOST} 127.0.0.1, MAP {PLATFORM_HOST} 127.0.0.1",
    # Chromium's switch for the third-party cookie phase-out: cookies not partitioned are
    # blocked in third-party contexts. Chromium 156 blocks them without it too, and a profile
    # set to allow them overrides it: the control test is what shows the browser blocks them.
    "--test-third-party-cookie-phaseout",
]


@dataclass
class Sites:
    tool: str
    tool_gate: ToolGate
    platform: Platform
    database_url: str
    recording: Path


@contextmanager
def serve_sites(folder: Path) -> Iterator[Sites]:
    """The tool (a fresh SQLite database, a sample recording, 8.5 not done outside a launch)
    and the platform, registered with each other, each over TLS on its own port."""
    cert, key = certificate(folder)
    platform_key = new_key("platform-key-1")
    url = migrated_sqlite_url(folder)
    recording = write_recording(folder, ablation_recording())
    settings = build_settings(url, folder, dev_prerequisite_done=False, recording_path=recording)
    tool_gate = ToolGate(create_app(settings))
    with (
        key_set_server([platform_key]) as keys,
        LiveServer(tool_gate, tls=(cert, key)) as tool_server,
    ):
        tool = f"https://{TOOL_HOST}:{tool_server.port}"
        platform = Platform(origin="", tool_origin=tool, key=platform_key)
        with LiveServer(platform.app(), tls=(cert, key)) as platform_server:
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
            yield Sites(
                tool=tool,
                tool_gate=tool_gate,
                platform=platform,
                database_url=url,
                recording=recording,
            )
