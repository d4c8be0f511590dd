"""The lesson page on a slow phone: Debian's Chromium through Playwright and the DevTools
protocol, against a real `normdive serve` on 127.0.0.1:

    .venv/bin/python bench/phone.py
    .venv/bin/python bench/phone.py --against BASE/src   # side by side with another commit

With --against (the src/ of another tree, a `git worktree` of the base commit, say) a second
server runs that tree's code, and each repeat visits the two in turn (ABBA), so that the
machine's load falls on both alike; each side is reported, then the two medians' ratio.

Emulated: a phone 375 px wide (3x pixels, touch, mobile viewport), the CPU slowed 4x
(Emulation.setCPUThrottlingRate) and a slow 4G network (Network.emulateNetworkConditions:
150 ms latency per request, 1.6 Mbit/s down, 750 kbit/s up: the figures of Lighthouse's mobile
preset). Each repeat is a first visit in a fresh browser context (empty cache, new learner):

- Largest Contentful Paint, from a PerformanceObserver registered before the page loads; and
  the same first visit's LCP with JavaScript switched off, in a context of its own: the page's
  HTML and CSS alone, the floor that no change to its scripts can go below;
- bytes transferred until interactive: every response's encodedDataLength (compressed body
  plus headers, from Network.loadingFinished) of the requests sent before the load event
  (page.js has run by then: it marks <html> with class "js"); the URLs are listed, so that
  nothing else (a panel's scripts) loads with the page; also listed, apart: what the page
  asked for after its load event and received within the next half second (page.js fetches
  the modules that answer the learner's actions then, while idle);
- a repeat visit in the same context (what the HTTP cache spares);
- the epsilon switch to repaint, once the learner has committed the opening prediction: inside
  a requestAnimationFrame callback, mark, click the switch (its change handler recomputes and
  rewrites every number), then mark again when a message posted from that callback arrives,
  which Chromium delivers after the frame's style, layout and paint; so the span covers the
  handlers and the rendering work they cause, without the wait for the next vsync. Also
  printed: how much of it the handlers take, the same span when only the switch itself is
  redrawn (its checked state toggled, no event), and with nothing changed at all;
- the bytes a chart costs once the gate has closed, each in a first visit of its own (the
  network and CPU not slowed: only bytes are counted): the page with a row in its player,
  then (from the page loaded) playing a row again, opening the lab's panel and committing a
  run, opening the re-run's panel; until the chart is drawn and the network has been idle
  for half a second.

Medians over the repeats (after one visit not counted, which starts Chromium's renderer); the
switch's figure is the median of SWITCH_FLIPS flips per repeat, with the switch scrolled into
the middle of the screen, as a learner's thumb finds it. Its goal is relative: at most
GOAL_SWITCH_RATIO times the switch redrawn alone in the same run, since what a frame costs
here depends on the machine (software rasterising, shared cores) more than on the page.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from playwright.sync_api import Browser, CDPSession, Page, sync_playwright

from normdive.lesson.content import load_lesson
from servers import normdive_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
REPEATS = 5
SWITCH_FLIPS = 20
# A phone (the width the issue names; the height and pixel ratio of a common one).
VIEWPORT = {"width": 375, "height": 812}
DEVICE_SCALE_FACTOR = 3
CPU_SLOWDOWN = 4
# Lighthouse's mobile preset ("slow 4G"): 150 ms round trip, 1.6 Mbit/s down, 750 kbit/s up.
LATENCY_MS = 150
DOWNLOAD_BYTES_PER_S = 1.6e6 / 8
UPLOAD_BYTES_PER_S = 750e3 / 8
# Goals (bench/RESULTS.md, "A fast page on a slow phone").
GOAL_LCP_MS = 800.0
GOAL_BYTES = 25_000
GOAL_SWITCH_RATIO = 1.5
# After interactive: how long the page is left idle before LCP is read and the learner acts.
SETTLE_MS = 500
TIMEOUT_MS = 60_000
# Resources that must not load with the page (they load when a panel opens).
LAZY_MARKERS = ("sweep.js", "lab-panel.js", "rerun.js", "accuracy-chart.js", "/lab/", "/depths")
# A learner who gets everything right (tests/lesson_answers.py): the six numbers as typed.
RIGHT_NUMBERS = {
    "row1_mean": "2",
    "row1_variance": "2/3",
    "row1_denominator": "0.8165",
    "row2_mean": "3",
    "row2_variance": "3",
    "row2_denominator": "1.732",
}
ROW_PREDICTIONS = {"both": "learns", "residual_only": "partial"}
ROW_PREDICTIONS |= {"layernorm_only": "chance", "neither": "chance"}
# Each chart measured: what the learner clicks, and the frame that holds the chart once drawn
# (a canvas before the server drew every chart, an SVG since).
CHART_ACTIONS = {
    "the page, a row in the player": ((), "#chart-accuracy"),
    "play a row again": (("#row-both-play",), "#chart-accuracy"),
    "open the lab, commit a run": (
        ("#lab-panel > summary", "#lab-commit [value=learns]", "#lab-commit-button"),
        "#lab-chart",
    ),
    "open the re-run": (("#rerun-panel > summary",), "#rerun-chart"),
}

OBSERVE_LCP = """
window.__lcp = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__lcp = entry.startTime;
}).observe({ type: "largest-contentful-paint", buffered: true });
"""

# Resolves to [[flip to repaint, of which the handlers], ...] per flip, in milliseconds. The
# mode: "click" flips the switch as a tap does (its handlers repaint the numbers); "redraw"
# only toggles its checked state (no event, no handler, no number changes: what redrawing the
# switch itself costs); "none" changes nothing (what a frame costs here at all).
FLIP = """async ([flips, mode]) => {
  const control = document.getElementById("eps-switch");
  control.scrollIntoView({ block: "center" });  // where a learner's thumb would be
  await new Promise((done) => setTimeout(done, 500));
  const spans = [];
  for (let i = 0; i < flips; i++) {
    await new Promise((done) => setTimeout(done, 250));  // the switch's transition ends
    spans.push(await new Promise((resolve) => {
      requestAnimationFrame(() => {
        performance.mark("eps-flip");
        if (mode === "click") control.click();
        else if (mode === "redraw") control.checked = !control.checked;
        const handled = performance.now();
        const channel = new MessageChannel();
        channel.port1.onmessage = () => {
          performance.mark("eps-painted");
          const span = performance.measure("eps-switch", "eps-flip", "eps-painted");
          resolve([span.duration, handled - span.startTime]);
        };
        channel.port2.postMessage(null);
      });
    }));
  }
  return spans;
}"""


@dataclass
class Visit:
    lcp_ms: float
    bytes_total: int
    by_type: dict[str, int]
    urls: list[str]
    idle_bytes: int
    idle_urls: list[str]
    repeat_bytes: int
    repeat_urls: list[str]
    switch_ms: float
    handlers_ms: float
    redraw_ms: float
    empty_frame_ms: float
    no_script_lcp_ms: float


class Transfers:
    """Bytes on the wire per request, from the DevTools protocol's Network events, and when
    each request was sent and the page's load event fired (the protocol's monotonic clock), so
    that what was asked for before the load event is told apart from what the page asked for
    after it, however late this process reads them."""

    def __init__(self, cdp: CDPSession) -> None:
        self.kinds: dict[str, tuple[str, str]] = {}
        self.finished: dict[str, int] = {}
        self.sent: dict[str, float] = {}
        self.loaded_at = float("inf")
        cdp.on("Network.requestWillBeSent", self._sent)
        cdp.on("Network.responseReceived", self._response)
        cdp.on("Network.loadingFinished", self._finished)
        cdp.on("Page.loadEventFired", self._loaded)

    def _sent(self, event: dict[str, Any]) -> None:
        self.sent.setdefault(event["requestId"], float(event["timestamp"]))

    def _loaded(self, event: dict[str, Any]) -> None:
        self.loaded_at = float(event["timestamp"])

    def _response(self, event: dict[str, Any]) -> None:
        self.kinds[event["requestId"]] = (event.get("type", "Other"), event["response"]["url"])

    def _finished(self, event: dict[str, Any]) -> None:
        self.finished[event["requestId"]] = int(event["encodedDataLength"])

    def reset(self) -> None:
        self.kinds.clear()
        self.finished.clear()
        self.sent.clear()
        self.loaded_at = float("inf")

    def summary(self, after_load: bool | None = None) -> tuple[int, dict[str, int], list[str]]:
        """Bytes by type and the URLs: of every request finished (None), or of those sent
        before the load event (False) or after it (True)."""
        by_type: dict[str, int] = {}
        urls = []
        for request_id, size in self.finished.items():
            sent = self.sent.get(request_id, 0.0)
            if after_load is not None and (sent > self.loaded_at) != after_load:
                continue
            kind, url = self.kinds.get(request_id, ("Other", "?"))
            by_type[kind] = by_type.get(kind, 0) + size
            name = url.split("/", 3)[-1] or "/"
            urls.append(f"{name} ({size:,} B)" if size else f"{name} (from the cache, 0 B)")
        return sum(by_type.values()), by_type, urls


def emulate(page: Page) -> CDPSession:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Page.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": LATENCY_MS,
            "downloadThroughput": DOWNLOAD_BYTES_PER_S,
            "uploadThroughput": UPLOAD_BYTES_PER_S,
        },
    )
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
    return cdp


def until_interactive(page: Page) -> None:
    page.wait_for_load_state("load")
    # A function, not an expression: Playwright evaluates an expression with eval, which the
    # page's Content-Security-Policy refuses.
    page.wait_for_function("() => document.documentElement.classList.contains('js')")


def no_script_lcp(browser: Browser, url: str) -> float:
    """LCP of the same first visit with JavaScript switched off: the page's HTML and CSS alone,
    what no change to its scripts can go below."""
    context = browser.new_context(
        viewport=VIEWPORT,
        device_scale_factor=DEVICE_SCALE_FACTOR,
        is_mobile=True,
        has_touch=True,
        java_script_enabled=False,
    )
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        cdp = emulate(page)
        # No observer can run in the page: the DevTools protocol reports the LCP candidates,
        # their render time in seconds since the epoch.
        render_times: list[float] = []
        cdp.on(
            "PerformanceTimeline.timelineEventAdded",
            lambda added: render_times.append(float(added["event"]["lcpDetails"]["renderTime"])),
        )
        cdp.send("PerformanceTimeline.enable", {"eventTypes": ["largest-contentful-paint"]})
        page.goto(url, wait_until="load")
        page.wait_for_timeout(SETTLE_MS)
        time_origin_ms = float(page.evaluate("performance.timeOrigin"))
        return render_times[-1] * 1000 - time_origin_ms if render_times else float("nan")
    finally:
        context.close()


def visit(browser: Browser, url: str) -> Visit:
    context = browser.new_context(
        viewport=VIEWPORT,
        device_scale_factor=DEVICE_SCALE_FACTOR,
        is_mobile=True,
        has_touch=True,
    )
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.add_init_script(OBSERVE_LCP)
        cdp = emulate(page)
        transfers = Transfers(cdp)
        page.goto(url, wait_until="commit")
        until_interactive(page)
        # LCP is final once the page is loaded and idle; no input has happened yet.
        page.wait_for_timeout(SETTLE_MS)
        lcp = float(page.evaluate("window.__lcp"))
        total, by_type, urls = transfers.summary(after_load=False)
        idle_total, _, idle_urls = transfers.summary(after_load=True)

        # The learner commits the opening prediction, which unlocks the switch.
        page.check("#predict-residual")
        page.click("#predict-commit")
        page.wait_for_selector("#eps-switch:not([disabled])")
        spans = page.evaluate(FLIP, [SWITCH_FLIPS, "click"])
        switch_ms = statistics.median(span for span, _ in spans)
        handlers_ms = statistics.median(handlers for _, handlers in spans)
        redraw_ms = statistics.median(
            span for span, _ in page.evaluate(FLIP, [SWITCH_FLIPS, "redraw"])
        )
        empty_ms = statistics.median(
            span for span, _ in page.evaluate(FLIP, [SWITCH_FLIPS, "none"])
        )

        transfers.reset()
        page.goto(url, wait_until="commit")
        until_interactive(page)
        repeat_total, _, repeat_urls = transfers.summary()
        return Visit(
            lcp,
            total,
            by_type,
            urls,
            idle_total,
            idle_urls,
            repeat_total,
            repeat_urls,
            switch_ms,
            handlers_ms,
            redraw_ms,
            empty_ms,
            no_script_lcp(browser, url),
        )
    finally:
        context.close()


def close_the_gate(page: Page) -> None:
    """Post a whole lesson's work as the page's forms do, every row played."""
    page.goto("/")
    token = page.request.get("/api/state").json()["csrf_token"]
    right = next(choice.id for choice in load_lesson().reading.choices if choice.correct)
    steps = [
        ("/predict", {"choice": "layer_norm"}),
        ("/numbers", RIGHT_NUMBERS),
        ("/reading", {"choice": right}),
        *((f"/rows/{key}/predict", {"outcome": o}) for key, o in ROW_PREDICTIONS.items()),
        *((f"/rows/{key}/play", {}) for key in ROW_PREDICTIONS),
    ]
    for path, form in steps:
        answer = page.request.post(
            path, form=form, headers={"X-CSRF-Token": token, "Accept": "application/json"}
        )
        assert answer.ok, (path, answer.status)


def chart_bytes(browser: Browser, url: str) -> dict[str, tuple[int, list[str]]]:
    """Bytes and URLs each of CHART_ACTIONS costs, each in a first visit of its own."""
    costs = {}
    for name, (clicks, frame) in CHART_ACTIONS.items():
        context = browser.new_context(base_url=url, viewport=VIEWPORT, reduced_motion="reduce")
        try:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Network.enable")
            close_the_gate(page)
            if clicks:
                page.reload()
                page.wait_for_load_state("networkidle")
            transfers = Transfers(cdp)
            if not clicks:
                page.reload()
            for selector in clicks:
                page.click(selector)
            page.wait_for_selector(f"{frame} canvas, {frame} svg")
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(SETTLE_MS)
            total, _, urls = transfers.summary()
            costs[name] = (total, [url for url in urls if "from the cache" not in url])
        finally:
            context.close()
    return costs


def report(visits: list[Visit]) -> None:
    print(
        "| repeat | LCP ms | bytes to interactive | by type | then while idle "
        "| repeat visit bytes | switch ms | of it handlers ms | switch redrawn alone ms "
        "| empty frame ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for number, one in enumerate(visits, start=1):
        types = ", ".join(f"{kind} {size:,}" for kind, size in sorted(one.by_type.items()))
        print(
            f"| {number} | {one.lcp_ms:.0f} | {one.bytes_total:,} | {types} "
            f"| {one.idle_bytes:,} | {one.repeat_bytes:,} | {one.switch_ms:.1f} "
            f"| {one.handlers_ms:.1f} | {one.redraw_ms:.1f} | {one.empty_frame_ms:.1f} |"
        )
    lcp = statistics.median(one.lcp_ms for one in visits)
    no_script_lcp = statistics.median(one.no_script_lcp_ms for one in visits)
    size = statistics.median(one.bytes_total for one in visits)
    switch = statistics.median(one.switch_ms for one in visits)
    handlers = statistics.median(one.handlers_ms for one in visits)
    redraw = statistics.median(one.redraw_ms for one in visits)
    empty = statistics.median(one.empty_frame_ms for one in visits)
    print(
        f"switch to repaint: {switch:.1f} ms = handlers {handlers:.1f} ms + style, layout, paint "
        f"and commit {switch - handlers:.1f} ms; the switch redrawn alone (no handler, no number "
        f"changed): {redraw:.1f} ms; a frame with nothing changed: {empty:.1f} ms"
    )
    print(
        f"LCP with JavaScript switched off (the HTML and CSS alone): {no_script_lcp:,.0f} ms "
        f"(repeats: {', '.join(f'{one.no_script_lcp_ms:.0f}' for one in visits)})"
    )
    print(f"loaded until interactive: {'; '.join(visits[0].urls)}")
    print(f"then while idle ({SETTLE_MS} ms): {'; '.join(visits[0].idle_urls) or 'nothing'}")
    print(f"repeat visit: {'; '.join(visits[0].repeat_urls)}")
    lazy = [url for one in visits for url in one.urls if any(m in url for m in LAZY_MARKERS)]
    print(f"a panel's scripts or figures before interactive: {lazy or 'none'}")
    for name, value, goal, unit in (
        ("LCP", lcp, GOAL_LCP_MS, "ms"),
        ("bytes to interactive", size, GOAL_BYTES, "B"),
    ):
        verdict = "met" if value <= goal else "NOT met"
        print(f"median {name}: {value:,.1f} {unit} (goal <= {goal:,.0f} {unit}): {verdict}")
    ratio = switch / redraw
    verdict = "met" if ratio <= GOAL_SWITCH_RATIO else "NOT met"
    print(
        f"median switch to repaint: {switch:.1f} ms = {ratio:.2f}x the switch redrawn alone "
        f"(goal <= {GOAL_SWITCH_RATIO}x): {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument(
        "--against",
        type=Path,
        help="another tree's src/ (a git worktree of the base commit, say): its server is "
        "measured too, a first visit of each in turn",
    )
    args = parser.parse_args()
    print(
        f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; Chromium {CHROMIUM}; "
        f"{VIEWPORT['width']} px wide, CPU / {CPU_SLOWDOWN}, {LATENCY_MS} ms latency, "
        f"{DOWNLOAD_BYTES_PER_S * 8 / 1e6:.1f} Mbit/s down, {UPLOAD_BYTES_PER_S * 8 / 1e3:.0f} "
        f"kbit/s up; {args.repeats} first visits",
        flush=True,
    )
    # Each side's server (this tree's code, and --against's on the PYTHONPATH before it).
    sides = {"this tree": {}}
    if args.against is not None:
        sides[str(args.against)] = {"PYTHONPATH": str(args.against.resolve())}
    visits: dict[str, list[Visit]] = {name: [] for name in sides}
    charts = {}
    with TemporaryDirectory(prefix="normdive-phone-") as folder, contextlib.ExitStack() as servers:
        urls = {
            name: servers.enter_context(
                normdive_server(f"sqlite:///{Path(folder) / f'phone-{i}.sqlite3'}", **env)
            )[0]
            for i, (name, env) in enumerate(sides.items())
        }
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                # One visit first, not counted: Chromium's first page pays for starting its
                # renderer and network service, as a phone's browser already running does not.
                for url in urls.values():
                    visit(browser, url + "/")
                for repeat in range(args.repeats):
                    # ABBA: each side goes first as often as the other.
                    order = list(urls.items())
                    for name, url in order if repeat % 4 in (0, 3) else order[::-1]:
                        visits[name].append(visit(browser, url + "/"))
                        print(f"  {name}: LCP {visits[name][-1].lcp_ms:.0f} ms", file=sys.stderr)
                charts = {name: chart_bytes(browser, url) for name, url in urls.items()}
            finally:
                browser.close()
    for name in sides:
        print(f"--- {name}")
        report(visits[name])
        for action, (total, fetched) in charts[name].items():
            print(f"{action}: {total:,} B ({'; '.join(fetched)})")
    if args.against is not None:
        ours, theirs = (visits[name] for name in sides)
        for label, value in (("LCP", "lcp_ms"), ("bytes to interactive", "bytes_total")):
            mine = statistics.median(getattr(one, value) for one in ours)
            base = statistics.median(getattr(one, value) for one in theirs)
            print(
                f"median {label}: this tree {mine:,.0f}, {args.against} {base:,.0f}: "
                f"{mine / base:.3f}x"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
