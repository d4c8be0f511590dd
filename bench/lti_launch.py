"""Launch to first paint: the lesson launched from a platform's course page, against the same
lesson page loaded directly, in one Chromium run.

    PYTHONPATH=src .venv/bin/python bench/lti_launch.py [--rounds 8]

The two HTTPS sites of the LTI browser tests (tests/lti_browser_sites.py: tool.test and
platform.test on 127.0.0.1, third-party cookies blocked). Launch: from the course page's
navigation start to the first contentful paint of the lesson in its frame, through the
tool's login, the platform's authorization endpoint, the launch (id_token validated, the
learner signed in) and the page; each launch a new platform user. Direct: a top-level load of
the lesson page by a learner whose 8.5 is done, navigation start to first contentful paint.
Alternating (ABBA), each in a fresh browser context; medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from itsdangerous import Signer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from playwright.sync_api import Browser, expect, sync_playwright

from chromium import CHROMIUM, CHROMIUM_ARGS
from helpers import SECRET_KEY
from lti_browser_sites import SITES_ARGS, Sites, serve_sites
from lti_platform import unique_sub
from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.web.infrastructure.identity import COOKIE_NAME, SIGNER_SALT, cookie_value

FCP = "performance.getEntriesByName('first-contentful-paint')[0].startTime"
PAINTED = "performance.getEntriesByName('first-contentful-paint').length > 0"
LESSON_HEADING = "Layer norm and residuals"


def launch_ms(browser: Browser, sites: Sites) -> float:
    sites.platform.storage = False
    sites.platform.subject = unique_sub()
    context = browser.new_context(ignore_https_errors=True)
    page = context.new_page()
    page.goto(f"{sites.platform.origin}/course")
    expect(page.frame_locator("iframe").get_by_role("heading", level=1)).to_have_text(
        LESSON_HEADING, timeout=30_000
    )
    frame = page.frames[1]
    frame.wait_for_function(PAINTED, timeout=10_000)
    painted = frame.evaluate(f"performance.timeOrigin + {FCP}")
    started = page.evaluate("performance.timeOrigin")
    context.close()
    return float(painted - started)


def direct_ms(browser: Browser, sites: Sites, cookie: str) -> float:
    context = browser.new_context(ignore_https_errors=True)
    context.add_cookies([{"name": COOKIE_NAME, "value": cookie, "url": sites.tool}])
    page = context.new_page()
    page.goto(f"{sites.tool}/")
    expect(page.get_by_role("heading", level=1)).to_have_text(LESSON_HEADING)
    page.wait_for_function(PAINTED, timeout=10_000)
    painted = page.evaluate(FCP)
    context.close()
    return float(painted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    arguments = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with (
        tempfile.TemporaryDirectory() as folder,
        serve_sites(Path(folder)) as sites,
        sync_playwright() as playwright,
    ):
        engine = make_engine(sites.database_url)
        store = Store(engine)
        learner = store.create_learner()
        store.append(learner, EventKind.PREREQUISITE_DONE, {"source": "operator"})
        engine.dispose()
        cookie = cookie_value(learner, Signer(SECRET_KEY, salt=SIGNER_SALT))
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=[*CHROMIUM_ARGS, *SITES_ARGS]
        )
        launch_ms(browser, sites)  # warm up both paths once
        direct_ms(browser, sites, cookie)
        launches: list[float] = []
        directs: list[float] = []
        for index in range(arguments.rounds):
            order = ("launch", "direct") if index % 2 == 0 else ("direct", "launch")
            for kind in order:
                if kind == "launch":
                    launches.append(launch_ms(browser, sites))
                else:
                    directs.append(direct_ms(browser, sites, cookie))
        browser.close()
    launch, direct = statistics.median(launches), statistics.median(directs)
    print(f"launch to first paint, median of {len(launches)}: {launch:.0f} ms")
    print(f"direct load to first paint, median of {len(directs)}: {direct:.0f} ms")
    print(f"launch / direct: {launch / direct:.1f}x (+{launch - direct:.0f} ms)")
    print(f"launches: {[round(x) for x in launches]}")
    print(f"directs: {[round(x) for x in directs]}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
