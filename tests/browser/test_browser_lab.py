"""The panel "Train one yourself" in Chromium, on a server whose recording has a tiny lab grid
beside it (tests/sample_lab.py): nothing of the lab loads until the panel opens; a learner
picks a configuration and a prediction with the keyboard, commits, trains it through the real
worker (lab/worker.js), sees the curve drawn over the recorded one, the progress bar, and the
result announced; a reload shows the run kept; axe-core finds no violations and nothing
scrolls sideways at 375 px. Without JavaScript the panel says it needs it and its link opens
the recorded grid as a table."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from lab_page import (
    axe_violations,
    close_the_gate,
    no_horizontal_scroll,
    post_the_work,
    serve_with_grid,
)
from playwright.sync_api import Page, expect

from lesson_answers import LESSON
from live_server import LiveServer

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
PHONE = {"width": 375, "height": 812}
TEXT = LESSON.lab
CONFIG = "Both, depth 1, eps 0.00001, GPT-2 initialisation, seed 0"
# The tiny run trains in seconds; a loaded machine gets room, and no test asserts a time.
TRAINED_MS = 120_000


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording with a tiny lab grid beside it."""
    yield from serve_with_grid(tmp_path_factory, "lab-live")


def announced(page: Page) -> list[str]:
    return list(page.evaluate("window.labAnnounced"))


def test_a_tiny_run_is_predicted_trained_drawn_kept_and_announced(new_page: NewPage) -> None:
    # bypass_csp lets the audit script in; the page itself runs no inline script.
    page = new_page(bypass_csp=True, viewport=PHONE, reduced_motion="reduce")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    close_the_gate(page)
    page.wait_for_load_state("networkidle")
    lab_urls = [u for u in asked if "/lab" in u and not u.endswith("/lab.css")]
    assert not lab_urls, lab_urls  # the lab costs the page nothing until it opens

    expect(page.get_by_role("heading", name=TEXT.heading)).to_be_visible()
    # Every announcement, in order (the live region is rewritten each time).
    page.evaluate(
        """() => {
          window.labAnnounced = [];
          new MutationObserver(() => {
            const said = document.getElementById("announcer").textContent;
            if (said) window.labAnnounced.push(said);
          }).observe(document.getElementById("announcer"), { childList: true, subtree: true });
        }"""
    )
    summary = page.get_by_text(TEXT.open_label, exact=True)
    summary.focus()
    page.keyboard.press("Enter")  # opens the panel from the keyboard
    form = page.locator("#lab-commit")
    expect(form).to_be_visible()
    assert any(u.endswith("/lab-panel.js") for u in asked)
    assert any(u.endswith("/lab/panel") for u in asked)
    assert not [u for u in asked if "/static/" in u and "/lab/" in u]  # no trainer yet

    # Train waits for a committed prediction.
    expect(form.get_by_role("button", name=TEXT.train_label)).to_be_disabled()
    page.get_by_label(TEXT.depth_label).select_option("1")
    page.get_by_label(TEXT.rows_label).select_option("both")
    page.get_by_label(TEXT.eps_label).select_option("0.00001")
    expect(page.locator("#lab-cell-note")).to_have_text("")  # a recorded cell
    page.get_by_label(TEXT.rows_label).select_option("neither")
    expect(page.get_by_label(TEXT.eps_label)).to_be_disabled()  # eps only with layer norm
    page.get_by_label(TEXT.rows_label).select_option("both")
    page.get_by_label("Learns the copy").check()
    no_horizontal_scroll(page, PHONE["width"])
    assert axe_violations(page) == []
    page.get_by_role("button", name=TEXT.commit_label).focus()
    page.keyboard.press("Enter")

    train = page.get_by_role("button", name=TEXT.train_label, exact=True)
    expect(train).to_be_enabled()
    expect(train).to_be_focused()
    expect(page.locator("#lab-pending")).to_contain_text(CONFIG)
    page.keyboard.press("Enter")  # Train, from the keyboard
    expect(page.get_by_role("progressbar", name=TEXT.progress_label)).to_be_visible()

    result = page.locator("#lab-result")
    expect(result).to_be_visible(timeout=TRAINED_MS)
    expect(result.get_by_role("heading")).to_have_text(f"{TEXT.result_heading}: {CONFIG}")
    expect(result).to_contain_text("You predicted it would learn the copy")
    expect(result).to_contain_text(re.compile(r"the recording"))
    expect(result).to_be_focused()
    # The live curve stays beside the result, grown on the server's chart over the recorded
    # one, which came with the panel: no chart library, no grid fetched.
    chart = page.get_by_role("img", name=TEXT.chart_label)
    live = chart.locator('[data-series="run"] path.line')
    expect(live).to_have_attribute("d", re.compile(r"^M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+$"))
    expect(chart.locator(".recorded path.line")).to_have_count(1)
    assert not [u for u in asked if "/lab/grid/" in u or "uPlot" in u or "player.js" in u]
    assert any(u.endswith("/lab/worker.js") for u in asked)
    page.wait_for_function("window.labAnnounced.some((said) => said.includes('You predicted'))")
    said = announced(page)
    # A quarter, a half and three quarters, each once, as the worker's progress passes them
    # (a run this small may pass several between two reports); never every step.
    milestones = [s for s in said if re.fullmatch(r"\d+ % trained\.", s)]
    assert len(milestones) == len(set(milestones)), said
    assert any(s.startswith(TEXT.milestone.format(percent=100)) for s in said), said
    assert not any(re.match(r"Step \d", s) for s in said)  # milestones, not every step
    no_horizontal_scroll(page, PHONE["width"])
    assert axe_violations(page) == []

    page.reload()
    runs = page.locator("#lab-runs")
    expect(runs).to_contain_text(CONFIG)
    expect(runs).to_contain_text("you predicted learns the copy")


