"""OIDC third-party login initiation (LTI 1.3 core 5.1.1, OpenID Connect Core 4).

The platform sends the browser here (GET or POST) with its issuer, a login hint, the target
link URI and, optionally, its client id, a deployment id and a message hint. The tool answers
by sending the browser to the platform's authorization endpoint with a fresh state and nonce,
which it stores first (lti_states, lti_nonces), so the launch can land on any worker. The
state is also bound to this browser, so a state carried to another browser is refused at the
launch: by a cookie named after the state (the web layer's), and, when the platform offers
its storage (`lti_storage_target`, LTI client-side postMessages), by a secret the login page
puts there, whose digest the state keeps: a browser that keeps no third-party cookie still
keeps the platform's storage.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode, urlsplit, urlunsplit

from sqlalchemy import Connection, Engine, delete, func, insert, select

from normdive.config import origin_of
from normdive.lesson.wording import counted
from normdive.lti import registrations
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import Registration
from normdive.store.event_store import as_utc
from normdive.store.tables import LTI_IDENTIFIER_LENGTH, LTI_URL_LENGTH, LtiNonce, LtiState

# How long a login may take to come back as a launch: the platform's authorization step is
# one redirect, but a learner may sit on the platform's login page first.
LOGIN_TTL = timedelta(minutes=10)
# 32 random bytes, URL-safe: 43 characters, in the database's 64.
SECRET_BYTES = 32
TOO_MANY_OPEN_LOGINS = (
    "Too many launches from your network are still in progress: {limit} begun in the last "
    "{ttl_minutes} minutes and not finished, the most this tool holds for one address. Try "
    "again in {minutes}. (The limit is NORMDIVE_OPEN_LTI_LOGINS_PER_ADDRESS.)"
)
# Longest a login hint or message hint may be: platforms send ids or short opaque tokens.
MAX_HINT_LENGTH = 2048


# The login parameters worth keeping to start the login again in a window of its own.
RELAUNCH_PARAMETERS = (
    "iss",
    "login_hint",
    "target_link_uri",
    "client_id",
    "lti_deployment_id",
    "lti_message_hint",
)
# Longest name of the platform's storage frame (lti_storage_target): "_parent" or a frame's.
MAX_STORAGE_TARGET_LENGTH = 64


@dataclass(frozen=True)
class PlatformStorage:
    """The platform's storage (LTI client-side postMessages, lti-pm-s) a login uses: the
    frame to post to, the origin it answers from, and the key and secret value to put there."""

    target: str
    origin: str
    key: str
    secret: str


@dataclass(frozen=True)
class LoginRedirect:
    """Where to send the browser (the platform's authorization endpoint, with the request in
    its query) and the state minted for it; with the platform's storage when it offers it."""

    url: str
    state: str
    registration: Registration
    storage: PlatformStorage | None = None


def storage_key_name(state: str) -> str:
    """The key the login's secret is kept under in the platform's storage."""
    return f"normdive_state_{state}"


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _parameter(params: Mapping[str, str], name: str, *, required: bool, limit: int) -> str | None:
    value = params.get(name, "").strip()
    if not value:
        if required:
            raise Refusal(
                400,
                "login_parameter_missing",
                f"The platform's login request lacks {name}, which LTI 1.3 requires. Check "
                "that this tool's login URL is registered as its OIDC login (initiation) URL.",
            )
        return None
    if len(value) > limit:
        raise Refusal(
            400,
            "login_parameter_too_long",
            f"The platform's login request's {name} is longer than {limit} characters.",
        )
    if not value.isprintable():
        # NUL and other control characters: no identifier holds them (and PostgreSQL text
        # cannot hold NUL).
        raise Refusal(
            400,
            "login_parameter_malformed",
            f"The platform's login request's {name} holds control characters.",
        )
    return value


def same_origin(url: str, origin: str) -> bool:
    """True when `url` is on `origin` (scheme://host[:port], as the request reached us)."""
    try:
        parts = urlsplit(url)
        own = urlsplit(origin)
    except ValueError:
        return False
    return (parts.scheme, parts.netloc.lower()) == (own.scheme, own.netloc.lower())


