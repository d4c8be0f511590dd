"""A platform's answer read as it arrives and given up at a limit, within one deadline for the
whole exchange: a platform that answers 50 MB, never stops, or trickles costs the tool that
limit and that deadline, no more.
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
    """`after_each_part` may raise: a deadline for the whole body, which httpx's timeouts, per
    read, do not give."""
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
    status: int
    body: bytes


async def fetch(
    client: httpx.AsyncClient, method: str, url: str, max_bytes: int, **sent: Any
) -> Answer:
    """No deadline of its own: the caller's cancel scope bounds the whole exchange."""
    async with client.stream(method, url, **sent) as response:
        body = bytearray()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > max_bytes:
                raise AnswerTooLarge
        return Answer(response.status_code, bytes(body))


def fetch_within(deadline_s: float, method: str, url: str, max_bytes: int) -> Answer:
    """fetch from synchronous code, TimeoutError past `deadline_s`: httpx's timeouts count each
    read apart, so a byte sent just inside each would hold the caller without end."""

    async def within() -> Answer:
        with anyio.fail_after(deadline_s):
            async with httpx.AsyncClient(timeout=deadline_s, follow_redirects=False) as client:
                return await fetch(client, method, url, max_bytes)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(within)
    # This thread runs an event loop already (async code, a browser driver): anyio.run refuses
    # to nest, so the fetch gets a thread of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, within).result()
