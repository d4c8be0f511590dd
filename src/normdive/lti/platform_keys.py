"""A platform's public keys (its JWKS, RFC 7517), which sign its id_tokens.

The key set is fetched from the registration's JWKS URL with a timeout, kept in the database
(lti_platform_key_sets) so every worker shares one copy, and fetched again when an id_token
names a key id the copy lacks (the platform rotated its keys), or a key id whose stored key
fails to verify the token's signature (the platform replaced the key and kept its id). A key
id still missing after that fetch is refused.

An unknown key id costs nothing before the signature is checked, so anyone holding a login's
state (one public GET /lti/login) could send made-up key ids for as long as the state lives.
Each worker process therefore begins at most one fetch of a registration's key set every
JWKS_REFETCH_COOLDOWN_S, successful or not: launches that miss at the same moment wait for
that one fetch and share it, and a launch that misses within the cooldown is refused at once,
without a request to the platform. A rotated key is found by the first launch that names it
after the cooldown. joserfc parses the key set and does every key operation.
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

# How long fetching a platform's key set may take, in seconds, all of it: connecting, the
# headers and the whole body (platform_http.fetch_within), however the platform paces its
# bytes. A platform that does not answer is refused in seconds, not held for the operating
# system's TCP timeout.
JWKS_FETCH_TIMEOUT_S = 5.0
# A key set of a dozen RSA keys is about 6 KiB; anything far beyond is not a key set.
MAX_JWKS_BYTES = 256 * 1024
# After a fetch of a registration's key set begins, how long (seconds) a launch naming a key
# id the stored copy lacks is refused without fetching again. A platform that rotates its
# keys waits at most this long for the tool to take its new key.
JWKS_REFETCH_COOLDOWN_S = 60.0

# The clock the cooldown is measured on, in seconds (monotonic). The tests put a clock of their
# own here, to move it past the cooldown without waiting.
clock: Callable[[], float] = time.monotonic


@dataclass
class _Fetches:
    """One registration's key set fetches in this process: one at a time (launches that miss
    together wait for it and share what it stored), and when the last one began."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    began_at: float | None = None


# Keyed by the database (a registration's id is only unique within its database), the
# registration's id and its JWKS URL (a registration given a new URL starts afresh). One entry
# per registration this process has fetched for.
_fetches: dict[tuple[str, int, str], _Fetches] = {}
_fetches_guard = threading.Lock()


def _fetches_of(engine: Engine, registration: Registration) -> _Fetches:
    key = (str(engine.url), registration.id, registration.jwks_url)
    with _fetches_guard:
        return _fetches.setdefault(key, _Fetches())


def _fetch(registration: Registration) -> dict[str, object]:
    """The key set at the registration's JWKS URL, as JSON, or a Refusal saying why not."""

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
    """`body` (what `url` served) as a JSON Web Key Set, or a Refusal saying it is none."""
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
    """Why a launch that misses within the cooldown is refused: the last fetch stored a key
    set without this key, or stored none (it failed)."""
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
    """The platform's RSA public key with this key id: from the cached key set, else from a
    fresh fetch when none began within the cooldown. A Refusal when the platform has no such
    key (or none is known within the cooldown).

    `distrusted`: the key under this id that a token's signature just failed to verify with.
    A platform may replace a key and keep its id, so the stored copy counts as missing and is
    fetched again, within the same cooldown. Returned again when the platform still serves it
    (or the cooldown holds): the caller then refuses the signature."""
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
