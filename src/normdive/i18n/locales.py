"""Which locales the lesson speaks, and which one a request gets (README, "Languages"); a tag
is matched by its primary subtag ("de-AT" is German)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

DEFAULT_LOCALE: Final = "en"
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
    if not tag:
        return None
    primary = tag.strip().replace("_", "-").split("-", 1)[0].lower()
    return primary if primary in LOCALE_NAMES else None


def direction(locale: str) -> str:
    return "rtl" if locale in RIGHT_TO_LEFT else "ltr"


def accepted(header: str | None) -> tuple[str, ...]:
    """Accept-Language's tags (RFC 9110, 12.5.4), most wanted first; q=0, "*" and malformed
    ranges left out."""
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
    """The first supported of the asking page's, the chosen, the launch's, the browser's."""
    tags = (page, chosen, launched, *accepted(accept_language))
    return first_supported(tags) or DEFAULT_LOCALE
