"""A small LTI 1.3 platform for the tests: RSA keys made here, its key set served over real
HTTP (http.server on a free 127.0.0.1 port, in a thread), and id_tokens signed with joserfc
the way a platform signs them. Attack tokens (alg none, HS256 keyed with the public key) are
built by hand, as an attacker would."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from joserfc import jws, jwt
from joserfc.jwk import RSAKey
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from normdive.lti.registrations import (
    PrerequisiteMode,
    Registration,
    register,
    validated,
)

ISSUER = "https://platform.example.edu"
CLIENT_ID = "tool-client-7"
DEPLOYMENT_ID = "deployment-1"
TOOL_ORIGIN = "https://tool.test"
LAUNCH_URL = f"{TOOL_ORIGIN}/lti/launch"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
LEARNER_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


# How often a served thread looks for shutdown(). At http.server's default of 0.5 s, every test
# that stops a server would wait half a second for nothing.
SHUTDOWN_POLL_S = 0.01


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[None]:
    """Serve `server` in a daemon thread for the block; then stop and close it."""
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


@dataclass
class KeySetServer:
    """Serves `keys` (public parts) as a JWKS at `url`; counts the fetches."""

    keys: list[RSAKey]
    fetches: int = 0
    # Seconds each answer waits before it is sent (a platform that is slow to answer).
    delay_s: float = 0.0
    status: int = 200
    # Served instead of the key set when set (a platform that serves something else).
    raw_body: bytes | None = None
    url: str = ""
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)

    def body(self) -> bytes:
        if self.raw_body is not None:
            return self.raw_body
        return json.dumps({"keys": [k.as_dict(private=False) for k in self.keys]}).encode()


@dataclass
class MovableClock:
    """A monotonic clock in seconds that moves only when told (platform_keys.clock)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@contextmanager
def key_set_server(keys: list[RSAKey]) -> Iterator[KeySetServer]:
    served = KeySetServer(keys=keys)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.fetches += 1
            if served.delay_s:
                time.sleep(served.delay_s)
            body = served.body()
            self.send_response(served.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the tests count fetches instead

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}/jwks"
    with serving(server):
        yield served


@dataclass
class TricklingServer:
    """Answers every request with `answer` (the raw HTTP answer, status line first), one byte
    each `pace_s`, until `released` is set (then the rest at once) or the client goes away."""

    answer: bytes
    pace_s: float
    base: str = ""
    released: threading.Event = field(default_factory=threading.Event)
    # Answers begun, answers being sent now, and answers the client gave up on before the end.
    begun: int = 0
    sending: int = 0
    cut: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, condition: Any, timeout_s: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: condition(self), timeout=timeout_s)


@contextmanager
def trickling_server(answer: bytes, pace_s: float) -> Iterator[TricklingServer]:
    """A platform that sends its answers a byte at a time, on a free 127.0.0.1 port."""
    served = TricklingServer(answer=answer, pace_s=pace_s)

    class Handler(BaseHTTPRequestHandler):
        def _trickle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            with served.changed:
                served.begun += 1
                served.sending += 1
                served.changed.notify_all()
            cut = False
            try:
                for at in range(len(served.answer)):
                    if served.released.is_set():
                        self.wfile.write(served.answer[at:])
                        break
                    self.wfile.write(served.answer[at : at + 1])
                    served.released.wait(served.pace_s)
            except (BrokenPipeError, ConnectionResetError):
                cut = True
            with served.changed:
                served.sending -= 1
                served.cut += cut
                served.changed.notify_all()
            self.close_connection = True

        do_GET = do_POST = _trickle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        try:
            yield served
        finally:
            served.released.set()


def register_platform(
    engine: Engine,
    jwks_url: str,
    *,
    mode: PrerequisiteMode = PrerequisiteMode.PLATFORM,
    client_id: str = CLIENT_ID,
    token_url: str = f"{ISSUER}/token",
) -> Registration:
    return register(
        engine,
        validated(
            issuer=ISSUER,
            client_id=client_id,
            auth_login_url=f"{ISSUER}/auth",
            token_url=token_url,
            jwks_url=jwks_url,
            deployment_ids=(DEPLOYMENT_ID,),
            prerequisite_mode=mode,
        ),
    )


def login_params(**overrides: str) -> dict[str, str]:
    params = {
        "iss": ISSUER,
        "login_hint": "user-hint-1",
        "target_link_uri": LAUNCH_URL,
        "client_id": CLIENT_ID,
        "lti_deployment_id": DEPLOYMENT_ID,
        "lti_message_hint": "resource-link-1",
    }
    params.update(overrides)
    return {key: value for key, value in params.items() if value is not None}


