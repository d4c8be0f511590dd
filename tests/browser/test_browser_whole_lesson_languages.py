"""The whole lesson in German and in Arabic, in Chromium, as a learner walks it on a phone: the
prediction, the switch, a row of their own, the six numbers (a format error and a slip on the
way), the reading (a wrong one first), both hints, the four rows predicted and played, the
takeaway, the gate, then the three panels that open after it (the runs at other depths, a lab
run trained, the re-run of the ablation trained) and the lab's page without JavaScript. After
each step, no text on the page (names and descriptions included) and nothing a live region
said is English, names aside (file names, versions, "GPT-2", "PyTorch")."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from hearing import english_texts, heard, listen, page_texts
from playwright.sync_api import Page, expect

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from live_server import LiveServer
from normdive.lesson.content import Lesson
from normdive.lesson.translations import load_translation
from normdive.recording.format import ROW_KEYS
from normdive.recording.sweep import sweep_path_for
from normdive.web.app import create_app
from sample_lab import sample_lab_grid, write_lab_grid
from sample_sweeps import sample_sweep

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
SMALL_PHONE = {"width": 320, "height": 640}
# Per language: the locale the browser asks for, a word that is not a number, the six numbers
# as that language writes them, and a row of the learner's own.
LANGUAGES = {
    "de": ("de-DE", "zwei", ("2", "0,6667", "0,8165", "3", "3", "1,732"), "-1; 0; 2,5"),
    "ar": ("ar", "اثنان", ("2", "2/3", "0.8165", "3", "3", "1.732"), "-1، 0، 2.5"),
}
PREDICTIONS = {"both": "learns", "residual_only": "partial"}
PREDICTIONS |= {"layernorm_only": "chance", "neither": "chance"}
# A tiny run, four tiny rows: seconds, but a loaded machine gets room.
TRAINED_MS = 180_000


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the sample recording, its sweep and a lab grid with the
    re-run's cells beside it."""
    folder = tmp_path_factory.mktemp("languages-live")
    recording = write_recording(folder, ablation_recording())
    sweep_path_for(recording).write_text(sample_sweep().model_dump_json(), encoding="utf-8")
    write_lab_grid(recording, sample_lab_grid(with_rerun=True))
    server = LiveServer(
        create_app(build_settings(migrated_sqlite_url(folder), folder, recording_path=recording))
    )
    server.start()
    yield server
    server.stop()


class Walk:
    """One learner's page, and everything English found on it so far, by step."""

    def __init__(self, page: Page, locale: str) -> None:
        self.page = page
        self.locale = locale
        self.found: dict[str, list[str]] = {}

    def look(self, step: str) -> None:
        """What the page shows and its live regions said, after `step`."""
        english = english_texts(page_texts(self.page) + heard(self.page), self.locale)
        seen = {text for texts in self.found.values() for text in texts}
        new = [text for text in english if text not in seen]
        if new:
            self.found[step] = new


def check(page: Page, lesson: Lesson) -> None:
    page.get_by_role("button", name=lesson.numbers.check_label).click()


