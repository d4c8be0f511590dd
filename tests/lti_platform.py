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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import RSAKey
from sqlalchemy import Engine

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
    url: str = ""
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)

    def body(self) -> bytes:
        return json.dumps({"keys": [k.as_dict(private=False) for k in self.keys]}).encode()


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
    server.daemon_threads = True
    served.url = f"http://127.0.0.1:{server.server_address[1]}/jwks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def register_platform(
    engine: Engine,
    jwks_url: str,
    *,
    mode: PrerequisiteMode = PrerequisiteMode.PLATFORM,
    client_id: str = CLIENT_ID,
) -> Registration:
    return register(
        engine,
        validated(
            issuer=ISSUER,
            client_id=client_id,
            auth_login_url=f"{ISSUER}/auth",
            token_url=f"{ISSUER}/token",
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


def browser(app: FastAPI) -> TestClient:
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
