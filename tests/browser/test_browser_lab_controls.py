"""The lab's Stop and Resume, and its pause while the tab is hidden, in Chromium: a run long
enough to be stopped (a tiny stack trained for many steps) stops where it is, goes on when
resumed, pauses when the page says it is hidden and goes on when it is shown, and ends in a
kept result."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from lab_page import close_the_gate
from playwright.sync_api import Page, expect

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from lesson_answers import LESSON
from live_server import LiveServer
from normdive.web.app import create_app
from sample_lab import TINY_BASE, sample_lab_grid, write_lab_grid

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
TEXT = LESSON.lab
# Long enough that Stop lands mid-run on any machine; still seconds on a loaded one.
LONG_BASE = TINY_BASE.model_copy(update={"steps": 20_000, "eval_every": 2500})
TRAINED_MS = 180_000

# The page told the tab is hidden or shown, as a browser does when the learner switches tabs.
VISIBILITY = """(hidden) => {
  Object.defineProperty(document, "hidden", { value: hidden, configurable: true });
  Object.defineProperty(document, "visibilityState", {
    value: hidden ? "hidden" : "visible", configurable: true });
  document.dispatchEvent(new Event("visibilitychange"));
}"""


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("lab-controls")
    recording = write_recording(folder, ablation_recording())
    write_lab_grid(recording, sample_lab_grid(LONG_BASE))
    server = LiveServer(
        create_app(build_settings(migrated_sqlite_url(folder), folder, recording_path=recording))
    )
    server.start()
    yield server
    server.stop()


def progress(page: Page) -> float:
    return float(page.get_by_role("progressbar", name=TEXT.progress_label).evaluate("p => p.value"))


def test_stop_resume_and_a_hidden_tab_pause_the_run_and_it_still_finishes(
    new_page: NewPage,
) -> None:
    page = new_page()
    close_the_gate(page)
    page.get_by_text(TEXT.open_label, exact=True).click()
    page.get_by_label(TEXT.depth_label).select_option("1")
    page.get_by_label(TEXT.rows_label).select_option("neither")
    page.get_by_label("Stays at chance").check()
    page.get_by_role("button", name=TEXT.commit_label).click()
    page.get_by_role("button", name=TEXT.train_label, exact=True).click()
    stop = page.get_by_role("button", name=TEXT.stop_label)
    resume = page.get_by_role("button", name=TEXT.resume_label)
    page.wait_for_function(
        "() => document.getElementById('lab-progress').value > 0", timeout=TRAINED_MS
    )
    stop.click()
    expect(resume).to_be_enabled()
    expect(page.locator("#lab-progress-text")).to_contain_text("Stopped at step")
    page.wait_for_timeout(500)  # a report already on its way lands
    stopped_at = progress(page)
    page.wait_for_timeout(1000)  # a running worker reports ten times a second
    assert progress(page) == stopped_at
    assert stopped_at < 100
    resume.click()
    expect(stop).to_be_enabled()
    page.wait_for_function(
        f"() => document.getElementById('lab-progress').value > {stopped_at}",
        timeout=TRAINED_MS,
    )

    page.evaluate(VISIBILITY, True)
    expect(page.locator("#lab-progress-text")).to_have_text(TEXT.hidden_text)
    page.wait_for_timeout(500)
    hidden_at = progress(page)
    page.wait_for_timeout(1000)
    assert progress(page) == hidden_at
    page.evaluate(VISIBILITY, False)
    expect(page.locator("#lab-result")).to_be_visible(timeout=TRAINED_MS)
    expect(page.locator("#lab-result")).to_contain_text("You predicted it would stay at chance")
