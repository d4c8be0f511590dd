"""Who is asking: the anonymous learner behind the `normdive_learner` cookie.

The cookie holds the learner's id (32 hex characters, 128 random bits) signed with
itsdangerous under the server's secret key. A missing, malformed or tampered cookie quietly
yields a fresh learner: a learner never sees an error for a bad cookie, and never reaches
anyone else's events.

Reading stores nothing. A visitor without a valid cookie gets a freshly minted id, signed into
the cookie, without the database being touched: a crawler or a health check that forgets its
cookie costs no row. The learner is stored by their first write (web.routes.actions), so a validly
signed cookie may name an id the store does not hold yet; only this server can sign one, and
such a learner simply has no events.
"""

from __future__ import annotations

from dataclasses import dataclass

from itsdangerous import BadSignature, Signer
from starlette.requests import Request
from starlette.responses import Response

from normdive.config import Settings
from normdive.store.event_store import is_learner_id as is_learner_id  # the store's, re-exported
from normdive.store.event_store import new_learner_id
from normdive.web.security.framing import FRAME_COOKIE, set_lesson_cookie

COOKIE_NAME = "normdive_learner"
# One year: a learner coming back to an optional deep dive months later still finds their work.
COOKIE_MAX_AGE_S = 365 * 24 * 60 * 60
# Distinguishes this signature from any other use of the same secret key.
SIGNER_SALT = "normdive.learner-cookie"
# What every response that names a learner says to caches (RFC 9111 5.2.2.5).
CACHE_CONTROL = "no-store"


@dataclass(frozen=True)
class Learner:
    id: str
    new: bool  # minted by this request (not stored yet): the response must carry the cookie
    # Inside a platform's iframe (an LTI launch set the framing cookie): the cookie must stay
    # SameSite=None, Secure and Partitioned to keep working there.
    framed: bool = False


def make_signer(settings: Settings) -> Signer:
    return Signer(settings.secret_key.get_secret_value(), salt=SIGNER_SALT)


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


def resolve_learner(request: Request, signer: Signer) -> Learner:
    """The learner the cookie vouches for, or a freshly minted one; stores nothing."""
    learner_id = learner_from_cookie(request.cookies.get(COOKIE_NAME), signer)
    # Only the cookie's attributes follow from this; the framing policy checks its signature.
    framed = FRAME_COOKIE in request.cookies
    if learner_id is not None:
        return Learner(id=learner_id, new=False, framed=framed)
    return Learner(id=new_learner_id(), new=True, framed=framed)


def attach_cookie(response: Response, learner: Learner, signer: Signer, settings: Settings) -> None:
    """Set the cookie on every response to a learner, which also renews its year. Such a
    response is the learner's own (the page and /api/state carry their form token), so no
    cache may keep it: Cache-Control: no-store."""
    response.headers["Cache-Control"] = CACHE_CONTROL
    value = cookie_value(learner.id, signer)
    set_lesson_cookie(
        response, COOKIE_NAME, value, settings, max_age=COOKIE_MAX_AGE_S, framed=learner.framed
    )
