"""LTI Dynamic Registration 1.0: an administrator pastes one URL (`normdive lti invite`: good
for a week and one registration) into the platform, and the registration is stored.

Whoever holds the invitation names every URL here, so the exchange is bounded in time, size,
number and place, holds no thread that serves learners, and refuses a fetch without a 2xx
answer in one sentence whatever happened: the tool cannot be used to probe an address.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx
from itsdangerous import BadSignature, SignatureExpired, TimestampSigner
from pydantic import SecretStr
from sqlalchemy import Engine

from normdive.config import origin_of
from normdive.lesson.content import Lesson
from normdive.lti.launch import MESSAGE_TYPES
from normdive.lti.platform_http import AnswerTooLarge, fetch
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.lti.platform_keys import key_set_of, store_key_set
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import (
    INVITE_USED,
    InviteUsed,
    Registration,
    RegistrationProblem,
    invite_used,
    register,
    registrant_url_problem,
    validated,
)
from normdive.lti.tool_config import JWKS_PATH, LAUNCH_PATH, LOGIN_PATH, SCOPES, title

logger = logging.getLogger(__name__)

REGISTER_PATH = "/lti/register"
INVITE_PARAMETER = "invite"
INVITE_SALT = "normdive.lti-registration-invite"
# An invitation is good for a week: time for an administrator to get to it.
INVITE_MAX_AGE_S = 7 * 24 * 60 * 60
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
# The whole exchange (configuration, key set, registration), first connect to last byte,
# however the platform paces its bytes.
REGISTRATION_DEADLINE_S = 10.0
MAX_ANSWER_BYTES = 256 * 1024
# Per process, then 503: each holds no thread, but a connection and up to MAX_ANSWER_BYTES an
# answer for up to REGISTRATION_DEADLINE_S.
MAX_REGISTRATIONS_AT_ONCE = 4
# An invitation's next attempt is refused (429) this long: it stays good until it registers a
# platform, so this bounds what a leaked one makes the tool send.
INVITE_RETRY_INTERVAL_S = REGISTRATION_DEADLINE_S
# Names in refusals.
CONFIGURATION = "OpenID configuration"
KEY_SET = "key set"
REGISTRATION_ENDPOINT = "registration endpoint"

# Tests put their own here, to pass the retry interval without waiting.
clock: Callable[[], float] = time.monotonic


def _signer(secret_key: SecretStr) -> TimestampSigner:
    return TimestampSigner(secret_key.get_secret_value(), salt=INVITE_SALT)


def invite_url(origin: str, secret_key: SecretStr) -> str:
    """The URL an administrator pastes into the platform's dynamic registration."""
    token = _signer(secret_key).sign(secrets.token_urlsafe(12)).decode("ascii")
    return f"{origin}{REGISTER_PATH}?{INVITE_PARAMETER}={token}"


USED_UP = f"{INVITE_USED[0].upper()}{INVITE_USED[1:]}."


def invite_digest(nonce: str) -> str:
    """What is stored of an invitation once it has registered a platform (lti_used_invites)."""
    return hashlib.sha256(nonce.encode()).hexdigest()


def check_invite(engine: Engine, token: str, secret_key: SecretStr) -> str:
    """The invitation's digest, or a Refusal unless it is this server's, younger than a week,
    and unused."""
    try:
        nonce = _signer(secret_key).unsign(token, max_age=INVITE_MAX_AGE_S).decode()
    except SignatureExpired:
        raise Refusal(
            403,
            "invite_expired",
            "This registration URL is more than a week old. Ask the tool's operator for a new "
            "one (normdive lti invite).",
        ) from None
    except BadSignature:
        raise Refusal(
            403,
            "no_invite",
            "This registration URL carries no invitation from the tool's operator. Ask them "
            "for one (normdive lti invite).",
        ) from None
    digest = invite_digest(nonce)
    if invite_used(engine, digest):
        raise Refusal(403, "invite_used", USED_UP)
    return digest


