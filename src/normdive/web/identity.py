"""Who is asking: the anonymous learner behind the `normdive_learner` cookie.

The cookie holds the learner's id (32 hex characters, 128 random bits, created by the store)
signed with itsdangerous under the server's secret key. A missing, malformed or tampered
cookie, or one naming a learner the store does not know, quietly yields a fresh learner: a
learner never sees an error for a bad cookie, and never reaches anyone else's events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from itsdangerous import BadSignature, Signer
from starlette.requests import Request
from starlette.responses import Response

from normdive.config import Settings
from normdive.store.events import Store

COOKIE_NAME = "normdive_learner"
# One year: a learner coming back to an optional deep dive months later still finds their work.
COOKIE_MAX_AGE_S = 365 * 24 * 60 * 60
# Distinguishes this signature from any other use of the same secret key.
SIGNER_SALT = "normdive.learner-cookie"
LEARNER_ID_PATTERN = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Learner:
    id: str
    new: bool  # created by this request: the response must carry the cookie


def make_signer(settings: Settings) -> Signer:
    return Signer(settings.secret_key.get_secret_value(), salt=SIGNER_SALT)


def is_learner_id(value: str) -> bool:
    return LEARNER_ID_PATTERN.fullmatch(value) is not None


def learner_from_cookie(value: str | None, signer: Signer) -> str | None:
    """The learner id a cookie value vouches for, or None when it vouches for nothing."""
    if not value:
        return None
    try:
        learner_id = signer.unsign(value).decode("ascii")
    except (BadSignature, UnicodeDecodeError):
        return None
    return learner_id if is_learner_id(learner_id) else None


def cookie_value(learner_id: str, signer: Signer) -> str:
    return signer.sign(learner_id).decode("ascii")


def known_learner(request: Request, store: Store, signer: Signer) -> str | None:
    """The learner of this request if their cookie is valid and the store knows them."""
    learner_id = learner_from_cookie(request.cookies.get(COOKIE_NAME), signer)
    if learner_id is not None and store.learner_exists(learner_id):
        return learner_id
    return None


def resolve_learner(request: Request, store: Store, signer: Signer) -> Learner:
    """The learner of this request, created on the spot when there is none yet."""
    learner_id = known_learner(request, store, signer)
    if learner_id is not None:
        return Learner(id=learner_id, new=False)
    return Learner(id=store.create_learner(), new=True)


def attach_cookie(response: Response, learner: Learner, signer: Signer, settings: Settings) -> None:
    """Set the cookie on every response to a learner, which also renews its year."""
    response.set_cookie(
        COOKIE_NAME,
        cookie_value(learner.id, signer),
        max_age=COOKIE_MAX_AGE_S,
        path="/",
        secure=settings.cookie_secure,
        httponly=True,
        samesite="lax",
    )
