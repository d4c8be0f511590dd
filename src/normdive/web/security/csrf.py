"""Cross-site request forgery: every state-changing request but the host's bearer-token report
must come from this site (Origin, else Referer) and carry the learner's form token, an HMAC of
their id that any worker checks with the secret alone. OWASP's "signed double-submit" and
"verifying origin" patterns: https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import SecretStr
from starlette.requests import Request

from normdive.config import Settings
from normdive.i18n.catalogues import N_, gettext
from normdive.web.security.proxy import peer_is_trusted_proxy

FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
# Distinguishes this use of the secret key from the cookie's signature (identity.SIGNER_SALT).
TOKEN_PURPOSE = b"normdive.csrf-token:"

FOREIGN_ORIGIN = N_(
    "This request came from another site ({origin}), so it was refused and nothing was saved. "
    "Open the lesson itself to carry on."
)
NO_LEARNER = N_(
    "This request does not come from an open lesson page (your browser sent no valid learner "
    "cookie), so it was refused and nothing was saved. Open the lesson and try again."
)
MISSING_TOKEN = N_(
    "This request lacks the lesson page's form token, so it was refused and nothing was saved. "
    "Reload the lesson and try again."
)
WRONG_TOKEN = N_(
    "This request's form token does not belong to your session (perhaps the page was opened "
    "before your session changed), so it was refused and nothing was saved. Reload the lesson "
    "and try again."
)
MAX_ECHOED_ORIGIN = 80


def form_token(secret_key: SecretStr, learner_id: str) -> str:
    """64 hex characters, the same in every answer: BREACH on the gzipped page could learn it,
    but a cross-site POST still fails the Origin check."""
    key = secret_key.get_secret_value().encode()
    return hmac.new(key, TOKEN_PURPOSE + learner_id.encode(), hashlib.sha256).hexdigest()


def _netloc(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts.netloc.lower() if parts.scheme in ("http", "https") and parts.netloc else None


def own_hosts(request: Request, public_origin: str | None) -> set[str]:
    """Host, the public origin's host and, from a trusted proxy only, X-Forwarded-Host: from
    anyone else it would let a forged Origin name its own host."""
    hosts = {request.headers.get("host", "").lower()}
    if public_origin is not None:
        hosts.add(urlsplit(public_origin).netloc)
    if peer_is_trusted_proxy(request):
        forwarded = request.headers.get("x-forwarded-host", "")
        hosts.add(forwarded.split(",")[0].strip().lower())
    return hosts - {""}


def from_this_site(url: str, request: Request, public_origin: str | None) -> bool:
    return _is_own(url, own_hosts(request, public_origin), public_origin)


def _is_own(url: str, own: set[str], public_origin: str | None) -> bool:
    """Whether `url`'s host and port are one of `own`, with the public origin's scheme on its
    host (without one configured, a proxy may end TLS in front: the scheme is not compared)."""
    netloc = _netloc(url)
    if netloc not in own:
        return False
    if public_origin is not None and netloc == urlsplit(public_origin).netloc:
        return urlsplit(url).scheme.lower() == urlsplit(public_origin).scheme
    return True


def foreign_origin(request: Request, public_origin: str | None) -> str | None:
    own = own_hosts(request, public_origin)
    origin = request.headers.get("origin")
    if origin is not None:
        # "null" (a sandboxed frame, a file, a redirect) names no site: not this one.
        return None if _is_own(origin, own, public_origin) else origin
    referer = request.headers.get("referer")
    if referer is not None and not _is_own(referer, own, public_origin):
        return referer
    return None


def refusal(
    request: Request,
    form: Mapping[str, str],
    learner_id: str | None,
    settings: Settings,
) -> str | None:
    """Why this state-changing request is refused (403), or None; `learner_id` is the cookie's."""
    origin = foreign_origin(request, settings.public_origin)
    if origin is not None:
        return gettext(FOREIGN_ORIGIN).format(origin=origin[:MAX_ECHOED_ORIGIN])
    sent = [value for value in (request.headers.get(HEADER), form.get(FIELD)) if value]
    if learner_id is None:
        return gettext(NO_LEARNER)
    if not sent:
        return gettext(MISSING_TOKEN)
    expected = form_token(settings.secret_key, learner_id)
    # compare_digest takes ASCII text only; a token is ASCII, so anything else is wrong.
    if any(value.isascii() and hmac.compare_digest(value, expected) for value in sent):
        return None
    return gettext(WRONG_TOKEN)
