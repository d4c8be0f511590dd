"""The language a request is answered in, and the language switch.

Every request is answered in one locale (i18n.locales.negotiate): the language of the page
that asked, which the page's scripts send as the `X-Page-Locale` header (an answer to a page
is drawn in that page's language, whatever another tab chose since); else the learner's
choice, kept in the `normdive_locale` cookie; else the locale an LTI launch named, kept by the
launch in `normdive_launch_locale`; else the browser's Accept-Language; else English. The
locale is set for the request's context (i18n.catalogues), so the templates and the composed
sentences read it, and kept in the request's state (`request.state.locale`).

The switch is a link (it works without JavaScript): a GET whose address carries
`?lang=CODE` keeps the choice in the cookie and answers 303 to the same address without it,
the page's own parameters kept. A code the lesson does not speak changes nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from urllib.parse import urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from normdive.config import Settings
from normdive.i18n.catalogues import set_locale
from normdive.i18n.locales import LOCALE_NAMES, negotiate, supported
from normdive.web.security.framing import FRAME_COOKIE, set_lesson_cookie

CHOICE_COOKIE = "normdive_locale"
LAUNCH_COOKIE = "normdive_launch_locale"
SWITCH_PARAM = "lang"
# The header the page's scripts send with every request, naming the page's own language.
PAGE_LOCALE_HEADER = "X-Page-Locale"
# A year, as the learner's own cookie: a choice outlives a course's term.
LOCALE_COOKIE_MAX_AGE_S = 365 * 24 * 60 * 60

# One switch link: (locale, its name in its own language, the address that chooses it).
SwitchLink = tuple[str, str, str]


def keep_locale(
    response: Response, name: str, locale: str | None, settings: Settings, *, framed: bool
) -> None:
    """Keep `locale` in the cookie `name` (None deletes it), inside a platform's frame as the
    frame needs (SameSite=None, Secure, Partitioned)."""
    value, max_age = (locale, LOCALE_COOKIE_MAX_AGE_S) if locale else ("", 0)
    set_lesson_cookie(response, name, value, settings, max_age=max_age, framed=framed)


def switch_address(path: str, query: list[tuple[str, str]]) -> str:
    """The address the switch sends back to: `path` with the query but the switch's own
    parameter. A path that starts "//" would name another host: it is sent to "/" + the rest."""
    kept = [(name, value) for name, value in query if name != SWITCH_PARAM]
    own_path = "/" + path.lstrip("/")
    return own_path + ("?" + urlencode(kept) if kept else "")


def switch_links(query: list[tuple[str, str]]) -> tuple[SwitchLink, ...]:
    """(locale, its own name, the link that chooses it) for each locale, from the page whose
    query is `query` (its parameters kept)."""
    kept = [(name, value) for name, value in query if name != SWITCH_PARAM]
    return tuple(
        (code, name, "?" + urlencode([*kept, (SWITCH_PARAM, code)]))
        for code, name in LOCALE_NAMES.items()
    )


# The switch of the page being drawn (Language sets it per request; the templates read it).
_switch: ContextVar[tuple[SwitchLink, ...] | None] = ContextVar("normdive_switch", default=None)


def language_switch() -> tuple[SwitchLink, ...]:
    """The links of the switch on the page being drawn (outside a request, from a page
    without parameters)."""
    links = _switch.get()
    return links if links is not None else switch_links([])


def locale_of(request: Request) -> str:
    """The request's language: the asking page's, the learner's choice, the launch's, the
    browser's, then English (i18n.locales.negotiate)."""
    return negotiate(
        chosen=request.cookies.get(CHOICE_COOKIE),
        launched=request.cookies.get(LAUNCH_COOKIE),
        accept_language=request.headers.get("accept-language"),
        page=request.headers.get(PAGE_LOCALE_HEADER),
    )


class Language:
    """The locale of each request, and the switch's GET (see the module's docstring)."""

    def __init__(self, app: ASGIApp, settings: Settings, unvaried: tuple[str, ...] = ()) -> None:
        self.app = app
        self.settings = settings
        # Paths answered alike in every language (the static files, kept by browsers for
        # good): passed through, with no Vary: Accept-Language to split their caches.
        self.unvaried = unvaried

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.unvaried):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        asked = request.query_params.get(SWITCH_PARAM)
        if asked is not None and scope["method"] in ("GET", "HEAD"):
            query = request.query_params.multi_items()
            response = RedirectResponse(switch_address(scope["path"], query), status_code=303)
            chosen = supported(asked)
            if chosen is not None:
                framed = FRAME_COOKIE in request.cookies
                keep_locale(response, CHOICE_COOKIE, chosen, self.settings, framed=framed)
            response.headers["Cache-Control"] = "no-store"
            await response(scope, receive, send)
            return
        locale = locale_of(request)
        scope.setdefault("state", {})["locale"] = locale
        set_locale(locale)
        _switch.set(switch_links(request.query_params.multi_items()))

        async def send_varied(message: Message) -> None:
            # The answer depends on these headers; caches that keep it must know.
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.add_vary_header("Accept-Language")
                headers.add_vary_header(PAGE_LOCALE_HEADER)
            await send(message)

        await self.app(scope, receive, send_varied)
