"""The charts in Chromium at 320 px, in English, German and Arabic: the player's, the lab's and
the re-run's are the server's SVG, named images; a replayed row's curves grow with CSS, a lab
run's and a re-run row's as the worker reports; every word and figure on a chart lies whole
inside it (German's long "Genauigkeit auf zurückgehaltenen Daten", Arabic's first letter), the
percentages read as the server writes them ("100 %", never "% 100" in Arabic), and nothing
scrolls sideways or fails axe-core."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lab_page import axe_violations, no_horizontal_scroll, post_the_work, serve_with_grid
from playwright.sync_api import Locator, Page, expect

from live_server import LiveServer
from normdive.lesson.translations import load_translation
from sample_lab import sample_lab_grid

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
SMALL_PHONE = {"width": 320, "height": 640}
# Per language: the locale the browser asks for, and the charts' titles as the page writes
# them: the player's value axes (accuracy, loss), the training panels' and the step axis.
LANGUAGES = {
    "en": ("en", "Accuracy", "Loss", "Held-out accuracy", "Training step"),
    "de": (
        "de-DE",
        "Genauigkeit",
        "Verlust",
        "Genauigkeit auf zurückgehaltenen Daten",
        "Trainingsschritt",
    ),
    "ar": ("ar", "الدقة", "الخسارة", "الدقة على البيانات المحجوزة", "خطوة التدريب"),
}
# A percentage keeps its sign on its line: a no-break space between them.
PERCENT_TICKS = ["0\u00a0%", "25\u00a0%", "50\u00a0%", "75\u00a0%", "100\u00a0%"]
# A curve drawn from step 0 on: a move, then a line to each evaluation.
GROWN = re.compile(r"^M[\d.]+ [\d.]+(L[\d.]+ [\d.]+)+$")
# A tiny run or row trains in seconds; a loaded machine gets room, and no test asserts a time.
TRAINED_MS = 180_000
ANIMATION_TIMEOUT_MS = 20_000

# What a chart's frame shows: its drawing's axis titles, the texts not wholly inside the
# drawing, and each percentage with whether its digits come before its sign on screen.
READ = """(frame) => {
  const svg = frame.querySelector("svg.curve-svg");
  if (!svg) return null;
  const box = svg.getBoundingClientRect();
  const outside = [...svg.querySelectorAll("text")].filter((text) => {
    const r = text.getBoundingClientRect();
    return r.left < box.left - 0.5 || r.right > box.right + 0.5
      || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5;
  });
  return {
    right: box.right,
    titles: [...svg.querySelectorAll("text.axis-title")].map((text) => text.textContent),
    outside: outside.map((text) => text.textContent),
    ticks: [...svg.querySelectorAll("text.tick")].map((text) => text.textContent),
    percents: [...svg.querySelectorAll("text.tick")]
      .filter((text) => text.textContent.endsWith("%"))
      .map((text) => text.getStartPositionOfChar(0).x
        < text.getStartPositionOfChar(text.getNumberOfChars() - 1).x),
  };
}"""


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording with a tiny lab grid (and the re-run's
    cells) beside it."""
    yield from serve_with_grid(tmp_path_factory, "charts-live", sample_lab_grid(with_rerun=True))


def read_chart(frame: Locator, value_title: str, step_title: str) -> dict[str, Any]:
    """The chart in `frame`, checked: the server's drawing, titled in the page's language,
    every text whole inside it and on the phone's screen."""
    expect(frame).to_have_attribute("role", "img")
    drawn: dict[str, Any] | None = frame.evaluate(READ)
    assert drawn is not None, "no SVG chart in the frame"
    assert drawn["titles"] == [value_title, step_title], drawn
    assert drawn["outside"] == [], drawn
    assert drawn["right"] <= SMALL_PHONE["width"], drawn
    return drawn


def read_percent_chart(frame: Locator, value_title: str, step_title: str) -> None:
    drawn = read_chart(frame, value_title, step_title)
    assert drawn["ticks"][:5] == PERCENT_TICKS, drawn
    assert drawn["percents"] == [True] * 5, drawn  # "100 %", its digits first


def open_panel(page: Page, panel: str) -> None:
    page.locator(f"#{panel}-panel > summary").click()


def commit_a_lab_run(page: Page) -> None:
    """Open the lab's panel and commit its tiny run: Both, depth 1, predicted to learn."""
    open_panel(page, "lab")
    page.locator("#lab-depth").select_option("1")
    page.locator("#lab-row").select_option("both")
    page.locator("#lab-commit input[name=outcome][value=learns]").check()
    page.locator("#lab-commit-button").click()
    expect(page.locator("#lab-start")).to_be_enabled()


