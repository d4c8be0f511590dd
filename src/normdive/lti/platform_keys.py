"""A platform's public keys (its JWKS, RFC 7517), which sign its id_tokens: fetched from its
JWKS URL, kept in the database for every worker, and fetched again for a key id the copy lacks
or whose key fails a signature. An unknown key id costs a sender nothing, so each process
fetches a registration's key set at most once per JWKS_REFETCH_COOLDOWN_S.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, KeySetSerialization, RSAKey
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.exc import IntegrityError

from normdive.lti.platform_http import AnswerTooLarge, fetch_within
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import Registration
from normdive.store.tables import LtiPlatformKeySet

logger = logging.getLogger(__name__)

# Connecting, headers and body together, however the platform paces its bytes: refused in
# seconds, not after the operating system's TCP timeout.
JWKS_FETCH_TIMEOUT_S = 5.0
# A key set of a dozen RSA keys is about 6 KiB; anything far beyond is not a key set.
MAX_JWKS_BYTES = 256 * 1024
# A platform that rotates its keys waits at most this long for the tool to take the new one.
JWKS_REFETCH_COOLDOWN_S = 60.0

# Tests put their own here, to pass the cooldown without waiting.
clock: Callable[[], float] = time.monotonic


@dataclass
class _Fetches:
    """One at a time: launches that miss together wait for it and share what it stored."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    began_at: float | None = None


# By database (an id is unique only within one), registration id and JWKS URL (a new URL
# starts afresh).
_fetches: dict[tuple[str, int, str], _Fetches] = {}
_fetches_guard = threading.Lock()


def _fetches_of(engine: Engine, registration: Registration) -> _Fetches:
    key = (str(engine.url), registration.id, registration.jwks_url)
    with _fetches_guard:
        return _fetches.setdefault(key, _Fetches())


def _fetch(registration: Registration) -> dict[str, object]:

    def unreachable(why: str) -> Refusal:
        return Refusal(
            401,
            "jwks_unreachable",
            f"The platform's key set at {registration.jwks_url} could not be fetched ({why}). "
            f"Check the JWKS URL registered for {registration.issuer}, and that this server "
            "can reach it.",
        )

    try:
        answer = fetch_within(JWKS_FETCH_TIMEOUT_S, "GET", registration.jwks_url, MAX_JWKS_BYTES)
    except AnswerTooLarge:
        raise Refusal(
            401,
            "jwks_too_large",
            f"The platform's key set at {registration.jwks_url} is over "
            f"{MAX_JWKS_BYTES // 1024} KiB, which no key set is.",
        ) from None
    except TimeoutError:
        raise unreachable(f"it took over {JWKS_FETCH_TIMEOUT_S:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise unreachable(type(error).__name__) from None
    if answer.status != 200:
        raise Refusal(
            401,
            "jwks_status",
            f"The platform's key set at {registration.jwks_url} answered {answer.status}, not "
            f"200. Check the JWKS URL registered for {registration.issuer}.",
        )
    return key_set_of(answer.body, registration.jwks_url)


def key_set_of(body: bytes, url: str) -> dict[str, object]:
    """A JSON Web Key Set, or a Refusal."""
    try:
        key_set = parsed(body)
        KeySet.import_key_set(key_set)
    except (NotPlatformJson, ValueError, TypeError, KeyError, JoseError):
        raise Refusal(
            401, "jwks_invalid", f"What {url} serves is not a JSON Web Key Set (RFC 7517)."
        ) from None
    if not isinstance(key_set, dict):
        raise Refusal(401, "jwks_invalid", f"{url} serves no key set.")
    return key_set


def _cached(engine: Engine, registration: Registration) -> dict[str, object] | None:
    with engine.connect() as connection:
        key_set = connection.execute(
            select(LtiPlatformKeySet.key_set).where(
                LtiPlatformKeySet.registration_id == registration.id
            )
        ).scalar_one_or_none()
    return key_set


def store_key_set(engine: Engine, registration: Registration, key_set: dict[str, object]) -> None:
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


def _rsa_key(key_set: dict[str, object] | None, kid: str) -> RSAKey | None:
    if key_set is None:
        return None
    # Validated as a key set when it was fetched.
    keys = KeySet.import_key_set(cast(KeySetSerialization, key_set))
    for key in keys:
        if key.kid == kid and isinstance(key, RSAKey):
            return key
    return None


def _refused_within_cooldown(
    engine: Engine, registration: Registration, kid: str, since_s: float
) -> Refusal:
    wait_s = max(1, math.ceil(JWKS_REFETCH_COOLDOWN_S - since_s))
    if _cached(engine, registration) is None:
        return Refusal(
            401,
            "jwks_unreachable",
            f"The platform's key set at {registration.jwks_url} could not be fetched "
            f"{since_s:.0f} s ago, and this tool tries at most once every "
            f"{JWKS_REFETCH_COOLDOWN_S:g} s. Launch again in {wait_s} s; if it keeps "
            f"happening, check the JWKS URL registered for {registration.issuer}.",
            retry_after_s=wait_s,
        )
    return Refusal(
        401,
        "unknown_kid",
        f"The id_token is signed with a key (kid {kid[:64]!r}) that the platform's key set at "
        f"{registration.jwks_url} does not hold as this tool last fetched it. It fetched it "
        f"(or tried to) {since_s:.0f} s ago, and fetches it at most once every "
        f"{JWKS_REFETCH_COOLDOWN_S:g} s. The token was not signed by the registered platform, "
        f"or the platform published the key moments ago (then launch again in {wait_s} s).",
        retry_after_s=wait_s,
    )


def same_key(one: RSAKey | None, other: RSAKey | None) -> bool:
    """Whether two keys are one key (their RFC 7638 thumbprints agree)."""
    return one is not None and other is not None and one.thumbprint() == other.thumbprint()


def signing_key(
    engine: Engine, registration: Registration, kid: str, *, distrusted: RSAKey | None = None
) -> RSAKey:
    """From the cached key set, else a fetch unless one began within the cooldown; a Refusal
    when there is no such key. `distrusted`: the key a signature just failed with (a platform
    may replace a key and keep its id), returned if still served: the caller then refuses."""
    key = _rsa_key(_cached(engine, registration), kid)
    if key is not None and not same_key(key, distrusted):
        return key
    fetches = _fetches_of(engine, registration)
    with fetches.lock:
        now = clock()
        if fetches.began_at is not None and now - fetches.began_at < JWKS_REFETCH_COOLDOWN_S:
            # A fetch began moments ago, perhaps the one this launch waited for: what it stored
            # is all there is until the cooldown ends.
            key = _rsa_key(_cached(engine, registration), kid)
            if key is not None:
                return key
            raise _refused_within_cooldown(engine, registration, kid, now - fetches.began_at)
        fetches.began_at = now
        fresh = _fetch(registration)
        store_key_set(engine, registration, fresh)
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
