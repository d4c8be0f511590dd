"""Debian's Chromium for the browser tests and benchmarks: its switches, launching it through
Playwright, and closing it (or a context of it) within a time limit, killing it past that."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The page asks for smooth scrolling (page.css), and Playwright waits after every scroll into
# view until the element stops moving: with scrolls that glide, two browser files took 69.6 s
# instead of 36.7 s (bench/RESULTS.md, "Set-up"). A test of where a smooth scroll lands is
# marked `smooth_scrolling` and gets a Chromium that glides, as a learner's does.
SMOOTH_SCROLLING_OFF = "--disable-smooth-scrolling"
# Generous: two CPU cores are shared by the whole test run.
ACTION_TIMEOUT_MS = 20_000
# Chromium logs every 4xx answer to fetch as a console error; 409 and 422 are the page's
# refusals, which the tests provoke on purpose.
EXPECTED_CONSOLE = ("status of 409", "status of 422")

# Each launched Chromium's browser process, to kill if closing it or one of its contexts hangs.
_CHROMIUM_PIDS: weakref.WeakKeyDictionary[Browser, int] = weakref.WeakKeyDictionary()
# How long closing a browser or a context may take before its Chromium is killed. Playwright's
# close has no timeout of its own: a Chromium that stops answering would hold the whole run.
CLOSE_TIMEOUT_S = 30.0


def launch_chromium(playwright: Playwright, args: list[str]) -> Browser:
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
    # CDP's SystemInfo.getProcessInfo: [{"type": "browser", "id": pid, ...}, ...].
    session = chromium.new_browser_cdp_session()
    processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
    session.detach()
    _CHROMIUM_PIDS[chromium] = next(p["id"] for p in processes if p["type"] == "browser")
    return chromium


def chromium_pid(browser: Browser) -> int:
    """The browser process of a Chromium launched by `launch_chromium`."""
    return _CHROMIUM_PIDS[browser]


@contextlib.contextmanager
def killed_after(browser: Browser, timeout_s: float) -> Iterator[threading.Event]:
    """Kills a Chromium launched by `launch_chromium` if the block runs past timeout_s, which
    ends whatever Playwright call was waiting on it; the event yielded says whether it did."""
    pid = chromium_pid(browser)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    watchdog = threading.Timer(timeout_s, kill)
    watchdog.start()
    try:
        yield killed
    finally:
        watchdog.cancel()


def close_in_time(closing: Browser | BrowserContext, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Closes a browser, or a context of one launched by `launch_chromium`, within timeout_s;
    past it, kills that Chromium (which ends the pending close) and fails."""
    from playwright.sync_api import BrowserContext

    browser = closing.browser if isinstance(closing, BrowserContext) else closing
    assert browser is not None, "a persistent context: no browser of its own to kill"
    with killed_after(browser, timeout_s) as killed:
        try:
            closing.close()
        finally:
            if killed.is_set():
                pytest.fail(f"Chromium did not close within {timeout_s} s: it was killed")


def open_page(context: BrowserContext, errors: list[str]) -> Page:
    """A new page of `context` whose JavaScript errors (and unexpected console errors) are
    appended to `errors`."""
    page = context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            errors.append(f"console: {message.text}")
            if message.type == "error" and not any(e in message.text for e in EXPECTED_CONSOLE)
            else None
        ),
    )
    return page
