"""A platform's answer read so that the platform cannot decide how much the tool holds.

The tool fetches a platform's key set and, in dynamic registration, its OpenID configuration
and registration answer. Each is read as it arrives and given up as soon as it passes its
limit, so a platform that answers 50 MB (or never stops) costs the tool that limit, not the
whole answer. Each fetch also has one deadline for the whole exchange (connecting, the
headers, every part of the body), so a platform that trickles its answer costs the tool that
deadline, not the time it takes to trickle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import anyio
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


@dataclass(frozen=True)
class Answer:
    """A platform's answer, read whole (at most the caller's limit)."""

    status: int
    body: bytes


async def fetch(
    client: httpx.AsyncClient, method: str, url: str, max_bytes: int, **sent: Any
) -> Answer:
    """`method` `url` through `client`, its body read as it arrives; AnswerTooLarge as soon as
    it passes `max_bytes`. No deadline of its own: the caller's cancel scope (anyio.fail_after)
    bounds the whole exchange, from connecting to the last byte, however the bytes are paced."""
    async with client.stream(method, url, **sent) as response:
        body = bytearray()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > max_bytes:
                raise AnswerTooLarge
        return Answer(response.status_code, bytes(body))


def fetch_within(deadline_s: float, method: str, url: str, max_bytes: int) -> Answer:
    """fetch, from synchronous code (a worker thread with no event loop of its own), on an
    event loop of its own, all of it within `deadline_s`: TimeoutError past it. httpx's own
    timeouts count each read apart, so a server sending a byte just inside each would hold the
    caller without end."""

    async def within() -> Answer:
        with anyio.fail_after(deadline_s):
            async with httpx.AsyncClient(timeout=deadline_s, follow_redirects=False) as client:
                return await fetch(client, method, url, max_bytes)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(within)
    # This thread already runs an event loop (a caller inside async code, or a tool such as a
    # browser driver keeping one in the main thread): anyio.run refuses to nest, so the fetch
    # gets a thread and a loop of its own, and the caller waits for it as it would anyway.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, within).result()
