"""Who may frame the lesson: nobody (frame-ancestors 'none', X-Frame-Options DENY), unless an
LTI launch set the signed framing cookie naming its platform's origins; that cookie is
partitioned (CHIPS), so it holds only inside that platform's frame."""

from __future__ import annotations

from collections.abc import Sequence

from itsdangerous import BadSignature, Signer
from pydantic import SecretStr
from starlette.responses import Response

from normdive.config import Settings

FRAME_COOKIE = "normdive_lti_frame"
# Distinguishes this signature from the learner cookie's (identity.SIGNER_SALT).
FRAME_SIGNER_SALT = "normdive.lti-frame-cookie"
# Nothing from elsewhere, no inline script or style; 'wasm-unsafe-eval' lets the lab's Worker
# compile static/lab/kernels.wasm, and allows no JavaScript eval.
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
    if not cookie:
        return None
    try:
        origins = signer.unsign(cookie).decode("ascii").split()
    except (BadSignature, UnicodeDecodeError):
        return None
    return origins or None


def set_framed_cookie(response: Response, name: str, value: str, max_age: int, path: str) -> None:
    """A cookie that works in a platform's iframe with third-party cookies blocked: SameSite=None,
    Secure, Partitioned (CHIPS), HttpOnly. A max_age of 0 deletes it, Partitioned too."""
    response.set_cookie(
        name, value, max_age=max_age, path=path, secure=True, httponly=True, samesite="none"
    )
    # Starlette writes Partitioned only on Python 3.14+ (http.cookies learnt it there).
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
