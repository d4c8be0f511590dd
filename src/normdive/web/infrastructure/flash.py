"""A refused form, carried across Post/Redirect/Get for a browser without JavaScript.

A page drawn as the answer to a POST is a history entry the browser cannot go back to or
reload without sending the form again ("Confirm form resubmission", ERR_CACHE_MISS). So a
browser's own navigation (a form submitted without JavaScript: `Sec-Fetch-Mode: navigate`,
Fetch Metadata) that the lesson refuses gets a 303 to the page instead, and the refusal (its
message and everything the learner sent, so nothing typed is lost) rides along in a cookie:

- signed with the server's secret key under a salt of its own and timestamped (itsdangerous),
  so it cannot be forged, and is read only for FLASH_MAX_AGE_S: long enough for the redirect,
  too short to surface on a later visit;
- bound to the learner it was written for: another learner's browser cannot replay it;
- read once: the page that shows it deletes it, so Back or a reload shows the page as it is.

Any other client (a script, a test without Fetch Metadata) still gets the page with the
refusal's own status (409 / 422), which says more to a program than a redirect does.
"""

from __future__ import annotations

import base64
import json
import zlib
from types import MappingProxyType

from itsdangerous import BadSignature, TimestampSigner
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import Response

from normdive.config import Settings
from normdive.web.infrastructure.identity import Learner
from normdive.web.security.framing import set_lesson_cookie
from normdive.web.views.page import FORMS, Refusal

FLASH_COOKIE = "normdive_refusal"
# Distinguishes this signature from any other use of the same secret key.
FLASH_SALT = "normdive.refusal-flash"
# The redirect is followed at once; a minute allows for a slow phone on a slow network.
FLASH_MAX_AGE_S = 60
# The largest cookie value written (browsers keep 4,096 bytes per cookie, name and attributes
# included). A refusal that does not fit (a takeaway many times over its limit, compressing
# badly) is answered as any other client's is, so that what was typed is never cut.
FLASH_MAX_BYTES = 3_800
# The Fetch Metadata a browser sends with a top-level or framed page navigation (a form it
# submitted itself), and never with fetch().
NAVIGATE = "navigate"


def is_navigation(request: Request) -> bool:
    """Whether the browser itself submitted the form (a page without JavaScript)."""
    return request.headers.get("sec-fetch-mode", "").lower() == NAVIGATE


def _signer(secret_key: SecretStr) -> TimestampSigner:
    return TimestampSigner(secret_key.get_secret_value(), salt=FLASH_SALT)


def flash_value(refusal: Refusal, learner_id: str, secret_key: SecretStr) -> str | None:
    """The cookie value carrying `refusal` for `learner_id`, or None when it does not fit."""
    body = json.dumps(
        {
            "learner": learner_id,
            "form": refusal.form,
            "message": refusal.message,
            "values": dict(refusal.values),
            "anchor": refusal.anchor,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    packed = base64.urlsafe_b64encode(zlib.compress(body.encode("utf-8"))).decode("ascii")
    value = _signer(secret_key).sign(packed).decode("ascii")
    return value if len(value) <= FLASH_MAX_BYTES else None


def refusal_from(value: str | None, learner_id: str, secret_key: SecretStr) -> Refusal | None:
    """The refusal a flash cookie carries for `learner_id`; None for anything else (missing,
    forged, expired, another learner's, or not the shape written)."""
    if not value or len(value) > FLASH_MAX_BYTES:
        return None
    try:
        packed = _signer(secret_key).unsign(value, max_age=FLASH_MAX_AGE_S)
        # The signature vouches for the bytes; decompression is still bounded by them.
        body = json.loads(zlib.decompress(base64.urlsafe_b64decode(packed)).decode("utf-8"))
    except (BadSignature, ValueError, zlib.error, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or body.get("learner") != learner_id:
        return None
    form, message, values, anchor = (body.get(k) for k in ("form", "message", "values", "anchor"))
    if (
        form not in FORMS
        or not isinstance(message, str)
        or not isinstance(anchor, str)
        or not isinstance(values, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())
    ):
        return None
    return Refusal(form, message, MappingProxyType(values), anchor)


def set_flash(response: Response, value: str, learner: Learner, settings: Settings) -> None:
    _write(response, value, FLASH_MAX_AGE_S, learner, settings)


def clear_flash(response: Response, learner: Learner, settings: Settings) -> None:
    _write(response, "", 0, learner, settings)


def _write(
    response: Response, value: str, max_age: int, learner: Learner, settings: Settings
) -> None:
    # Inside a platform's iframe the cookie must be partitioned like the learner's own.
    set_lesson_cookie(
        response, FLASH_COOKIE, value, settings, max_age=max_age, framed=learner.framed
    )