def walk_the_lesson(page: Page, lesson: Lesson, language: str, walk: Walk) -> None:
    _, not_a_number, numbers, own_row = LANGUAGES[language]
    page.goto("/")
    walk.look("the page")

    choice = lesson.predict.choices[1].label
    page.get_by_role("radio", name=choice).check()
    page.get_by_role("button", name=lesson.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text(choice)
    walk.look("the prediction")

    switch = page.get_by_role("switch", name=lesson.hand.switch_label)
    switch.click()
    expect(switch).not_to_be_checked()
    walk.look("the switch off")
    switch.click()
    page.get_by_label(lesson.own_row.label).fill(own_row)
    expect(page.locator("#own-row-steps [data-ln=mean]")).not_to_be_empty()
    walk.look("a row of one's own")

    fields = [page.get_by_label(f.label, exact=True) for f in lesson.number_fields]
    fields[0].fill(not_a_number)
    check(page, lesson)
    expect(page.locator("#field-row1_mean-feedback")).not_to_be_empty()
    walk.look("a format error")
    fields[0].fill("6")  # the sum, not divided: a slip the lesson names
    check(page, lesson)
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text(
        lesson.slip_feedback["mean_not_divided"]
    )
    walk.look("a slip")
    for box, value in zip(fields, numbers, strict=True):
        box.fill(value)
    check(page, lesson)
    expect(page.locator("#numbers-check")).to_be_disabled()
    walk.look("six numbers landed")

    wrong = next(choice for choice in lesson.reading.choices if not choice.correct)
    right = next(choice for choice in lesson.reading.choices if choice.correct)
    lock = page.get_by_role("button", name=lesson.reading.lock_label, exact=True)
    page.get_by_role("radio", name=wrong.label).check()
    lock.click()
    expect(page.locator("#reading-feedback")).not_to_be_empty()
    walk.look("a wrong reading")
    page.locator("#hint-1-open").click()
    expect(page.locator("#hint-1-text")).to_be_visible()
    walk.look("the first hint")
    page.get_by_role("radio", name=right.label).check()
    lock.click()
    expect(page.get_by_role("radio", name=right.label)).to_be_disabled()
    walk.look("the right reading")

    for key, outcome in PREDICTIONS.items():
        page.locator(f"#row-{key}-{outcome}").check()
        page.locator(f"#row-{key}-commit").click()
        expect(page.locator(f"#row-{key}-prediction")).not_to_be_empty()
    walk.look("the rows predicted")
    page.emulate_media(reduced_motion="reduce")
    for key in ROW_KEYS:
        page.locator(f"#row-{key}-play").click()
        expect(page.locator(f"#row-{key}-result")).to_be_visible()
        walk.look(f"the row {key} played")
    page.locator("#hint-2-open").click()
    expect(page.locator("#hint-2-text")).to_be_visible()
    walk.look("the second hint")

    box = page.get_by_label(lesson.takeaway.label, exact=True)
    box.fill(box.input_value() + " ✓")
    page.get_by_role("button", name=lesson.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text(lesson.takeaway.saved_text)
    walk.look("the takeaway saved")


def open_the_panels(page: Page, lesson: Lesson, walk: Walk) -> None:
    page.get_by_text(lesson.sweep.open_label, exact=True).click()
    expect(page.locator("#sweep-body table").first).to_be_visible()
    walk.look("the runs at other depths")

    page.get_by_text(lesson.lab.open_label, exact=True).click()
    expect(page.locator("#lab-commit")).to_be_visible()
    walk.look("the lab opened")
    page.get_by_label(lesson.lab.depth_label).select_option("1")
    page.get_by_label(lesson.lab.rows_label).select_option("both")
    page.get_by_label(lesson.lab.eps_label).select_option("0.00001")
    page.locator("#lab-commit input[name=outcome][value=learns]").check()
    page.get_by_role("button", name=lesson.lab.commit_label).click()
    train = page.get_by_role("button", name=lesson.lab.train_label, exact=True)
    expect(train).to_be_enabled()
    walk.look("a lab run committed")
    train.click()
    expect(page.locator("#lab-result")).to_be_visible(timeout=TRAINED_MS)
    walk.look("a lab run trained")

    page.get_by_text(lesson.rerun.open_label, exact=True).click()
    expect(page.locator("#rerun-train")).to_be_visible()
    walk.look("the re-run opened")
    page.get_by_role("button", name=lesson.rerun.start_label).click()
    expect(page.locator("#rerun-verdict")).to_be_visible(timeout=TRAINED_MS)
    walk.look("the re-run trained")


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_the_whole_lesson_speaks_the_learners_language_only(
    new_page: NewPage, language: str
) -> None:
    lesson, _ = load_translation(language)
    page = new_page(locale=LANGUAGES[language][0], viewport=SMALL_PHONE)
    listen(page)
    walk = Walk(page, language)
    walk_the_lesson(page, lesson, language, walk)
    expect(page.locator("#gate-verdict")).to_contain_text(lesson.gate.met)
    open_the_panels(page, lesson, walk)

    bare = new_page(locale=LANGUAGES[language][0], java_script_enabled=False)
    bare.context.add_cookies(page.context.cookies())
    bare.goto("/lab")
    expect(bare.locator("table").first).to_be_visible()
    lab_page = Walk(bare, language)
    lab_page.look("the lab's page without JavaScript")
    walk.found |= lab_page.found
    # The live regions were heard: each play said so, in the page's language.
    said = heard(page)
    for row in lesson.rows:
        playing = lesson.ablation.playing_text.format(row=row.label)
        assert any(text.startswith(playing) for text in said), (playing, said)
    assert walk.found == {}, json.dumps(walk.found, ensure_ascii=False, indent=1)
