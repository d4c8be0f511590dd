"""Who may open the instructor view, and for which pool of learners.

Two ways in, both signed with the server's secret key (itsdangerous, each with its own salt, so
neither token is good as the other or as a learner cookie):
- a staff launch from a course (LTI roles Instructor, TeachingAssistant, ContentDeveloper,
  Administrator: normdive.lti.learners.is_staff) sets the instructor cookie for that course's
  context key;
- without an LMS, the operator prints a link (`normdive instructor-link [--context KEY]`):
  /instructor?access=TOKEN. Following it sets the same cookie and redirects to /instructor, so
  the token leaves the address bar (and any Referer).

The cookie and the link name one pool: a context key, or None for the learners who came outside
any LMS (the anonymous pool). The view shows that pool and nothing else; no request parameter
chooses another. Both expire after Settings.instructor_access_ttl_s (the timestamp is signed
in). Anything else (no cookie, a learner's cookie, a forged or expired token) is refused with a
readable 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from pydantic import SecretStr
from starlette.responses import Response

from normdive.config import Settings
from normdive.i18n.catalogues import N_, gettext
from normdive.store.tables import LTI_DIGEST_LENGTH
from normdive.web.security.framing import set_lesson_cookie

INSTRUCTOR_PATH = "/instructor"
INSTRUCTOR_COOKIE = "normdive_instructor"
ACCESS_PARAMETER = "access"
LINK_SALT = "normdive.instructor-link"
COOKIE_SALT = "normdive.instructor-cookie"
HEX_DIGITS = frozenset("0123456789abcdef")
# How the instructor view names a pool (Pool.describe).
OUTSIDE_ANY_LMS = N_("the learners who came outside any LMS")
COURSE = N_("the course %(course)s")

NO_ACCESS = (
    "The instructor view is for a course's instructors. Launch D9 from your course in the "
    "LMS with an instructor role, or ask the operator for an instructor link "
    "(normdive instructor-link)."
)
LINK_EXPIRED = (
    "This instructor link has expired. Ask the operator for a new one (normdive instructor-link)."
)
LINK_INVALID = (
    "This instructor link is not valid: it was not made by this server, or it was changed or "
    "cut short. Ask the operator for a new one (normdive instructor-link)."
)


@dataclass(frozen=True)
class Pool:
    """The learners an instructor sees: one course (an LTI context's key), or with None the
    learners who came outside any LMS."""

    context_key: str | None

    def describe(self) -> str:
        """The pool in words, in the current locale."""
        if self.context_key is None:
            return gettext(OUTSIDE_ANY_LMS)
        return gettext(COURSE) % {"course": self.context_key[:12]}


class AccessRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def is_context_key(text: str) -> bool:
    return len(text) == LTI_DIGEST_LENGTH and set(text) <= HEX_DIGITS


def _serializer(secret_key: SecretStr, salt: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key.get_secret_value(), salt=salt)


def _pool(payload: Any) -> Pool | None:
    if not isinstance(payload, dict) or set(payload) != {"context"}:
        return None
    context = payload["context"]
    if context is None or (isinstance(context, str) and is_context_key(context)):
        return Pool(context_key=context)
    return None


def _token(pool: Pool, secret_key: SecretStr, salt: str) -> str:
    return str(_serializer(secret_key, salt).dumps({"context": pool.context_key}))


def instructor_link(origin: str, pool: Pool, secret_key: SecretStr) -> str:
    return f"{origin}{INSTRUCTOR_PATH}?{ACCESS_PARAMETER}={_token(pool, secret_key, LINK_SALT)}"


def pool_from_link(token: str, secret_key: SecretStr, max_age_s: int) -> Pool:
    """The pool a link's token names; raises AccessRefused, saying why, for an expired,
    forged or mangled one."""
    try:
        payload = _serializer(secret_key, LINK_SALT).loads(token, max_age=max_age_s)
    except SignatureExpired:
        raise AccessRefused(LINK_EXPIRED) from None
    except BadSignature:
        raise AccessRefused(LINK_INVALID) from None
    pool = _pool(payload)
    if pool is None:
        raise AccessRefused(LINK_INVALID)
    return pool


def cookie_value(pool: Pool, secret_key: SecretStr) -> str:
    return _token(pool, secret_key, COOKIE_SALT)


def pool_from_cookie(value: str | None, secret_key: SecretStr, max_age_s: int) -> Pool | None:
    """The pool the instructor cookie vouches for, or None when it vouches for nothing."""
    if not value:
        return None
    try:
        payload = _serializer(secret_key, COOKIE_SALT).loads(value, max_age=max_age_s)
    except BadSignature:  # SignatureExpired is one
        return None
    return _pool(payload)


def set_instructor_cookie(response: Response, settings: Settings, pool: Pool, framed: bool) -> None:
    """The cookie that opens the view for `pool`, on the view's paths only. Inside a
    platform's iframe it must be SameSite=None, Secure and Partitioned (as the launch's)."""
    value = cookie_value(pool, settings.secret_key)
    max_age = settings.instructor_access_ttl_s
    set_lesson_cookie(
        response,
        INSTRUCTOR_COOKIE,
        value,
        settings,
        max_age=max_age,
        framed=framed,
        path=INSTRUCTOR_PATH,
    )
