"""Who may frame the lesson: nobody, unless a platform launched this browser into it.

Outside an LMS the Content-Security-Policy says `frame-ancestors 'none'` (and X-Frame-Options
DENY for browsers that predate it). An LTI launch sets the framing cookie: the origins of the
platform that launched (normdive.lti.registrations.Registration.framing_origins), signed with
the secret key, so nothing else can widen the list. Inside the platform's iframe that cookie
is partitioned (CHIPS): it exists only under the platform's top-level site, so the same
browser opening the lesson directly still gets 'none'. Requests carrying it get
`frame-ancestors` with those origins and no X-Frame-Options (whose ALLOW-FROM is dead).
The learner cookie of such a session keeps the attributes a framed cookie needs
(web.infrastructure.identity.attach_cookie).
"""

from __future__ import annotations

from collections.abc import Sequence

from itsdangerous import BadSignature, Signer
from pydantic import SecretStr
from starlette.responses import Response

from normdive.config import Settings

FRAME_COOKIE = "normdive_lti_frame"
# Distinguishes this signature from the learner cookie's (identity.SIGNER_SALT).
FRAME_SIGNER_SALT = "normdive.lti-frame-cookie"
# The policy's directives besides frame-ancestors. The page loads nothing from elsewhere and
# runs no inline script or style; 'wasm-unsafe-eval' lets the lab's Worker compile its
# WebAssembly kernels (static/lab/kernels.wasm), and allows no JavaScript eval.
BASE_POLICY = (
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; "
    "img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'"
)
UNFRAMED_POLICY = f"{BASE_POLICY}; frame-ancestors 'none'"


def frame_signer(secret_key: SecretStr) -> Signer:
    return Signer(secret_key.get_secret_value(), salt=FRAME_SIGNER_SALT)


def framed_policy(origins: Sequence[str]) -> str:
    return f"{BASE_POLICY}; frame-ancestors {' '.join(origins)}"


def frame_cookie_value(origins: Sequence[str], signer: Signer) -> str:
    return signer.sign(" ".join(origins)).decode("ascii")


def framing_origins(cookie: str | None, signer: Signer) -> list[str] | None:
    """The origins a valid framing cookie names; None without one (or with a forged one)."""
    if not cookie:
        return None
    try:
        origins = signer.unsign(cookie).decode("ascii").split()
    except (BadSignature, UnicodeDecodeError):
        return None
    return origins or None


def set_framed_cookie(response: Response, name: str, value: str, max_age: int, path: str) -> None:
    """A cookie that works inside a platform's iframe with third-party cookies blocked:
    SameSite=None (sent on the platform's cross-site posts), Secure (required with None),
    Partitioned (kept per top-level site, CHIPS), HttpOnly. A max_age of 0 deletes it (a
    partitioned cookie is deleted only by a Set-Cookie that is Partitioned too)."""
    response.set_cookie(
        name, value, max_age=max_age, path=path, secure=True, httponly=True, samesite="none"
    )
    # Starlette writes Partitioned only on Python 3.14+ (http.cookies learnt it there); the
    # attribute is appended to the header it just wrote.
    header, cookie = response.raw_headers[-1]
    assert header == b"set-cookie"
    response.raw_headers[-1] = (header, cookie + b"; Partitioned")


def set_lesson_cookie(
    response: Response,
    name: str,
    value: str,
    settings: Settings,
    *,
    max_age: int,
    framed: bool,
    path: str = "/",
) -> None:
    """One of the lesson's own cookies (HttpOnly): inside a platform's iframe as
    set_framed_cookie makes it; elsewhere SameSite=Lax, Secure as the settings' cookie_secure
    says. A max_age of 0 deletes it."""
    if framed:
        set_framed_cookie(response, name, value, max_age=max_age, path=path)
        return
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        secure=settings.cookie_secure,
        httponly=True,
        samesite="lax",
    )
