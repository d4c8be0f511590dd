"""Run a coroutine to completion on an event loop of its own, in a thread of its own.

Under xdist, a worker that ran a browser test may still have Playwright's sync API event
loop running in its main thread, and asyncio.run refuses to start inside a running loop.
A short-lived thread has no loop, so every test that drives asyncio goes through here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_in_fresh_loop(make_coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make_coroutine())).result()
