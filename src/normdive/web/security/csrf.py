"""Cross-site request forgery: a page on another site must not be able to make a learner's
browser post to the lesson with the learner's cookie.

Two checks guard every state-changing request except the host platform's prerequisite report
(POST /api/prerequisite), which authenticates with its bearer token and carries no cookie:

1. Origin. A POST whose `Origin` header (or, when a browser sent none, its `Referer`) names
   another host than the one the request was sent to is refused. Browsers set both headers
   themselves; a script on another site cannot forge them. A request with neither is left
   to the token (non-browser clients send neither).
2. Token. The request carries the learner's form token, either as the form field
   `csrf_token` (a hidden input in every form of the page) or as the header `X-CSRF-Token`
   (page.js copies it from `<meta name="csrf-token">`; GET /api/state returns it too). The
   token is HMAC-SHA256(secret key, learner id): stateless, so any worker checks it with the
   secret alone, and a token fits one learner only. Another site cannot read it, because the
   browser keeps the page (and /api/state) from other origins.

The token is the same in every answer (a reload gives the same page, byte for byte). Pages are
gzip-compressed and repeat what their URL holds, so compressed lengths could in principle leak
it (the BREACH attack) to someone who watches the traffic and makes the learner's browser
load the page thousands of times. A token so learnt would still not get a post from another
site through: browsers send Origin with every cross-site POST, and check 1 refuses it.

This follows the OWASP cheat sheet's "signed double-submit" and "verifying origin with
standard headers" patterns:
https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import SecretStr
from starlette.requests import Request

from normdive.config import Settings
from normdive.web.security.proxy import peer_is_trusted_proxy

# The hidden form field and the header that carry the token.
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
# Distinguishes this use of the secret key from the cookie's signature (identity.SIGNER_SALT).
TOKEN_PURPOSE = b"normdive.csrf-token:"

FOREIGN_ORIGIN = (
    "This request came from another site ({origin}), so it was refused and nothing was saved. "
    "Open the lesson itself to carry on."
)
NO_LEARNER = (
    "This request does not come from an open lesson page (your browser sent no valid learner "
    "cookie), so it was refused and nothing was saved. Open the lesson and try again."
)
MISSING_TOKEN = (
    "This request lacks the lesson page's form token, so it was refused and nothing was saved. "
    "Reload the lesson and try again."
)
WRONG_TOKEN = (
    "This request's form token does not belong to your session (perhaps the page was opened "
    "before your session changed), so it was refused and nothing was saved. Reload the lesson "
    "and try again."
)
# At most this much of a foreign origin is repeated back.
MAX_ECHOED_ORIGIN = 80


def form_token(secret_key: SecretStr, learner_id: str) -> str:
    """The learner's form token: 64 hex characters."""
    key = secret_key.get_secret_value().encode()
    return hmac.new(key, TOKEN_PURPOSE + learner_id.encode(), hashlib.sha256).hexdigest()


def _netloc(url: str) -> str | None:
    """The host (and port, if written) a URL names, lowercased; None if it names none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts.netloc.lower() if parts.scheme in ("http", "https") and parts.netloc else None


def own_hosts(request: Request, public_origin: str | None) -> set[str]:
    """The host (and port) this request was sent to: its Host header, and the first
    X-Forwarded-Host a proxy in front may have set while rewriting Host. A page on another
    site cannot add either to a browser's request (a form sets no headers; a script that sets
    one needs the server's CORS consent, which it never gives). Any other client can, so
    X-Forwarded-Host counts only from a trusted proxy (FORWARDED_ALLOW_IPS, web.security.proxy):
    from anyone else it would let a forged Origin name its own host. The configured public
    origin's host (NORMDIVE_PUBLIC_ORIGIN) is this site's too, whatever a proxy forwarded."""
    hosts = {request.headers.get("host", "").lower()}
    if public_origin is not None:
        hosts.add(urlsplit(public_origin).netloc)
    if peer_is_trusted_proxy(request):
        forwarded = request.headers.get("x-forwarded-host", "")
        hosts.add(forwarded.split(",")[0].strip().lower())
    return hosts - {""}


def from_this_site(url: str, request: Request, public_origin: str | None) -> bool:
    """Whether `url` (an Origin or Referer) is on this site (own_hosts, _is_own)."""
    return _is_own(url, own_hosts(request, public_origin), public_origin)


def _is_own(url: str, own: set[str], public_origin: str | None) -> bool:
    """Whether `url` is on this site: its host and port are one of `own`. A URL on the
    configured public origin's host must also have its scheme (http://d9.example.edu is
    another origin than https://d9.example.edu); without one configured, the scheme cannot
    be known here (a proxy may end TLS in front), and is not compared."""
    netloc = _netloc(url)
    if netloc not in own:
        return False
    if public_origin is not None and netloc == urlsplit(public_origin).netloc:
        return urlsplit(url).scheme.lower() == urlsplit(public_origin).scheme
    return True


def foreign_origin(request: Request, public_origin: str | None) -> str | None:
    """The other origin this request came from, or None when it came from this site or says
    nothing. Compared by host and port as the browser wrote them, so a proxy that ends TLS in
    front of the server (the server seeing http) does not make the page foreign to itself; by
    scheme too on the configured public origin's host (_is_own)."""
    own = own_hosts(request, public_origin)
    origin = request.headers.get("origin")
    if origin is not None:
        # "null" (a sandboxed frame, a file, a privacy-preserving redirect) names no site: it
        # is not this one.
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
    """Why this state-changing request must be refused (403), or None when it may proceed.
    `learner_id` is the one the request's cookie vouches for (None: no valid cookie)."""
    origin = foreign_origin(request, settings.public_origin)
    if origin is not None:
        return FOREIGN_ORIGIN.format(origin=origin[:MAX_ECHOED_ORIGIN])
    sent = [value for value in (request.headers.get(HEADER), form.get(FIELD)) if value]
    if learner_id is None:
        return NO_LEARNER
    if not sent:
        return MISSING_TOKEN
    expected = form_token(settings.secret_key, learner_id)
    # compare_digest takes ASCII text only; a token is ASCII, so anything else is wrong.
    if any(value.isascii() and hmac.compare_digest(value, expected) for value in sent):
        return None
    return WRONG_TOKEN
