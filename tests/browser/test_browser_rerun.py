"""The panel "Re-run the ablation on this device" in Chromium, on a server whose recording has a
tiny lab grid beside it (tests/sample_lab.py, with the re-run's four cells): nothing of it loads
until the panel opens; from the keyboard, one button trains the four rows one after another
through the real worker, under one progress bar, each drawn over its recorded cell; the
side-by-side fills row by row and ends with the sentence composed from the numbers, announced;
a reload during a row keeps the rows before it and says which row starts again, and from which
step; axe-core finds no violations and nothing scrolls sideways at 320 px."""

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
from playwright.sync_api import Page, Route, expect

from lesson_answers import LESSON
from live_server import LiveServer
from normdive.lesson.translations import load_translation
from sample_lab import sample_lab_grid

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
NARROW = {"width": 320, "height": 740}
TEXT = LESSON.rerun
LABELS = [row.label for row in LESSON.rows]
# Four tiny rows train in seconds; a loaded machine gets room, and no test asserts a time.
TRAINED_MS = 180_000
# A device curve drawn from step 0 on: a move, then lines to each evaluation.
GROWN = re.compile(r"^M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+$")


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording with a tiny lab grid (and the re-run's
    cells) beside it."""
    yield from serve_with_grid(tmp_path_factory, "rerun-live", sample_lab_grid(with_rerun=True))


def listen_to_announcements(page: Page) -> None:
    page.evaluate(
        """() => {
          window.said = [];
          window.focusWhenSaid = [];
          new MutationObserver(() => {
            const text = document.getElementById("announcer").textContent;
            if (text) {
              window.said.push(text);
              window.focusWhenSaid.push(document.activeElement?.id || "");
            }
          }).observe(document.getElementById("announcer"), { childList: true, subtree: true });
        }"""
    )


def open_the_panel(page: Page) -> None:
    """Open the panel from the keyboard; after a reload the page opens it again itself."""
    if page.locator("#rerun-panel").get_attribute("open") is None:
        summary = page.get_by_text(TEXT.open_label, exact=True)
        summary.focus()
        page.keyboard.press("Enter")
    expect(page.locator("#rerun-train")).to_be_visible()


def test_the_four_rows_train_fill_the_side_by_side_and_end_in_a_sentence(
    new_page: NewPage,
) -> None:
    # bypass_csp lets the audit script in; the page itself runs no inline script.
    page = new_page(bypass_csp=True, viewport=NARROW, reduced_motion="reduce")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    close_the_gate(page)
    page.wait_for_load_state("networkidle")
    assert not [u for u in asked if "rerun" in u or "/lab/" in u]  # nothing until it opens
    expect(page.get_by_role("heading", name=TEXT.heading)).to_be_visible()
    listen_to_announcements(page)
    open_the_panel(page)
    assert any(u.endswith("/rerun.js") for u in asked)
    assert not any(u.endswith("/lab/worker.js") for u in asked)  # no trainer before Start
    expect(page.locator("#rerun-smaller")).to_contain_text("narrower")
    table = page.get_by_role("table", name=TEXT.table_caption)
    expect(table.get_by_role("row")).to_have_count(1 + 4)
    no_horizontal_scroll(page, NARROW["width"])
    assert axe_violations(page) == []

    start = page.get_by_role("button", name=TEXT.start_label)
    start.focus()
    page.keyboard.press("Enter")
    bar = page.get_by_role("progressbar", name=TEXT.progress_label)
    expect(bar).to_be_visible()
    expect(page.get_by_role("button", name=TEXT.stop_label)).to_be_focused()
    verdict = page.locator("#rerun-verdict")
    expect(verdict).to_be_visible(timeout=TRAINED_MS)
    expect(verdict).to_contain_text(TEXT.same_order.split("{")[0].strip())
    expect(page.locator("#rerun-results")).to_be_focused()
    assert float(bar.get_attribute("value") or 0) == 100
    for label in LABELS:
        device = table.get_by_role("row", name=re.compile(label)).locator("td.device")
        expect(device).to_contain_text("%")
    expect(page.locator("#rerun-kept")).to_have_text(TEXT.kept_rows.format(done=4, rows=4))
    # Each row grew on the server's chart over its recorded cell, which came with the panel:
    # no chart library, no grid fetched.
    chart = page.get_by_role("img", name=TEXT.chart_label)
    device_lines = chart.locator("g.device path.line")
    expect(device_lines).to_have_count(4)
    for index in range(4):
        expect(device_lines.nth(index)).to_have_attribute("d", GROWN)
    expect(chart.locator("g.recorded path.line")).to_have_count(4)
    assert not [u for u in asked if "/lab/grid/" in u or "uPlot" in u or "player.js" in u]
    assert sum(u.endswith("/lab/worker.js") for u in asked) >= 1
    expect(page.get_by_role("button", name=TEXT.again_label)).to_be_enabled()
    page.wait_for_function("window.said.some((text) => text.includes('as in the recording'))")
    said = list(page.evaluate("window.said"))
    # Each row's start and each row's end are said; a row's end and the next row's start in
    # one announcement, so that neither overwrites the other.
    heard = " ".join(said)
    for index, label in enumerate(LABELS, start=1):
        assert TEXT.row_started.format(row=index, rows=4, name=label) in heard, said
        assert f"{label} finished on your device" in heard, said
    assert len(said) == len(set(said)), said
    # The keyboard keeps Stop from one row to the next (its button is disabled in between).
    focus = list(page.evaluate("window.focusWhenSaid"))
    for text, focused in zip(said, focus, strict=True):
        if "Row 2 of 4" in text or "Row 4 of 4" in text:
            assert focused == "rerun-stop", (text, focused)
    # The side-by-side fits the 320 px phone: the device's column is on screen.
    device = table.locator("td.device").first.bounding_box()
    assert device is not None and device["x"] + device["width"] <= NARROW["width"], device
    assert not any(re.match(r"Row \d of 4, .*: step", s) for s in said)  # milestones only
    no_horizontal_scroll(page, NARROW["width"])
    assert axe_violations(page) == []

    page.reload()  # the kept set is drawn by the server, its curves too
    open_the_panel(page)
    expect(page.locator("#rerun-verdict")).to_be_visible()
    for index in range(4):
        expect(device_lines.nth(index)).to_have_attribute("d", GROWN)
    # Again: a second set; the table and the chart forget the first set's device figures
    # meanwhile, and once the second set's first row is kept the first set is listed with its
    # ranking.
    page.get_by_role("button", name=TEXT.again_label).click()
    expect(page.locator("#rerun-verdict")).to_have_count(0)
    expect(device_lines.nth(3)).to_have_attribute("d", "")
    history = page.locator("#rerun-history")
    expect(history).to_contain_text(TEXT.history_line.split("{")[0] + "1", timeout=TRAINED_MS)
    expect(page.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)


# What a box of the page overflows by, sideways, and where each of the table's cells ends.
FIT = """(table) => {
  const region = table.closest(".table-scroll");
  const box = region.getBoundingClientRect();
  const caption = table.querySelector("caption");
  const outside = [...table.querySelectorAll("th, td")].filter((cell) => {
    const drawn = cell.getBoundingClientRect();
    return drawn.width > 0 && (drawn.left < box.left - 0.5 || drawn.right > box.right + 0.5);
  });
  return {
    region: region.scrollWidth - region.clientWidth,
    caption: caption.scrollWidth - caption.clientWidth,
    outside: outside.map((cell) => cell.textContent.trim()),
  };
}"""


@pytest.mark.parametrize(
    ("language", "width"), [("de", 320), ("de", 375), ("ar", 320), ("en", 375)]
)
def test_the_side_by_side_reads_on_a_phone_without_scrolling_sideways(
    new_page: NewPage, language: str, width: int
) -> None:
    lesson = load_translation(language)[0] if language != "en" else LESSON
    page = new_page(locale=language, viewport={"width": width, "height": 740})
    post_the_work(page)
    summary = page.get_by_text(lesson.rerun.open_label, exact=True)
    summary.click()
    expect(page.locator("#rerun-train")).to_be_visible()
    table = page.get_by_role("table", name=lesson.rerun.table_caption)
    expect(table).to_be_visible()
    page.wait_for_load_state("load")
    fit = table.evaluate(FIT)
    # Every column on screen in its box, the caption whole: nothing to scroll sideways to.
    assert fit == {"region": 0, "caption": 0, "outside": []}, fit
    # Still a table to a screen reader: its five headings, four rows of a heading and four cells.
    expect(table.get_by_role("columnheader")).to_have_count(5)
    expect(table.get_by_role("rowheader")).to_have_count(4)
    expect(table.get_by_role("cell")).to_have_count(16)
    no_horizontal_scroll(page, width)


def test_a_reload_during_a_row_keeps_the_rows_before_and_says_which_starts_again(
    new_page: NewPage,
) -> None:
    page = new_page(viewport=NARROW)
    close_the_gate(page)
    open_the_panel(page)
    # The second row's figures never reach the server: the reload comes while they are on
    # their way, so that row was cut short.
    held: list[Route] = []
    page.route(re.compile(r"/lab/reruns/\d+/rows/residual_only$"), lambda route: held.append(route))
    page.get_by_role("button", name=TEXT.start_label).click()
    page.wait_for_function(
        "() => document.querySelector('#rerun-kept')?.textContent.includes('1 of 4')",
        timeout=TRAINED_MS,
    )
    page.wait_for_function(
        "() => (JSON.parse(localStorage.getItem('normdive.rerun.training') || 'null')?.step ?? 0)"
        " > 0 "
        "&& JSON.parse(localStorage.getItem('normdive.rerun.training')).row === 'residual_only'",
        timeout=TRAINED_MS,
    )
    step = page.evaluate("JSON.parse(localStorage.getItem('normdive.rerun.training')).step")
    page.reload()  # the held answer goes with the page it was for
    page.unroute(re.compile(r"/lab/reruns/\d+/rows/residual_only$"))
    open_the_panel(page)
    note = page.locator("#rerun-restarted")
    expect(note).to_be_visible()
    expect(note).to_have_text(TEXT.restarted.format(name=LABELS[1], step=step))
    expect(page.locator("#rerun-kept")).to_have_text(TEXT.kept_rows.format(done=1, rows=4))
    kept = page.get_by_role("row", name=re.compile(LABELS[0])).locator("td.device")
    expect(kept).to_contain_text("%")
    # The kept row's curve is drawn by the server; the row cut short starts from nothing.
    chart = page.get_by_role("img", name=TEXT.chart_label)
    expect(chart.locator('[data-series="both"] path.line')).to_have_attribute("d", GROWN)
    expect(chart.locator('[data-series="residual_only"] path.line')).to_have_attribute("d", "")
    go_on = page.get_by_role("button", name=TEXT.continue_label)
    go_on.click()
    expect(page.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)
    expect(page.locator("#rerun-kept")).to_have_text(TEXT.kept_rows.format(done=4, rows=4))
    assert page.evaluate("localStorage.getItem('normdive.rerun.training')") is None


def test_a_second_tab_says_another_tab_is_training_and_shows_what_the_server_keeps(
    new_page: NewPage,
) -> None:
    one = new_page(viewport=NARROW)
    close_the_gate(one)
    open_the_panel(one)
    # Tab one's second row is held on its way to the server: tab one is mid-set.
    held: list[Route] = []
    second_row = re.compile(r"/lab/reruns/\d+/rows/residual_only$")
    one.route(second_row, lambda route: held.append(route))
    one.get_by_role("button", name=TEXT.start_label).click()
    one.wait_for_function(
        "() => JSON.parse(localStorage.getItem('normdive.rerun.training') || 'null')?.row"
        " === 'residual_only'",
        timeout=TRAINED_MS,
    )

    two = one.context.new_page()
    two.goto("/")
    open_the_panel(two)
    note = two.locator("#rerun-restarted")
    expect(note).to_be_visible()
    expect(note).to_contain_text(TEXT.elsewhere.split("{")[0].strip())
    expect(note).to_contain_text(LABELS[1])
    expect(note).not_to_contain_text(TEXT.restarted.split("{")[0].strip())
    expect(two.locator("#rerun-start")).to_be_disabled()  # nothing to continue here

    # Tab one goes on; tab two, untouched, ends showing what the server holds.
    waited = 0
    while not held and waited < TRAINED_MS:
        one.wait_for_timeout(100)
        waited += 100
    held[0].continue_()
    one.unroute(second_row)
    expect(one.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)
    expect(two.locator("#rerun-kept")).to_have_text(
        TEXT.kept_rows.format(done=4, rows=4), timeout=TRAINED_MS
    )
    expect(two.locator("#rerun-verdict")).to_be_visible()
    expect(two.locator("#rerun-restarted")).to_be_hidden()


def test_the_time_left_in_german_ends_its_sentence_with_one_full_stop(new_page: NewPage) -> None:
    # "30 Sek." ends in the abbreviation's own stop; the sentence around it adds none after it.
    german = load_translation("de")[0].rerun
    page = new_page(locale="de-DE", viewport=NARROW)
    post_the_work(page)
    page.get_by_text(german.open_label, exact=True).click()
    expect(page.locator("#rerun-train")).to_be_visible()
    page.evaluate(
        """() => {
          window.shown = [];
          const status = document.getElementById("rerun-progress-text");
          new MutationObserver(() => window.shown.push(status.textContent)).observe(
            status, { childList: true, characterData: true, subtree: true });
        }"""
    )
    page.get_by_role("button", name=german.start_label).click()
    expect(page.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)
    shown = [text for text in page.evaluate("window.shown") if re.search(r"Sek\.|Min\.", text)]
    assert shown and not [text for text in shown if ".." in text], shown


def test_a_row_whose_figures_did_not_reach_the_server_is_sent_again_not_trained_again(
    new_page: NewPage,
) -> None:
    page = new_page(viewport=NARROW)
    close_the_gate(page)
    open_the_panel(page)
    first_row = re.compile(r"/lab/reruns/\d+/rows/both$")
    # The first row's post never reaches the server: a captive portal answers it instead
    # (a dropped connection reads the same to the page, and Chromium logs it as an error).
    page.route(first_row, lambda route: route.fulfill(status=200, body="<html>Sign in</html>"))
    page.get_by_role("button", name=TEXT.start_label).click()
    go_on = page.get_by_role("button", name=TEXT.continue_label)
    expect(go_on).to_be_enabled(timeout=TRAINED_MS)
    expect(page.locator("#rerun-results .alert")).to_contain_text("Continue sends them again")
    page.unroute(first_row)
    started: list[str] = []
    page.on("worker", lambda worker: started.append(worker.url))
    go_on.click()
    expect(page.locator("#rerun-kept")).to_contain_text(
        TEXT.kept_rows.format(done=1, rows=4), timeout=TRAINED_MS
    )
    expect(page.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)
    # Continue sent the kept figures, then trained the three other rows: three workers.
    assert len(started) == 3, started
