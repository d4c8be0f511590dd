"""LTI Dynamic Registration 1.0: an administrator pastes one URL into the platform, and the
registration is stored.

The operator makes that URL with `normdive lti invite`: /lti/register with an invitation
signed with the secret key, good for INVITE_MAX_AGE_S and for one registration, so that nobody
else can register a platform here (a leaked URL that has been used registers nothing more).
The platform opens it with `openid_configuration` (its OpenID configuration's URL) and usually
a `registration_token`. The tool fetches the configuration (the issuer must
be the configuration URL's own site, and every endpoint https), posts its client
registration (tool_config's facts) to the platform's registration endpoint, and stores what
comes back (client id, deployment id) with the configuration's endpoints as a registration.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any
from urllib.parse import urlsplit

import httpx
from itsdangerous import BadSignature, SignatureExpired, TimestampSigner
from pydantic import SecretStr
from sqlalchemy import Engine

from normdive.config import origin_of
from normdive.lesson.content import Lesson
from normdive.lti.platform_http import AnswerTooLarge, read_body
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import (
    INVITE_USED,
    InviteUsed,
    Registration,
    RegistrationProblem,
    invite_used,
    register,
    url_problem,
    validated,
)
from normdive.lti.tool_config import JWKS_PATH, LAUNCH_PATH, LOGIN_PATH, SCOPES, title

REGISTER_PATH = "/lti/register"
INVITE_PARAMETER = "invite"
INVITE_SALT = "normdive.lti-registration-invite"
# An invitation is good for a week: time for an administrator to get to it.
INVITE_MAX_AGE_S = 7 * 24 * 60 * 60
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
# How long each request to the platform may take, and the most it may answer, in bytes.
REGISTRATION_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 256 * 1024


def _signer(secret_key: SecretStr) -> TimestampSigner:
    return TimestampSigner(secret_key.get_secret_value(), salt=INVITE_SALT)


def invite_url(origin: str, secret_key: SecretStr) -> str:
    """The URL an administrator pastes into the platform's dynamic registration."""
    token = _signer(secret_key).sign(secrets.token_urlsafe(12)).decode("ascii")
    return f"{origin}{REGISTER_PATH}?{INVITE_PARAMETER}={token}"


# The refusal of an invitation that has registered a platform, as a sentence.
USED_UP = f"{INVITE_USED[0].upper()}{INVITE_USED[1:]}."


def invite_digest(nonce: str) -> str:
    """What is stored of an invitation once it has registered a platform (lti_used_invites)."""
    return hashlib.sha256(nonce.encode()).hexdigest()


def check_invite(engine: Engine, token: str, secret_key: SecretStr) -> str:
    """The invitation's digest (invite_digest), or a Refusal unless `token` is an invitation
    this server made, younger than a week, that has not registered a platform yet."""
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


def _answer(http: httpx.Client, method: str, url: str, what: str, **sent: Any) -> tuple[int, bytes]:
    """The platform's answer's status and body, read as it arrives and refused as soon as it
    passes MAX_ANSWER_BYTES: a platform cannot make the tool hold more than that."""
    with http.stream(method, url, **sent) as answer:
        try:
            return answer.status_code, read_body(answer, MAX_ANSWER_BYTES)
        except AnswerTooLarge:
            raise Refusal(
                400,
                "registration_failed",
                f"The platform's {what} is over {MAX_ANSWER_BYTES // 1024} KiB, which is too "
                "large.",
            ) from None


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        found = parsed(body)
    except NotPlatformJson as problem:
        raise Refusal(400, "registration_failed", f"The platform's {what} is {problem}.") from None
    if not isinstance(found, dict):
        raise Refusal(400, "registration_failed", f"The platform's {what} is not an object.")
    return found


def _endpoint(configuration: dict[str, Any], name: str) -> str:
    value = configuration.get(name)
    problem = url_problem(value) if isinstance(value, str) else "missing"
    if problem is not None:
        raise Refusal(
            400,
            "registration_failed",
            f"The platform's OpenID configuration's {name} is not usable: {problem}.",
        )
    assert isinstance(value, str)
    return value


def client_registration(origin: str, lesson: Lesson) -> dict[str, Any]:
    """The tool's OpenID client registration with its LTI tool configuration."""
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
            "messages": [
                {"type": "LtiResourceLinkRequest"},
                {"type": "LtiDeepLinkingRequest", "target_link_uri": launch},
            ],
        },
    }


def register_dynamically(
    engine: Engine,
    *,
    configuration_url: str,
    registration_token: str | None,
    origin: str,
    lesson: Lesson,
    invite: str | None = None,
    client: httpx.Client | None = None,
) -> Registration:
    """Fetch the platform's configuration, register the tool with it, store the result (with
    `invite`, check_invite's digest, used up). A Refusal (nothing stored) for anything the
    platform gets wrong, or when the invitation registered a platform meanwhile."""
    if registration_token is not None and not registration_token.isprintable():
        raise Refusal(400, "registration_failed", "The registration token is malformed.")
    problem = url_problem(configuration_url) if configuration_url.isprintable() else "malformed"
    if problem is not None:
        raise Refusal(400, "registration_failed", f"The openid_configuration URL {problem}.")
    http = client or httpx.Client(timeout=REGISTRATION_TIMEOUT_S, follow_redirects=False)
    try:
        status, body = _answer(http, "GET", configuration_url, "OpenID configuration")
        if status != 200:
            raise Refusal(
                400,
                "registration_failed",
                f"The platform's OpenID configuration answered {status}.",
            )
        configuration = _json(body, "OpenID configuration")
        issuer = _endpoint(configuration, "issuer")
        if origin_of(issuer) != origin_of(configuration_url):
            raise Refusal(
                400,
                "registration_failed",
                f"The platform's issuer ({issuer[:120]}) is not on the site its configuration "
                "came from, so it cannot be trusted to speak for it.",
            )
        endpoints = {
            name: _endpoint(configuration, name)
            for name in ("authorization_endpoint", "token_endpoint", "jwks_uri")
        }
        registration_endpoint = _endpoint(configuration, "registration_endpoint")
        headers = {"Content-Type": "application/json"}
        if registration_token:
            headers["Authorization"] = f"Bearer {registration_token}"
        status, body = _answer(
            http,
            "POST",
            registration_endpoint,
            "registration",
            content=json.dumps(client_registration(origin, lesson)),
            headers=headers,
        )
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise Refusal(
            400,
            "registration_failed",
            f"The platform could not be reached ({type(error).__name__}).",
        ) from None
    finally:
        if client is None:
            http.close()
    if not 200 <= status < 300:
        raise Refusal(
            400,
            "registration_failed",
            f"The platform refused the tool's registration ({status}).",
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
    try:
        return register(
            engine,
            validated(
                issuer=issuer,
                client_id=client_id,
                auth_login_url=endpoints["authorization_endpoint"],
                token_url=endpoints["token_endpoint"],
                jwks_url=endpoints["jwks_uri"],
                deployment_ids=(deployment,),
            ),
            invite=invite,
        )
    except InviteUsed:
        raise Refusal(403, "invite_used", USED_UP) from None
    except RegistrationProblem as problem:
        raise Refusal(400, "registration_failed", f"Not registered: {problem}") from None