@pytest.mark.parametrize("language", ["de", "ar"])
def test_the_training_charts_titles_lie_whole_in_german_and_arabic(
    new_page: NewPage, language: str
) -> None:
    # In German the title ran off the top of the canvas; in Arabic it lost its first letter.
    locale, _, _, heldout, step = LANGUAGES[language]
    lesson, _ = load_translation(language)
    page = new_page(locale=locale, viewport=SMALL_PHONE, reduced_motion="reduce")
    post_the_work(page)
    commit_a_lab_run(page)
    read_chart(page.get_by_role("img", name=lesson.lab.chart_label), heldout, step)
    open_panel(page, "rerun")
    read_chart(page.get_by_role("img", name=lesson.rerun.chart_label), heldout, step)


def test_the_charts_percentages_read_as_the_server_writes_them_in_arabic(
    new_page: NewPage,
) -> None:
    # The canvas wrote "% 100" on the Arabic page, where the server's tables write "100 %".
    locale, accuracy, _, heldout, step = LANGUAGES["ar"]
    lesson, _ = load_translation("ar")
    page = new_page(locale=locale, viewport=SMALL_PHONE, reduced_motion="reduce")
    post_the_work(page)
    expect(page.locator("#final-accuracy")).to_contain_text("%")
    assert page.locator("#final-accuracy").inner_text().endswith("\u00a0%")
    read_percent_chart(page.locator("#chart-accuracy"), accuracy, step)
    commit_a_lab_run(page)
    read_percent_chart(page.get_by_role("img", name=lesson.lab.chart_label), heldout, step)
    open_panel(page, "rerun")
    read_percent_chart(page.get_by_role("img", name=lesson.rerun.chart_label), heldout, step)


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_every_chart_grows_and_reads_whole_in_the_learners_language_at_320_px(
    new_page: NewPage, language: str
) -> None:
    locale, accuracy, loss, heldout, step = LANGUAGES[language]
    lesson, _ = load_translation(language)
    # bypass_csp lets the audit script in; the page itself runs no inline script.
    page = new_page(locale=locale, bypass_csp=True, viewport=SMALL_PHONE)
    post_the_work(page)
    expect(page.locator("html")).to_have_attribute("lang", language)

    # The player: a replayed row grows its curves, then shows its figures.
    page.locator("#row-both-play").click()
    expect(page.locator("#player .charts")).to_have_class(re.compile(r"\bgrowing\b"))
    expect(page.locator("#final-figures")).to_be_visible(timeout=ANIMATION_TIMEOUT_MS)
    read_percent_chart(page.locator("#chart-accuracy"), accuracy, step)
    drawn = read_chart(page.locator("#chart-loss"), loss, step)
    if language == "de":  # a loss tick in the page's writing: "0,5", not "0.5"
        assert not [tick for tick in drawn["ticks"] if "." in tick], drawn
    read_percent_chart(page.locator("#together .curve-frame"), accuracy, step)
    no_horizontal_scroll(page, SMALL_PHONE["width"])

    # The lab: a tiny run grows over its recorded cell.
    commit_a_lab_run(page)
    lab_chart = page.get_by_role("img", name=lesson.lab.chart_label)
    read_percent_chart(lab_chart, heldout, step)
    expect(lab_chart.locator(".recorded path.line")).to_have_count(1)
    page.locator("#lab-start").click()
    expect(page.locator("#lab-result")).to_be_visible(timeout=TRAINED_MS)
    expect(lab_chart.locator('[data-series="run"] path.line')).to_have_attribute("d", GROWN)
    read_percent_chart(lab_chart, heldout, step)

    # The re-run: each row grows over its recorded cell, in the row's colour.
    open_panel(page, "rerun")
    rerun_chart = page.get_by_role("img", name=lesson.rerun.chart_label)
    read_percent_chart(rerun_chart, heldout, step)
    expect(rerun_chart.locator("g.recorded path.line")).to_have_count(4)
    page.locator("#rerun-start").click()
    expect(page.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)
    device = rerun_chart.locator("g.device path.line")
    for index in range(4):
        expect(device.nth(index)).to_have_attribute("d", GROWN)
    read_percent_chart(rerun_chart, heldout, step)
    no_horizontal_scroll(page, SMALL_PHONE["width"])
    assert axe_violations(page) == []
