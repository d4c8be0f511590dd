"""What the lesson page's script loads, and when, in Chromium: only its wiring (page.js and the
takeaway's saved text) comes with the page; the modules that answer the learner's actions
arrive once the page has loaded, so that its first action waits for no download; and an
action taken before they have arrived still does what it does once they are here."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Route, expect

from lesson_answers import LESSON

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
STATIC = re.compile(r"^/static/[0-9a-f]+/")
# What the page loads with it, each under the release's static folder.
WITH_THE_PAGE = ["page.js", "page/takeaway-saved.js", "page/kept.js"]
# Loaded once the page has (while it is idle): what the switch, a form's post, the takeaway
# and the own row need.
ONCE_LOADED = ["layernorm.js", "page/numbers.js", "page/forms.js", "page/takeaway.js"]

# Every script the page fetched: its name under the static folder, and whether its fetch
# started before the load event.
SCRIPTS = """() => {
  const loaded = performance.getEntriesByType("navigation")[0].loadEventStart;
  return performance.getEntriesByType("resource")
    .filter((entry) => new URL(entry.name).pathname.endsWith(".js"))
    .map((entry) => [new URL(entry.name).pathname, entry.startTime < loaded]);
}"""


def script_name(path: str) -> str:
    return STATIC.sub("", path)


def commit(page: Page) -> None:
    page.get_by_role("radio", name="Residual connections").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")


def test_only_the_wiring_loads_with_the_page_and_the_rest_once_it_has(
    new_page: NewPage,
) -> None:
    page = new_page()
    page.goto("/")
    expect(page.locator("html")).to_have_class(re.compile(r"\bjs\b"))
    page.wait_for_function(
        "names => names.every(name => performance.getEntriesByType('resource')"
        ".some(entry => entry.name.endsWith('/' + name)))",
        arg=ONCE_LOADED,
    )
    scripts = page.evaluate(SCRIPTS)
    before = sorted(script_name(path) for path, early in scripts if early)
    assert before == sorted(WITH_THE_PAGE)
    after = {script_name(path) for path, early in scripts if not early}
    assert set(ONCE_LOADED) <= after
    assert not any("player.js" in name or "uPlot" in name for name in after)

    # The learner's first action fetches no script: what answers it is here already.
    asked: list[str] = []
    page.on("request", lambda request: asked.append(urlsplit(request.url).path))
    commit(page)
    assert [path for path in asked if path.endswith(".js")] == []


def test_a_flip_before_the_numbers_module_has_arrived_repaints_once_it_does(
    new_page: NewPage,
) -> None:
    page = new_page()
    page.goto("/")
    commit(page)  # the switch is open from now on, also after a reload
    held: list[Route] = []
    numbers_module = re.compile(r"/page/numbers\.js$")
    page.route(numbers_module, lambda route: held.append(route))
    with page.expect_request(numbers_module):
        page.reload()
    expect(page.locator("html")).to_have_class(re.compile(r"\bjs\b"))
    eps = page.locator("#hand .badge [data-ln=eps]")
    expect(eps).to_have_text(str(LESSON.eps))
    page.get_by_role("switch", name=LESSON.hand.switch_label).click()
    assert eps.text_content() == str(LESSON.eps)  # not repainted yet: its module is on its way
    for route in held:
        route.continue_()
    expect(eps).to_have_text("0")
    expect(page).to_have_url(re.compile(r"[?&]eps=off\b"))


def test_a_check_before_the_forms_module_has_arrived_is_sent_once_it_does(
    new_page: NewPage,
) -> None:
    page = new_page()
    held: list[Route] = []
    forms_module = re.compile(r"/page/forms\.js$")
    page.route(forms_module, lambda route: held.append(route))
    with page.expect_request(forms_module):
        page.goto("/")
    expect(page.locator("html")).to_have_class(re.compile(r"\bjs\b"))
    page.get_by_role("radio", name="Residual connections").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    for route in held:
        route.continue_()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")


def test_what_is_typed_before_its_modules_have_arrived_survives_a_reload(
    new_page: NewPage,
) -> None:
    # Typing is kept within the input event (page/kept.js), not once takeaway.js or drafts.js
    # has arrived: a reload a moment after typing, on a slow phone, loses nothing.
    page = new_page()
    page.goto("/")
    commit(page)
    held: list[Route] = []
    late_modules = re.compile(r"/page/(takeaway|drafts)\.js$")
    page.route(late_modules, lambda route: held.append(route))
    page.reload()
    expect(page.locator("html")).to_have_class(re.compile(r"\bjs\b"))
    takeaway = page.get_by_label(LESSON.takeaway.label, exact=True)
    takeaway.fill("Typed while its module was on its way.")
    page.get_by_label(LESSON.number_fields[0].label, exact=True).fill("1.23")
    # Leaving the page while they are held: they never arrive in it, so what was typed must be
    # kept already. Coming back in the same tab loads them as usual.
    page.goto("about:blank")
    assert sorted(urlsplit(route.request.url).path.rsplit("/", 1)[1] for route in held) == [
        "drafts.js",
        "takeaway.js",
    ]
    assert page.url == "about:blank"
    page.unroute(late_modules)
    page.goto("/")  # not Back, whose form restoring would type the box back itself
    expect(takeaway).to_have_value("Typed while its module was on its way.")
    expect(page.get_by_label(LESSON.number_fields[0].label, exact=True)).to_have_value("1.23")
