"""A platform's answer read so that the platform cannot decide how much the tool holds.

The tool fetches a platform's key set and, in dynamic registration, its OpenID configuration
and registration answer. Each is read as it arrives and given up as soon as it passes its
limit, so a platform that answers 50 MB (or never stops) costs the tool that limit, not the
whole answer.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx


class AnswerTooLarge(Exception):
    """The answer passed its limit; nothing more of it was read."""


def read_body(
    response: httpx.Response, max_bytes: int, after_each_part: Callable[[], None] | None = None
) -> bytes:
    """The body of a streamed `response`, as it arrives. AnswerTooLarge as soon as it passes
    `max_bytes`. `after_each_part` runs after each part arrives and may raise (a deadline for
    the whole body, which httpx's timeouts, per read, do not give)."""
    body = b""
    for part in response.iter_bytes():
        body += part
        if len(body) > max_bytes:
            raise AnswerTooLarge
        if after_each_part is not None:
            after_each_part()
    return body