def _refuse_when_too_many_open(
    connection: Connection, created_by: str, limit: int, now: datetime
) -> None:
    """Refusal (429) when `created_by` has `limit` logins begun and not finished. Reads only,
    so a refused login takes no write lock. Logins begun at the same moment may each see the
    count below the limit, as with the new-learner limit (web.security.ratelimit)."""
    open_logins = LtiState.created_by == created_by, LtiState.expires_at >= now
    count = connection.execute(select(func.count()).where(*open_logins)).scalar_one()
    if count < limit:
        return
    # A place opens when enough logins have expired to bring the count below the limit.
    freed_at = connection.execute(
        select(LtiState.expires_at)
        .where(*open_logins)
        .order_by(LtiState.expires_at)
        .offset(count - limit)
        .limit(1)
    ).scalar_one()
    retry_after_s = max(1, math.ceil((as_utc(freed_at) - now).total_seconds()))
    raise Refusal(
        429,
        "too_many_open_logins",
        TOO_MANY_OPEN_LOGINS.format(
            limit=limit,
            ttl_minutes=int(LOGIN_TTL.total_seconds() // 60),
            minutes=counted(math.ceil(retry_after_s / 60), "minute"),
        ),
        retry_after_s=retry_after_s,
    )


def begin_login(
    engine: Engine,
    params: Mapping[str, str],
    *,
    own_origin: str,
    launch_url: str,
    created_by: str,
    open_limit: int,
) -> LoginRedirect:
    """Store a state and nonce for the login the platform initiated and say where to send the
    browser; a Refusal (nothing stored) when the request is not one a registration allows, or
    when the client address `created_by` (a keyed hash) already has `open_limit` logins begun
    and not finished. `own_origin` is this tool's origin as the browser reached it;
    `launch_url` is where the platform must post the id_token (the redirect_uri)."""
    issuer = _parameter(params, "iss", required=True, limit=LTI_IDENTIFIER_LENGTH)
    login_hint = _parameter(params, "login_hint", required=True, limit=MAX_HINT_LENGTH)
    target_link_uri = _parameter(params, "target_link_uri", required=True, limit=LTI_URL_LENGTH)
    client_id = _parameter(params, "client_id", required=False, limit=LTI_IDENTIFIER_LENGTH)
    deployment_id = _parameter(
        params, "lti_deployment_id", required=False, limit=LTI_IDENTIFIER_LENGTH
    )
    message_hint = _parameter(params, "lti_message_hint", required=False, limit=MAX_HINT_LENGTH)
    storage_target = _parameter(
        params, "lti_storage_target", required=False, limit=MAX_STORAGE_TARGET_LENGTH
    )
    assert issuer is not None and login_hint is not None and target_link_uri is not None

    registration = registrations.find(engine, issuer, client_id)
    if registration is None:
        named = f"issuer {issuer}" + (f" with client id {client_id}" if client_id else "")
        raise Refusal(
            400,
            "unregistered_platform",
            f"No platform is registered here as {named}"
            + (
                ""
                if client_id
                else " (or it has several registrations and the login named no client_id)"
            )
            + ". Register it with `normdive lti register`, using the values the platform "
            "shows for this tool.",
        )
    if deployment_id is not None and deployment_id not in registration.deployment_ids:
        raise Refusal(
            400,
            "unregistered_deployment",
            f"The platform {issuer} launches from deployment {deployment_id!r}, which is not "
            "registered for it here. Add it with `normdive lti register` (remove and register "
            "again with every deployment id).",
        )
    if not same_origin(target_link_uri, own_origin):
        raise Refusal(
            400,
            "foreign_target_link_uri",
            f"The login's target_link_uri ({target_link_uri[:120]}) is not on this tool "
            f"({own_origin}). Check the launch URL configured for this tool on the platform.",
        )

    state = secrets.token_urlsafe(SECRET_BYTES)
    nonce = secrets.token_urlsafe(SECRET_BYTES)
    storage = None
    platform_origin = origin_of(registration.auth_login_url)
    if storage_target is not None and platform_origin is not None:
        storage = PlatformStorage(
            target=storage_target,
            origin=platform_origin,
            key=storage_key_name(state),
            secret=secrets.token_urlsafe(SECRET_BYTES),
        )
    relaunch = urlencode({k: params[k] for k in RELAUNCH_PARAMETERS if params.get(k)})
    now = datetime.now(UTC)
    with engine.begin() as connection:
        _refuse_when_too_many_open(connection, created_by, open_limit, now)
        # Logins never finished (the browser closed on the platform's page) go here.
        connection.execute(delete(LtiState).where(LtiState.expires_at < now))
        connection.execute(delete(LtiNonce).where(LtiNonce.expires_at < now))
        connection.execute(
            insert(LtiState).values(
                state=state,
                registration_id=registration.id,
                nonce=nonce,
                target_link_uri=target_link_uri,
                expires_at=now + LOGIN_TTL,
                storage_key=secret_digest(storage.secret) if storage is not None else None,
                relaunch_query=relaunch,
                created_by=created_by,
            )
        )
        connection.execute(
            insert(LtiNonce).values(
                nonce=nonce, registration_id=registration.id, expires_at=now + LOGIN_TTL
            )
        )

    query = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": registration.client_id,
        "redirect_uri": launch_url,
        "login_hint": login_hint,
        "state": state,
        "nonce": nonce,
    }
    if message_hint is not None:
        query["lti_message_hint"] = message_hint
    parts = urlsplit(registration.auth_login_url)
    joined = f"{parts.query}&{urlencode(query)}" if parts.query else urlencode(query)
    url = urlunsplit((parts.scheme, parts.netloc, parts.path, joined, ""))
    return LoginRedirect(url=url, state=state, registration=registration, storage=storage)