@dataclass(frozen=True)
class Authorization:
    """What the tool's login redirect asked the platform for."""

    state: str
    nonce: str
    query: dict[str, str]


def authorization(location: str) -> Authorization:
    query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    return Authorization(state=query["state"], nonce=query["nonce"], query=query)


def launch_claims(login_nonce: str, /, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": CLIENT_ID,
        "sub": "user-1",
        "exp": now + 300,
        "iat": now,
        "nonce": login_nonce,
        "name": "Ada Learner",
        CLAIM + "message_type": "LtiResourceLinkRequest",
        CLAIM + "version": "1.3.0",
        CLAIM + "deployment_id": DEPLOYMENT_ID,
        CLAIM + "target_link_uri": LAUNCH_URL,
        CLAIM + "resource_link": {"id": "resource-link-1", "title": "D9"},
        CLAIM + "roles": [LEARNER_ROLE],
        CLAIM + "context": {"id": "course-1", "title": "Learn machine learning"},
    }
    for name, value in overrides.items():
        key = name if name in claims or not name.startswith("lti_") else CLAIM + name[4:]
        if value is None:
            claims.pop(key, None)
        else:
            claims[key] = value
    return claims


def signed(claims: dict[str, Any], key: RSAKey, **header: Any) -> str:
    return jwt.encode({"alg": "RS256", "kid": key.kid, **header}, claims, key)


def signed_payload(payload: bytes, key: RSAKey) -> str:
    """A token signed by the platform's key whose payload is `payload` as it is, JSON or not
    (a platform that signs whatever it is given)."""
    return jws.serialize_compact({"alg": "RS256", "kid": key.kid}, payload, key)


