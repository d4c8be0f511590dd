"""Which locales the lesson speaks, and which one a request gets.

The order (negotiate): the language of the page that asked, which its scripts send with every
request they make (so that an answer is drawn in the page's language, whatever another tab
chose since), a choice the learner made on the page (kept in a cookie), the locale an LTI
launch named (launch_presentation.locale, kept in a cookie by the launch), the browser's
Accept-Language (RFC 9110, section 12.5.4), then English. A tag is matched by its
primary language subtag: "de-DE", "de-AT" and "de" are all German.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

DEFAULT_LOCALE: Final = "en"
# Each locale the lesson speaks, with its name in its own language (what the switch shows).
LOCALE_NAMES: Final = {"en": "English", "de": "Deutsch", "ar": "العربية"}
LOCALES: Final = tuple(LOCALE_NAMES)
RIGHT_TO_LEFT: Final = frozenset({"ar"})
# Accept-Language is read only this far: a header longer than this is a client's mistake.
MAX_ACCEPT_LANGUAGE_CHARS = 1024
# One language range with its weight: "de-DE", "en;q=0.8", "*;q=0.1".
_RANGE = re.compile(
    r"^\s*([A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*|\*)\s*(?:;\s*q\s*=\s*([0-9.]+))?\s*$"
)


def supported(tag: str | None) -> str | None:
    """The supported locale a language tag names ("de-DE" and "de_de" -> "de"), or None."""
    if not tag:
        return None
    primary = tag.strip().replace("_", "-").split("-", 1)[0].lower()
    return primary if primary in LOCALE_NAMES else None


def direction(locale: str) -> str:
    """The text direction of `locale`, as <html dir> takes it: "rtl" or "ltr"."""
    return "rtl" if locale in RIGHT_TO_LEFT else "ltr"


def accepted(header: str | None) -> tuple[str, ...]:
    """The language tags of an Accept-Language header, most wanted first (equal weights in the
    header's order); ranges with q=0, "*" and malformed ones left out."""
    if not header:
        return ()
    weighted: list[tuple[float, int, str]] = []
    for position, item in enumerate(header[:MAX_ACCEPT_LANGUAGE_CHARS].split(",")):
        match = _RANGE.match(item)
        if match is None or match.group(1) == "*":
            continue
        try:
            weight = float(match.group(2)) if match.group(2) is not None else 1.0
        except ValueError:
            continue
        if 0 < weight <= 1:
            weighted.append((-weight, position, match.group(1)))
    return tuple(tag for _, _, tag in sorted(weighted))


def first_supported(tags: Iterable[str | None]) -> str | None:
    for tag in tags:
        locale = supported(tag)
        if locale is not None:
            return locale
    return None


def negotiate(
    *,
    chosen: str | None,
    launched: str | None,
    accept_language: str | None,
    page: str | None = None,
) -> str:
    """The locale of a request: the asking page's own, the learner's choice, the launch's
    locale, the browser's first supported language, or English; each only when it names a
    supported locale."""
    tags = (page, chosen, launched, *accepted(accept_language))
    return first_supported(tags) or DEFAULT_LOCALE