class _Attempts:
    """The registrations this process runs, shared by its event loops and threads (a plain
    lock, never held across an await)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._began: dict[str, float] = {}

    def begin(self, invite: str) -> None:
        """Count one attempt in, or a Refusal (nothing fetched) when it must wait."""
        with self._lock:
            now = clock()
            self._began = {
                key: began
                for key, began in self._began.items()
                if now - began < INVITE_RETRY_INTERVAL_S
            }
            began = self._began.get(invite)
            if began is not None:
                wait_s = max(1, math.ceil(INVITE_RETRY_INTERVAL_S - (now - began)))
                raise Refusal(
                    429,
                    "registration_too_soon",
                    f"This registration URL was tried {now - began:.0f} s ago; it may be tried "
                    f"once every {INVITE_RETRY_INTERVAL_S:g} s. Try again in {wait_s} s.",
                    retry_after_s=wait_s,
                )
            if self._running >= MAX_REGISTRATIONS_AT_ONCE:
                raise Refusal(
                    503,
                    "registrations_busy",
                    f"This tool is registering {MAX_REGISTRATIONS_AT_ONCE} platforms at this "
                    f"moment, the most it does at once. Try again in "
                    f"{REGISTRATION_DEADLINE_S:g} s.",
                    retry_after_s=math.ceil(REGISTRATION_DEADLINE_S),
                )
            self._running += 1
            self._began[invite] = now

    def end(self) -> None:
        with self._lock:
            self._running -= 1


_attempts = _Attempts()


def _unreachable(what: str, url: str, detail: str) -> Refusal:
    """Refused, timed out, TLS failed, a 404 and a 500 read alike; `detail` goes to the log."""
    logger.info("dynamic registration: the platform's %s at %s: %s", what, url[:200], detail)
    return Refusal(
        400,
        "registration_failed",
        f"The platform's {what} at {url[:200]} gave no 2xx answer within the "
        f"{REGISTRATION_DEADLINE_S:g} s a registration may take. Check the URL, and that this "
        "tool can reach it; the tool's log says what happened.",
    )


async def _answer(
    http: httpx.AsyncClient, deadline: float, method: str, url: str, what: str, **sent: Any
) -> bytes:
    """The 2xx answer's body, read as it arrives, by `deadline` (anyio's clock), or a Refusal."""
    try:
        with anyio.fail_at(deadline):
            answer = await fetch(http, method, url, MAX_ANSWER_BYTES, **sent)
    except TimeoutError:
        raise _unreachable(what, url, "the registration's deadline passed") from None
    except AnswerTooLarge:
        raise Refusal(
            400,
            "registration_failed",
            f"The platform's {what} is over {MAX_ANSWER_BYTES // 1024} KiB, which is too large.",
        ) from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise _unreachable(what, url, type(error).__name__) from None
    if not 200 <= answer.status < 300:
        raise _unreachable(what, url, f"answered {answer.status}")
    return answer.body


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        found = parsed(body)
    except NotPlatformJson as problem:
        raise Refusal(400, "registration_failed", f"The platform's {what} is {problem}.") from None
    if not isinstance(found, dict):
        raise Refusal(400, "registration_failed", f"The platform's {what} is not an object.")
    return found


def client_registration(origin: str, lesson: Lesson) -> dict[str, Any]:
    """The OpenID client registration; its messages, LtiSubmissionReviewRequest among them, let
    a platform's gradebook open a learner's D9 for line items it made itself too."""
    launch = origin + LAUNCH_PATH
    return {
        "application_type": "web",
        "response_types": ["id_token"],
        "grant_types": ["implicit", "client_credentials"],
        "initiate_login_uri": origin + LOGIN_PATH,
        "redirect_uris": [launch],
        "client_name": title(lesson),
        "jwks_uri": origin + JWKS_PATH,
        "token_endpoint_auth_method": "private_key_jwt",
        "scope": " ".join(SCOPES),
        TOOL_CONFIGURATION: {
            "domain": urlsplit(origin).netloc,
            "target_link_uri": launch,
            "description": lesson.summary,
            "claims": ["iss", "sub"],
            "messages": [{"type": message, "target_link_uri": launch} for message in MESSAGE_TYPES],
        },
    }


def _registrant_url(url: str, what: str, this_machine_allowed: bool) -> None:
    problem = registrant_url_problem(url, this_machine_allowed=this_machine_allowed)
    if problem is not None:
        raise Refusal(400, "registration_failed", f"The platform's {what} {problem}.")


def _endpoint(configuration: dict[str, Any], name: str, this_machine_allowed: bool) -> str:
    value = configuration.get(name)
    what = f"OpenID configuration's {name}"
    if not isinstance(value, str):
        raise Refusal(400, "registration_failed", f"The platform's {what} is missing.")
    _registrant_url(value, what, this_machine_allowed)
    return value


@dataclass(frozen=True)
class _Registered:
    """What the platform said, fetched within the deadline, before anything is stored."""

    issuer: str
    endpoints: dict[str, str]
    key_set: dict[str, object]
    client_id: str
    deployment_id: str


async def _exchange(
    *,
    configuration_url: str,
    registration_token: str | None,
    origin: str,
    lesson: Lesson,
    this_machine_allowed: bool,
) -> _Registered:
    """In this order: a platform whose key set cannot be read is sent no registration to keep."""
    deadline = anyio.current_time() + REGISTRATION_DEADLINE_S
    async with httpx.AsyncClient(timeout=REGISTRATION_DEADLINE_S, follow_redirects=False) as http:
        configuration = _json(
            await _answer(http, deadline, "GET", configuration_url, CONFIGURATION), CONFIGURATION
        )
        issuer = _endpoint(configuration, "issuer", this_machine_allowed)
        if origin_of(issuer) != origin_of(configuration_url):
            raise Refusal(
                400,
                "registration_failed",
                f"The platform's issuer ({issuer[:120]}) is not on the site its configuration "
                "came from, so it cannot be trusted to speak for it.",
            )
        endpoints = {
            name: _endpoint(configuration, name, this_machine_allowed)
            for name in ("authorization_endpoint", "token_endpoint", "jwks_uri")
        }
        registration_endpoint = _endpoint(
            configuration, "registration_endpoint", this_machine_allowed
        )
        jwks_url = endpoints["jwks_uri"]
        try:
            key_set = key_set_of(await _answer(http, deadline, "GET", jwks_url, KEY_SET), jwks_url)
        except Refusal as refusal:
            raise Refusal(400, "registration_failed", refusal.message) from None
        headers = {"Content-Type": "application/json"}
        if registration_token:
            headers["Authorization"] = f"Bearer {registration_token}"
        body = await _answer(
            http,
            deadline,
            "POST",
            registration_endpoint,
            REGISTRATION_ENDPOINT,
            content=json.dumps(client_registration(origin, lesson)),
            headers=headers,
        )
    registered = _json(body, "registration")
    client_id = registered.get("client_id")
    tool = registered.get(TOOL_CONFIGURATION)
    deployment = tool.get("deployment_id") if isinstance(tool, dict) else None
    if not isinstance(client_id, str) or not isinstance(deployment, str):
        raise Refusal(
            400,
            "registration_failed",
            "The platform's registration names no client_id or no deployment_id.",
        )
    return _Registered(issuer, endpoints, key_set, client_id, deployment)


def _store(engine: Engine, registered: _Registered, invite: str | None) -> Registration:
    try:
        registration = register(
            engine,
            validated(
                issuer=registered.issuer,
                client_id=registered.client_id,
                auth_login_url=registered.endpoints["authorization_endpoint"],
                token_url=registered.endpoints["token_endpoint"],
                jwks_url=registered.endpoints["jwks_uri"],
                deployment_ids=(registered.deployment_id,),
            ),
            invite=invite,
        )
    except InviteUsed:
        raise Refusal(403, "invite_used", USED_UP) from None
    except RegistrationProblem as problem:
        raise Refusal(400, "registration_failed", f"Not registered: {problem}") from None
    # The key set fetched moments ago: the platform's first launch needs no fetch of its own.
    store_key_set(engine, registration, registered.key_set)
    return registration


async def register_dynamically(
    engine: Engine,
    *,
    configuration_url: str,
    registration_token: str | None,
    origin: str,
    lesson: Lesson,
    invite: str | None = None,
    this_machine_allowed: bool = False,
) -> Registration:
    """Register the tool with the platform and store the result, `invite` used up; a Refusal,
    nothing stored, otherwise. `this_machine_allowed`: NORMDIVE_DEV_LTI_LOOPBACK."""
    if registration_token is not None and not registration_token.isprintable():
        raise Refusal(400, "registration_failed", "The registration token is malformed.")
    if not configuration_url.isprintable():
        raise Refusal(400, "registration_failed", "The openid_configuration URL is malformed.")
    _registrant_url(configuration_url, "openid_configuration URL", this_machine_allowed)
    _attempts.begin(invite or "")
    try:
        registered = await _exchange(
            configuration_url=configuration_url,
            registration_token=registration_token,
            origin=origin,
            lesson=lesson,
            this_machine_allowed=this_machine_allowed,
        )
    finally:
        _attempts.end()
    return await anyio.to_thread.run_sync(_store, engine, registered, invite)