def test_without_javascript_the_panel_says_so_and_links_the_grid_as_a_table(
    new_page: NewPage,
) -> None:
    page = new_page(java_script_enabled=False, viewport=PHONE)
    close_the_gate(page)
    page.get_by_text(TEXT.open_label, exact=True).click()
    expect(page.locator("#lab-body")).to_contain_text(TEXT.needs_js)
    page.get_by_role("link", name=TEXT.page_label).click()
    expect(page).to_have_url(re.compile(r"/lab#lab$"))
    table = page.get_by_role("table", name=re.compile("recorded lab runs, GPT-2"))
    expect(table).to_be_visible()
    expect(table.get_by_role("row")).to_have_count(1 + 8)  # a header and eight rows
    no_horizontal_scroll(page, PHONE["width"])


# Each caption's text as laid out, against the width of the box its table scrolls in.
CAPTIONS = """() => [...document.querySelectorAll(".table-scroll caption")].map((caption) => {
  const text = document.createRange();
  text.selectNodeContents(caption);
  const box = caption.closest(".table-scroll").getBoundingClientRect();
  const drawn = text.getBoundingClientRect();
  return { width: Math.round(drawn.width), box: Math.round(box.width),
           inside: drawn.left >= box.left - 0.5 && drawn.right <= box.right + 0.5 };
})"""


@pytest.mark.parametrize("language", ["en", "de", "ar"])
def test_without_javascript_the_grids_captions_wrap_on_a_phone(
    new_page: NewPage, language: str
) -> None:
    page = new_page(java_script_enabled=False, viewport=PHONE, locale=language)
    post_the_work(page)
    page.goto("/lab")
    expect(page.locator(".lab-grid table").first).to_be_visible()
    captions = page.evaluate(CAPTIONS)
    assert captions and all(c["inside"] and c["width"] <= c["box"] for c in captions), captions
    no_horizontal_scroll(page, PHONE["width"])


def test_the_lab_opened_is_open_again_after_a_reload(new_page: NewPage) -> None:
    page = new_page()
    close_the_gate(page)
    page.get_by_text(TEXT.open_label, exact=True).click()
    expect(page.locator("#lab-commit")).to_be_visible()
    page.reload()
    expect(page.locator("#lab-panel")).to_have_attribute("open", "")
    expect(page.locator("#lab-commit")).to_be_visible()