def _segment(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned(claims: dict[str, Any], kid: str) -> str:
    """An attacker's token with alg none: no signature at all."""
    return f"{_segment({'alg': 'none', 'kid': kid})}.{_segment(claims)}."


def hs256_with_public_key(claims: dict[str, Any], key: RSAKey) -> str:
    """An attacker's token: HMAC-SHA256 keyed with the platform's public key (PEM), which a
    verifier that lets the token choose its algorithm would accept."""
    signing_input = f"{_segment({'alg': 'HS256', 'kid': key.kid})}.{_segment(claims)}"
    mac = hmac.new(key.as_bytes(private=False), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def unique_sub() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def browser(app: Starlette) -> TestClient:
    """A browser on the tool's https origin (the cookies are Secure), following nothing."""
    return TestClient(app, base_url=TOOL_ORIGIN, follow_redirects=False)


def login(client: TestClient, method: str = "GET", **overrides: str) -> Authorization:
    params = login_params(**overrides)
    if method == "GET":
        response = client.get("/lti/login", params=params)
    else:
        response = client.post("/lti/login", data=params)
    assert response.status_code == 303, response.text
    return authorization(response.headers["location"])


def launch(client: TestClient, id_token: str, state: str) -> httpx.Response:
    return client.post("/lti/launch", data={"id_token": id_token, "state": state})


SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"


@dataclass
class GradeBook:
    """A platform's Assignment and Grade Services side, served over real HTTP: the token
    endpoint checks the tool's client assertion against the tool's key set (as fetched from
    /lti/jwks), line items can be created, and scores are recorded. `down` answers 503;
    `deleted` line items answer 404 (and their scores with them); scores for `refused_users`
    answer 400 as Moodle does for a user who cannot be graded; `revoked_tokens` answer 401;
    `token_refusal` makes the token endpoint answer 400 invalid_client. `requests` has the
    path of every request, answered or not."""

    tool_key_set: dict[str, Any] = field(default_factory=dict)
    client_id: str = CLIENT_ID
    base: str = ""
    down: bool = False
    tokens_issued: int = 0
    scores: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lineitems_created: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    # path -> a body answered with `raw_status` instead of what the endpoint would answer (a
    # platform that answers something else: JSON, or an HTML page where it starts with "<").
    raw_answers: dict[str, bytes] = field(default_factory=dict)
    raw_status: int = 200
    deleted: set[str] = field(default_factory=set)
    refused_users: set[str] = field(default_factory=set)
    revoked_tokens: set[str] = field(default_factory=set)
    token_refusal: str | None = None
    requests: list[str] = field(default_factory=list)
    # Open edX's rule: a score stamped as one it holds for the user is refused (400 "Score
    # already exists for the provided timestamp"), an earlier one too.
    strict_timestamps: bool = False
    # While set, a score is taken and its answer held back until released: a sender killed
    # meanwhile never hears that the platform took it.
    held: threading.Event | None = None
    # Scores taken whose answer is then lost (the connection closed unanswered), this many.
    lose_answers: int = 0
    stamps: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def token_url(self) -> str:
        return f"{self.base}/token"

    def endpoint_claim(
        self, *, with_lineitem: bool = True, lineitem: str = "/lineitems/d9?course=1"
    ) -> dict[str, Any]:
        claim: dict[str, Any] = {
            "scope": [SCORE_SCOPE, LINEITEM_SCOPE],
            "lineitems": f"{self.base}/lineitems?course=1",
        }
        if with_lineitem:
            claim["lineitem"] = f"{self.base}{lineitem}"
        return claim

    def check_assertion(self, assertion: str) -> bool:
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet
        from joserfc.jwt import JWTClaimsRegistry

        try:
            keys = KeySet.import_key_set(self.tool_key_set)  # type: ignore[arg-type]
            token = jwt.decode(assertion, keys, algorithms=["RS256"])
            JWTClaimsRegistry(
                iss={"essential": True, "value": self.client_id},
                sub={"essential": True, "value": self.client_id},
                aud={"essential": True, "value": self.token_url},
                exp={"essential": True},
                jti={"essential": True},
            ).validate(token.claims)
        except JoseError as error:
            self.refused.append(f"assertion: {error}")
            return False
        return True


@contextmanager
def grade_book_server(book: GradeBook) -> Iterator[GradeBook]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(
            self, status: int, body: dict[str, Any] | None = None, text: str | None = None
        ) -> None:
            data = text.encode() if text is not None else json.dumps(body or {}).encode()
            self.send_response(status)
            kind = "text/plain" if text is not None else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            path = urlsplit(self.path).path
            book.requests.append(path)
            if book.down:
                self._answer(503)
                return
            if path in book.raw_answers:
                data = book.raw_answers[path]
                self.send_response(book.raw_status)
                page = data.lstrip().startswith(b"<")
                self.send_header("Content-Type", "text/html" if page else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if path == "/token":
                form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                if book.token_refusal is not None:
                    self._answer(
                        400, {"error": "invalid_client", "error_description": book.token_refusal}
                    )
                    return
                if form.get("grant_type") != "client_credentials" or not book.check_assertion(
                    form.get("client_assertion", "")
                ):
                    self._answer(400, {"error": "invalid_client"})
                    return
                book.tokens_issued += 1
                self._answer(
                    200,
                    {
                        "access_token": f"token-{book.tokens_issued}",
                        "token_type": "Bearer",
                        "expires_in": 3600,
                    },
                )
                return
            bearer = self.headers.get("Authorization", "")
            if not bearer.startswith("Bearer token-"):
                book.refused.append(f"{path}: no bearer token")
                self._answer(401)
                return
            if bearer.removeprefix("Bearer ") in book.revoked_tokens:
                self._answer(401, {"error": "invalid_token"})
                return
            body = json.loads(raw)
            if path == "/lineitems":
                book.lineitems_created.append(body)
                self._answer(
                    201, {"id": f"{book.base}/lineitems/{len(book.lineitems_created)}", **body}
                )
                return
            if path.removesuffix("/scores") in book.deleted:
                self._answer(404, text="Line item not found")
                return
            if path.endswith("/scores"):
                if body.get("userId") in book.refused_users:
                    self._answer(400, text="Incorrect score received")
                    return
                if self.headers.get("Content-Type") != "application/vnd.ims.lis.v1.score+json":
                    book.refused.append(f"{path}: content type")
                    self._answer(415)
                    return
                held = book.stamps.get((path, body.get("userId")))
                if book.strict_timestamps and held is not None:
                    if held == body["timestamp"]:
                        self._answer(
                            400, {"error": "Score already exists for the provided timestamp"}
                        )
                        return
                    if datetime.fromisoformat(held) > datetime.fromisoformat(body["timestamp"]):
                        self._answer(
                            400,
                            {"error": "Score timestamp can only be updated to a later point "},
                        )
                        return
                book.stamps[(path, body.get("userId"))] = body["timestamp"]
                book.scores.append((self.path, body))
                if book.held is not None:
                    book.held.wait(timeout=60)
                if book.lose_answers > 0:
                    book.lose_answers -= 1
                    self.close_connection = True
                    return
                self._answer(200)
                return
            self._answer(404)

        def do_GET(self) -> None:
            # The line items container, filtered by resource_link_id (AGS 2.0, 3.2).
            parts = urlsplit(self.path)
            book.requests.append(f"GET {parts.path}")
            if book.down:
                self._answer(503)
                return
            if not self.headers.get("Authorization", "").startswith("Bearer token-"):
                self._answer(401)
                return
            if parts.path != "/lineitems":
                self._answer(404)
                return
            link = parse_qs(parts.query).get("resource_link_id", [None])[0]
            listed = [
                {"id": f"{book.base}/lineitems/{number}", **body}
                for number, body in enumerate(book.lineitems_created, start=1)
                if (link is None or body.get("resourceLinkId") == link)
                and f"/lineitems/{number}" not in book.deleted
            ]
            data = json.dumps(listed).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.ims.lis.v2.lineitemcontainer+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    book.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield book


MEMBERSHIPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
MEMBERSHIPS_MEDIA_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"


@dataclass
class RosterBook(GradeBook):
    """A platform's Names and Role Provisioning Service, served over real HTTP: the token
    endpoint (GradeBook's checks: the tool's client assertion, `token_refusal`) grants only
    the contextmembership.readonly scope asked for; GET /memberships answers `members`
    `page_size` at a time with `Link: <...>; rel="next"` (NRPS 2.0, 2.4.2), honouring the
    `role` filter, and refuses a missing or wrong token or Accept. `next_origin` puts the
    next pages elsewhere; `padding` adds that many bytes to each page; `trickle_s` sends
    each page a byte at a time, that many seconds apart, until `released`; `on_page` is
    called as each page is about to be sent."""

    members: list[dict[str, Any]] = field(default_factory=list)
    page_size: int = 2
    next_origin: str | None = None
    padding: int = 0
    trickle_s: float = 0.0
    released: threading.Event = field(default_factory=threading.Event)
    scopes_asked: list[str] = field(default_factory=list)
    pages_served: list[str] = field(default_factory=list)
    on_page: Callable[[], object] | None = None

    @property
    def memberships_url(self) -> str:
        return f"{self.base}/memberships?context=course-1"

    def claim(self) -> dict[str, Any]:
        return {"context_memberships_url": self.memberships_url, "service_versions": ["2.0"]}

    def page(self, query: dict[str, str]) -> tuple[dict[str, Any], str | None]:
        role = query.get("role")
        # A role matches by its full name or its short one (LTI 1.3, A.2.2).
        wanted = {role, role.rpartition("#")[2]} if role else set()
        listed = [m for m in self.members if role is None or wanted & set(m["roles"])]
        start = int(query.get("page", "0"))
        body = {
            "id": self.memberships_url,
            "context": {"id": "course-1", "title": "Learn machine learning"},
            "members": listed[start : start + self.page_size],
        }
        if self.padding:
            body["padding"] = "x" * self.padding
        if start + self.page_size >= len(listed):
            return body, None
        following = {**query, "page": str(start + self.page_size)}
        origin = self.next_origin or self.base
        return body, f"{origin}/memberships?{urlencode(following)}"


@contextmanager
def roster_server(book: RosterBook) -> Iterator[RosterBook]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if not book.trickle_s or status != 200 or "access_token" in body:
                self.wfile.write(data)
                return
            try:
                for at in range(len(data)):
                    if book.released.is_set():
                        self.wfile.write(data[at:])
                        return
                    self.wfile.write(data[at : at + 1])
                    book.released.wait(book.trickle_s)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            book.requests.append(urlsplit(self.path).path)
            if book.token_refusal is not None:
                self._answer(
                    400, {"error": "invalid_client", "error_description": book.token_refusal}
                )
                return
            if form.get("grant_type") != "client_credentials" or not book.check_assertion(
                form.get("client_assertion", "")
            ):
                self._answer(400, {"error": "invalid_client"})
                return
            book.scopes_asked.append(form.get("scope", ""))
            book.tokens_issued += 1
            self._answer(
                200,
                {
                    "access_token": f"token-{book.tokens_issued}",
                    "token_type": "Bearer",
                    "expires_in": 3600,
                    "scope": MEMBERSHIPS_SCOPE,
                },
            )

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            book.requests.append(parts.path)
            if not self.headers.get("Authorization", "").startswith("Bearer token-"):
                self._answer(401, {"error": "invalid_token"})
                return
            if self.headers.get("Accept") != MEMBERSHIPS_MEDIA_TYPE:
                self._answer(406, {"error": "not acceptable"})
                return
            book.pages_served.append(self.path)
            if book.on_page is not None:
                book.on_page()
            body, following = book.page({k: v[0] for k, v in parse_qs(parts.query).items()})
            link = {"Link": f'<{following}>; rel="next"'} if following else {}
            self._answer(200, body, link)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    book.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        try:
            yield book
        finally:
            book.released.set()
