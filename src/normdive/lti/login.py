"""OIDC third-party login initiation (LTI 1.3 core 5.1.1, OpenID Connect Core 4): a state and
nonce, stored first so the launch can land on any worker, and the browser sent to the
platform's authorization endpoint. The state is bound to this browser by a cookie (the web
layer's) and, where the platform offers its storage (LTI client-side postMessages), by a secret
put there: a browser that keeps no third-party cookie still keeps the platform's storage.
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

# One redirect, but a learner may sit on the platform's login page first.
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
    """The platform's storage (lti-pm-s): the frame to post to, its origin, the key and secret."""

    target: str
    origin: str
    key: str
    secret: str


@dataclass(frozen=True)
class LoginRedirect:
    """The authorization endpoint with the request in its query, and the state minted."""

    url: str
    state: str
    registration: Registration
    storage: PlatformStorage | None = None


def storage_key_name(state: str) -> str:
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
        # No identifier holds a control character, and PostgreSQL text cannot hold NUL.
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
    """Refusal (429) at `limit` open logins. Reads only, so a refused login takes no write lock;
    logins begun at one moment may each see the count below it, as in web.security.ratelimit."""
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
    """A Refusal, nothing stored, when no registration allows it or `created_by` (a keyed hash
    of the client address) has `open_limit` logins open. `own_origin`: as the browser reached
    the tool; `launch_url`: the redirect_uri."""
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
