"""Hostile input in Chromium, on servers of this module (a sample recording, 8.5 done):
- the whole page works under its Content-Security-Policy: no violation is reported (a
  listener installed before any page script counts them) and the policy is live (an
  injected inline script is blocked and reported);
- script and image payloads in the takeaway, the learner's own row and a number field stay
  text: no script runs (a window flag stays unset) and no dialog opens;
- a page on another site that posts a form to the lesson is refused, and changes nothing;
- the write limit shows its message beside the form, with and without JavaScript;
- without JavaScript every form carries the token; a stale page gets a readable 403."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from chromium import ACTION_TIMEOUT_MS
from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from live_server import LiveServer
from normdive.lesson.content import load_lesson
from normdive.web.app import create_app
from normdive.web.security import csrf

pytestmark = pytest.mark.browser

LESSON = load_lesson()
ROW_LABELS = {row.key: row.label for row in LESSON.rows}
OUTCOME_LABELS = {outcome.id: outcome.label for outcome in LESSON.outcomes}
PREDICTIONS = {
    "both": "learns",
    "residual_only": "partial",
    "layernorm_only": "chance",
    "neither": "chance",
}
# Writes a learner of the tight server may make in a minute.
TIGHT_LIMIT = 3
# Counts policy violations from before the first page script runs (an init script is added
# by the browser itself, outside the page's policy).
WATCH_POLICY = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""
# Each payload would set window.__pwned or open a dialog if it ever ran.
PAYLOADS = (
    "<script>window.__pwned = 1; alert(1)</script>",
    '<img src=x onerror="window.__pwned = 2; alert(2)">',
    '"><svg onload="window.__pwned = 3">',
    "</textarea><script>window.__pwned = 4</script>",
)
TAKEAWAY = " ".join(PAYLOADS)
EVIL = "http://evil.test"


def serve(tmp_path_factory: pytest.TempPathFactory, **overrides: Any) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("security-live")
    settings = build_settings(
        migrated_sqlite_url(folder),
        folder,
        recording_path=write_recording(folder, ablation_recording()),
        **overrides,
    )
    server = LiveServer(create_app(settings))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serve(tmp_path_factory)


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from serve(tmp_path_factory, attempts_per_minute=TIGHT_LIMIT)


class Watched:
    """A page with everything hostile it meets recorded: console errors (less the statuses
    a test expects), uncaught errors, dialogs (dismissed at once)."""

    def __init__(self, context: BrowserContext, expected: tuple[str, ...]) -> None:
        self.page = context.new_page()
        self.page.set_default_timeout(ACTION_TIMEOUT_MS)
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on(
            "console",
            lambda message: (
                self.errors.append(message.text)
                if message.type == "error" and not any(e in message.text for e in expected)
                else None
            ),
        )
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def violations(self) -> list[str]:
        return list(self.page.evaluate("window.__violations || []"))

    def pwned(self) -> object:
        return self.page.evaluate("window.__pwned")


@pytest.fixture
def make_watched(browser: Browser) -> Iterator[Callable[..., Watched]]:
    contexts: list[BrowserContext] = []

    def make(server: LiveServer, *, expected: tuple[str, ...] = (), **options: Any) -> Watched:
        context = browser.new_context(base_url=server.url, **options)
        context.add_init_script(WATCH_POLICY)
        contexts.append(context)
        return Watched(context, expected)

    yield make
    for context in contexts:
        context.close()


# --- steps ------------------------------------------------------------------------------------


def commit(page: Page) -> None:
    page.get_by_role("radio", name="Residual connections").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")


def predict_row(page: Page, key: str) -> None:
    label = ROW_LABELS[key]
    group = page.get_by_role("group", name=f"{label}: your prediction")
    group.get_by_role("radio", name=OUTCOME_LABELS[PREDICTIONS[key]], exact=True).check()
    page.get_by_role("button", name=f"{LESSON.ablation.predict_label} ({label})").click()
    expect(page.locator(f"#row-{key}-prediction")).to_have_text(OUTCOME_LABELS[PREDICTIONS[key]])


def save_takeaway(page: Page, text: str) -> None:
    page.get_by_label(LESSON.takeaway.label, exact=True).fill(text)
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text("Saved")


def number_field(page: Page, field_id: str):  # type: ignore[no-untyped-def]
    label = next(f.label for f in LESSON.number_fields if f.id == field_id)
    return page.get_by_label(label, exact=True)


# --- the policy -------------------------------------------------------------------------------


def test_the_whole_page_works_under_its_policy(
    make_watched: Callable[..., Watched], open_server: LiveServer
) -> None:
    watched = make_watched(open_server)
    page = watched.page
    response = page.goto("/")
    assert response is not None
    policy = response.headers["content-security-policy"]
    # 'wasm-unsafe-eval' allows WebAssembly compilation only (the lab's kernels), no eval.
    assert "script-src 'self' 'wasm-unsafe-eval';" in policy
    assert "unsafe" not in policy.replace("'wasm-unsafe-eval'", "")
    assert response.headers["x-frame-options"] == "DENY"

    commit(page)
    page.get_by_role("switch", name=LESSON.hand.switch_label).click()  # live repaint
    expect(page.locator("#edge-now")).to_contain_text(LESSON.hand.edge_now_off)
    page.get_by_label(LESSON.own_row.label).fill("3, 1, 4, 1, 5")
    expect(page.locator("#own-row-steps [data-ln=mean]")).to_have_text("2.800000")
    number_field(page, "row1_mean").fill("2")
    page.get_by_role("button", name=LESSON.numbers.check_label).click()
    expect(page.locator("#gate-numbers")).to_have_text("1 of 6 numbers landed.")
    save_takeaway(page, "Layer norm keeps the scale; the residual keeps the signal.")
    for key in PREDICTIONS:
        predict_row(page, key)
    page.get_by_role("button", name=f"{LESSON.ablation.play_label} ({ROW_LABELS['both']})").click()
    # The row's curves, drawn by the server, grow with CSS under the policy's style-src.
    expect(page.locator("#player .charts")).to_have_class(re.compile(r"\bgrowing\b"))
    expect(page.locator("#chart-accuracy svg.curve-svg")).to_have_count(1)
    page.reload()
    expect(page.locator("#chart-loss svg.curve-svg")).to_have_count(1)

    assert watched.violations() == []
    assert watched.errors == []
    assert watched.dialogs == []

    # The policy is live: an inline script put into the page is blocked and reported.
    page.evaluate(
        """() => {
          const script = document.createElement("script");
          script.textContent = "window.__pwned = 'inline'";
          document.body.append(script);
        }"""
    )
    page.wait_for_function("window.__violations.length > 0")
    assert [v.split()[0] for v in watched.violations()] == ["script-src-elem"]
    assert watched.pwned() is None


# --- payloads stay text -----------------------------------------------------------------------


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_script_payloads_in_what_a_learner_types_stay_text(
    make_watched: Callable[..., Watched], open_server: LiveServer, javascript: bool
) -> None:
    watched = make_watched(open_server, expected=("status of 422",), java_script_enabled=javascript)
    page = watched.page
    page.goto("/")
    commit(page)
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    box.fill(TAKEAWAY)
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    if javascript:
        expect(page.locator("#takeaway-status")).to_have_text("Saved")
    # A number field keeps what was typed (a format error), drawn back into its value.
    number_field(page, "row1_mean").fill(PAYLOADS[2][:60])
    page.get_by_role("button", name=LESSON.numbers.check_label).click()
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text("not a number")
    expect(page.locator("#field-row1_mean-attempts")).to_have_text("Attempts: 0")

    page.reload()
    expect(box).to_have_value(TAKEAWAY)
    expect(number_field(page, "row1_mean")).to_have_value(PAYLOADS[2][:60])
    # The learner's own row from the URL (a link someone sent) is drawn as text too.
    page.goto(f"/?row={PAYLOADS[1]}")
    expect(page.get_by_label(LESSON.own_row.label)).to_have_value(PAYLOADS[1])

    assert page.locator("img[src=x], svg[onload], script:not([src])").count() == 0
    if javascript:
        assert watched.pwned() is None
        assert watched.violations() == []
    assert watched.dialogs == []
    assert watched.errors == []


# --- another site -----------------------------------------------------------------------------


def test_a_form_posted_from_another_site_is_refused(
    make_watched: Callable[..., Watched], open_server: LiveServer
) -> None:
    watched = make_watched(open_server, expected=("status of 403",))
    page = watched.page
    page.goto("/")
    commit(page)
    save_takeaway(page, "My own words.")
    # A page on another site that posts to the lesson as soon as it opens.
    attack = f"""<!doctype html><title>Win a prize</title>
      <form method="post" action="{open_server.url}/takeaway">
        <input name="text" value="Written by evil.test">
        <input name="{csrf.FIELD}" value="{"0" * 64}">
      </form>
      <script>document.forms[0].submit()</script>"""
    page.route(
        f"{EVIL}/**",
        lambda route: route.fulfill(
            content_type="text/html",
            body=attack if route.request.url.endswith("/prize") else "<title>Nothing</title>",
        ),
    )
    with page.expect_response(f"{open_server.url}/takeaway") as posted:
        page.goto(f"{EVIL}/prize")
    assert posted.value.status == 403
    expect(page.get_by_role("alert")).to_contain_text("came from another site")
    # The same from a script on that site, which could not read the answer anyway: Chromium
    # may stop it itself (a public site reaching a loopback address), or the server refuses it.
    page.goto(f"{EVIL}/quiet")
    outcome = page.evaluate(
        """(url) => fetch(url, {method: "POST", mode: "no-cors", credentials: "include",
                 body: new URLSearchParams({text: "Fetched by evil.test"})})
              .then(() => "sent", () => "stopped by the browser")""",
        f"{open_server.url}/takeaway",
    )
    assert outcome in ("sent", "stopped by the browser")
    page.goto(f"{open_server.url}/")
    expect(page.get_by_label(LESSON.takeaway.label, exact=True)).to_have_value("My own words.")


# --- the write limit --------------------------------------------------------------------------


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_write_limit_speaks_beside_the_form(
    make_watched: Callable[..., Watched], tight_server: LiveServer, javascript: bool
) -> None:
    watched = make_watched(
        tight_server, expected=("status of 429",), java_script_enabled=javascript
    )
    page = watched.page
    page.goto("/")
    commit(page)  # one write
    for typed in ("7", "8"):  # two more: the limit
        number_field(page, "row1_mean").fill(typed)
        page.get_by_role("button", name=LESSON.numbers.check_label).click()
        expect(page.locator("#field-row1_mean-attempts")).to_have_text(
            f"Attempts: {1 if typed == '7' else 2}"
        )
    number_field(page, "row1_mean").fill("2")
    page.get_by_role("button", name=LESSON.numbers.check_label).click()
    alert = page.locator("#numbers-alert")
    expect(alert).to_contain_text(f"That is {TIGHT_LIMIT} answers within a minute")
    expect(alert).to_contain_text("seconds, then try again")
    expect(page.locator("#field-row1_mean-attempts")).to_have_text("Attempts: 2")
    expect(page.locator("#gate-numbers")).to_have_text("0 of 6 numbers landed.")
    if javascript:
        # The refused check took nothing: what was typed is still the learner's after a reload.
        page.reload()
        expect(number_field(page, "row1_mean")).to_have_value("2")
    assert watched.errors == []


# --- without JavaScript -----------------------------------------------------------------------


def test_without_javascript_forms_carry_the_token_and_a_stale_page_is_told_why(
    make_watched: Callable[..., Watched], open_server: LiveServer
) -> None:
    watched = make_watched(open_server, expected=("status of 403",), java_script_enabled=False)
    page = watched.page
    page.goto("/")
    commit(page)
    page.get_by_label(LESSON.takeaway.label, exact=True).fill("Saved without JavaScript.")
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    # The save's redirect lands first: a reload while it is still under way races it
    # ("Not attached to an active page" on a loaded machine).
    expect(page).to_have_url(re.compile(r"/#takeaway-section$"))
    page.reload()
    expect(page.get_by_label(LESSON.takeaway.label, exact=True)).to_have_value(
        "Saved without JavaScript."
    )
    # The cookie goes (cleared, or expired) while the page stays open: its form is refused
    # with a message, and a link back to the lesson.
    page.context.clear_cookies()
    page.get_by_label(LESSON.takeaway.label, exact=True).fill("After the cookie went.")
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.get_by_role("heading", name="Refused")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Open the lesson and try again")
    page.get_by_role("link", name="Go to the lesson").click()
    expect(page.get_by_label(LESSON.takeaway.label, exact=True)).not_to_have_value(
        "After the cookie went."
    )
    assert watched.dialogs == []


def test_with_javascript_a_stale_page_shows_the_refusal_beside_the_form(
    make_watched: Callable[..., Watched], open_server: LiveServer
) -> None:
    watched = make_watched(open_server, expected=("status of 403",))
    page = watched.page
    page.goto("/")
    commit(page)
    page.context.clear_cookies()  # the session ends while the page stays open
    number_field(page, "row1_mean").fill("2")
    page.get_by_role("button", name=LESSON.numbers.check_label).click()
    refusal = page.locator("#numbers [data-refusal]")
    expect(refusal).to_have_text(csrf.NO_LEARNER)
    expect(refusal).to_have_attribute("role", "alert")
    page.get_by_label(LESSON.takeaway.label, exact=True).fill("Typed after the session ended.")
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text(csrf.NO_LEARNER)
    assert watched.errors == []
    assert watched.violations() == []
