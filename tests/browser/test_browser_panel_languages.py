"""The depth sweep's panel and the lab's panel in German and in Arabic, in Chromium, on a
server whose recording has a sample sweep and a lab grid beside it: each opens on the lesson
page and as a page of its own with its headings, sentences and table headings in the
learner's language, without sideways scroll at 320 px, and with no axe-core violation."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from lab_page import post_the_work
from playwright.sync_api import Page, expect

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from live_server import LiveServer
from normdive.lesson.translations import load_translation
from normdive.recording.sweep import sweep_path_for
from normdive.web.app import create_app
from sample_lab import write_lab_grid
from sample_sweeps import sample_sweep

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
AXE = "node_modules/axe-core/axe.min.js"
SMALL_PHONE = {"width": 320, "height": 640}
# Per language: the locale the browser asks for, the sweep's first sentence (the sample sweep
# flips between depths 4 and 8 under GPT-2 initialisation), the sweep table's first heading,
# the seeds under depth 2, and the lab grid's first depth heading.
LANGUAGES = {
    "de": (
        "de-DE",
        "Mit GPT-2-Initialisierung bringt es bei Tiefen 2 und 4 mehr, Layer-Norm allein "
        "zurückzugeben.",
        "Tiefe",
        "Seeds 0, 1 und 2",
        "Tiefe 1",
    ),
    "ar": (
        "ar",
        "مع تهيئة GPT-2، إعادة تسوية الطبقة وحدها تستعيد أكثر عند العمقين 2 و4.",
        "العمق",
        "البذور 0، 1 و2",
        "العمق 1",
    ),
}


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording with a sample sweep and a lab grid."""
    folder = tmp_path_factory.mktemp("panels-live")
    recording = write_recording(folder, ablation_recording())
    sweep_path_for(recording).write_text(sample_sweep().model_dump_json(), encoding="utf-8")
    write_lab_grid(recording)
    server = LiveServer(
        create_app(build_settings(migrated_sqlite_url(folder), folder, recording_path=recording))
    )
    server.start()
    yield server
    server.stop()


def sideways_scroll(page: Page) -> int:
    # Measured once the stylesheets are in: unstyled tables are wider than the phone.
    page.wait_for_load_state("load")
    width: int = page.evaluate("document.scrollingElement.scrollWidth")
    return width - SMALL_PHONE["width"]


def violations(page: Page) -> str:
    page.add_script_tag(path=AXE)
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return json.dumps([{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in found])


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_the_depths_and_lab_panels_in_the_learners_language(
    new_page: NewPage, language: str
) -> None:
    locale, sentence, depth_heading, seeds, lab_depth = LANGUAGES[language]
    lesson, missing = load_translation(language)
    assert not [key for key in missing if key.startswith(("sweep", "lab"))]
    page = new_page(locale=locale, bypass_csp=True, viewport=SMALL_PHONE, reduced_motion="reduce")
    post_the_work(page)
    expect(page.locator("html")).to_have_attribute("lang", language)

    # The depth sweep's panel on the lesson page.
    expect(page.get_by_role("heading", name=lesson.sweep.heading)).to_be_visible()
    page.get_by_text(lesson.sweep.open_label, exact=True).first.click()
    expect(page.locator("#sweep-sentences li").first).to_have_text(sentence)
    grid = page.locator("#sweep-grid-gpt2")
    expect(grid.locator("thead th").first).to_have_text(depth_heading)
    expect(grid.locator("tbody .depth-seeds").first).to_have_text(seeds)

    # The lab's panel on the lesson page: its form, in the language.
    expect(page.get_by_role("heading", name=lesson.lab.heading)).to_be_visible()
    page.get_by_text(lesson.lab.open_label, exact=True).click()
    form = page.locator("#lab-commit")
    expect(form).to_be_visible()
    expect(form.locator("legend").first).to_have_text(lesson.lab.pick_legend)
    expect(page.get_by_label(lesson.lab.depth_label)).to_be_visible()
    # An eps is offered in the language's writing, posted with a point.
    eps = page.get_by_label(lesson.lab.eps_label)
    expect(eps.locator("option:checked")).to_have_text("0,00001" if language == "de" else "0.00001")
    expect(eps).to_have_value("0.00001")
    assert sideways_scroll(page) <= 0
    assert violations(page) == "[]"

    # Each as a page of its own.
    page.goto("/depths?cell=8-gpt2-both#sweep-player")
    expect(page.locator("#sweep-title")).to_have_text(lesson.sweep.heading)
    expect(page.locator("h1")).to_have_text(lesson.title)
    expect(page.locator("#sweep-player-title")).to_contain_text(lesson.sweep.init_labels["gpt2"])
    assert sideways_scroll(page) <= 0
    assert violations(page) == "[]"

    page.goto("/lab")
    expect(page.locator("#lab-title")).to_have_text(lesson.lab.heading)
    expect(page.locator("#lab-grid-gpt2 thead th").nth(1)).to_have_text(lab_depth)
    assert sideways_scroll(page) <= 0
    assert violations(page) == "[]"
