"""A platform's public keys (its JWKS, RFC 7517), which sign its id_tokens.

The key set is fetched from the registration's JWKS URL with a timeout, kept in the database
(lti_platform_key_sets) so every worker shares one copy, and fetched again once when an
id_token names a key id the copy lacks (the platform rotated its keys). A key id still missing
after that one fetch is refused. joserfc parses the key set and does every key operation.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import cast

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, KeySetSerialization, RSAKey
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.exc import IntegrityError

from normdive.lti.refusal import Refusal
from normdive.lti.registrations import Registration
from normdive.store.tables import LtiPlatformKeySet

logger = logging.getLogger(__name__)

# How long fetching a platform's key set may take, in seconds (connect, each read, and the
# pool wait each get this much). A platform that does not answer is refused in seconds, not
# held for the operating system's TCP timeout.
JWKS_FETCH_TIMEOUT_S = 5.0
# A key set of a dozen RSA keys is about 6 KiB; anything far beyond is not a key set.
MAX_JWKS_BYTES = 256 * 1024


def _fetch(registration: Registration) -> dict[str, object]:
    """The key set at the registration's JWKS URL, as JSON, or a Refusal saying why not."""
    try:
        with (
            httpx.Client(timeout=JWKS_FETCH_TIMEOUT_S, follow_redirects=False) as client,
            client.stream("GET", registration.jwks_url) as response,
        ):
            if response.status_code != 200:
                raise Refusal(
                    401,
                    "jwks_status",
                    f"The platform's key set at {registration.jwks_url} answered "
                    f"{response.status_code}, not 200. Check the JWKS URL registered for "
                    f"{registration.issuer}.",
                )
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise Refusal(
                        401,
                        "jwks_too_large",
                        f"The platform's key set at {registration.jwks_url} is over "
                        f"{MAX_JWKS_BYTES // 1024} KiB, which no key set is.",
                    )
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise Refusal(
            401,
            "jwks_unreachable",
            f"The platform's key set at {registration.jwks_url} could not be fetched "
            f"({type(error).__name__}). Check the JWKS URL registered for "
            f"{registration.issuer}, and that this server can reach it.",
        ) from None
    try:
        key_set = json.loads(body)
        KeySet.import_key_set(key_set)
    except (ValueError, TypeError, KeyError, JoseError):
        raise Refusal(
            401,
            "jwks_invalid",
            f"What {registration.jwks_url} serves is not a JSON Web Key Set (RFC 7517).",
        ) from None
    if not isinstance(key_set, dict):
        raise Refusal(401, "jwks_invalid", f"{registration.jwks_url} serves no key set.")
    return key_set


def _cached(engine: Engine, registration: Registration) -> dict[str, object] | None:
    with engine.connect() as connection:
        key_set = connection.execute(
            select(LtiPlatformKeySet.key_set).where(
                LtiPlatformKeySet.registration_id == registration.id
            )
        ).scalar_one_or_none()
    return key_set


def _store(engine: Engine, registration: Registration, key_set: dict[str, object]) -> None:
    """Replace the cached key set. Two workers storing at once: the second's insert fails on
    the key, and the first's copy (fetched at the same moment) stands."""
    try:
        with engine.begin() as connection:
            connection.execute(
                delete(LtiPlatformKeySet).where(
                    LtiPlatformKeySet.registration_id == registration.id
                )
            )
            connection.execute(
                insert(LtiPlatformKeySet).values(
                    registration_id=registration.id,
                    key_set=key_set,
                    fetched_at=datetime.now(UTC),
                )
            )
    except IntegrityError:
        logger.info("another worker stored %s's key set at the same moment", registration.issuer)


def _rsa_key(key_set: dict[str, object], kid: str) -> RSAKey | None:
    # Validated as a key set when it was fetched.
    keys = KeySet.import_key_set(cast(KeySetSerialization, key_set))
    for key in keys:
        if key.kid == kid and isinstance(key, RSAKey):
            return key
    return None


def signing_key(engine: Engine, registration: Registration, kid: str) -> RSAKey:
    """The platform's RSA public key with this key id: from the cached key set, else from one
    fresh fetch. A Refusal when the platform has no such key."""
    cached = _cached(engine, registration)
    if cached is not None:
        key = _rsa_key(cached, kid)
        if key is not None:
            return key
    fresh = _fetch(registration)
    _store(engine, registration, fresh)
    key = _rsa_key(fresh, kid)
    if key is None:
        raise Refusal(
            401,
            "unknown_kid",
            f"The id_token is signed with a key (kid {kid[:64]!r}) that the platform's key set "
            f"at {registration.jwks_url} does not hold, even fetched again just now. The "
            "token was not signed by the registered platform, or its key set is out of date.",
        )
    return key
