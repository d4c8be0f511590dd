"""The lesson in German and in Arabic, in Chromium: the walk from the prediction to the gate in
the learner's language, a decimal comma typed and accepted in German, the epsilon switch
repainting numbers in the locale's writing, no sideways scroll on a phone, and no axe-core
violation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from normdive.lesson.content import Lesson
from normdive.lesson.translations import load_translation

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
GERMAN, _ = load_translation("de")
ARABIC, _ = load_translation("ar")
PHONE = {"width": 375, "height": 812}
SMALL_PHONE = {"width": 320, "height": 640}


def violations(page: Page) -> str:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return json.dumps([{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in found])


def field(page: Page, lesson: Lesson, field_id: str) -> Page:
    label = next(f.label for f in lesson.number_fields if f.id == field_id)
    return page.get_by_label(label, exact=True)  # type: ignore[return-value]


def sideways_scroll(page: Page) -> int:
    width: int = page.evaluate("document.scrollingElement.scrollWidth")
    return width - page.viewport_size["width"]  # type: ignore[index]


def test_the_lesson_in_german_from_the_prediction_to_the_gate(new_page: NewPage) -> None:
    lesson = GERMAN
    page = new_page(locale="de-DE", bypass_csp=True, viewport=PHONE)
    page.goto("/")
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.locator("h1")).to_have_text(lesson.title)

    page.get_by_role("radio", name=lesson.predict.choices[1].label).check()
    page.get_by_role("button", name=lesson.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text(lesson.predict.choices[1].label)

    # The switch repaints in the page's writing: a decimal comma, rows separated by "; ".
    switch = page.get_by_role("switch", name=lesson.hand.switch_label)
    denominator = page.locator("#hand .row-steps").first.locator("[data-ln=denominator]")
    switch.click()
    expect(denominator).to_have_text("0,816497")
    expect(page.locator("#edge-now [data-ln=normalised]")).to_have_text(
        "[keine Zahl; keine Zahl; keine Zahl; keine Zahl]"
    )
    switch.click()
    expect(denominator).to_have_text("0,816503")

    # A format error is told in German and costs nothing; a decimal comma is a number.
    field(page, lesson, "row1_mean").fill("zwei")
    page.get_by_role("button", name=lesson.numbers.check_label).click()
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text("keine Zahl")
    expect(page.locator("#field-row1_mean-attempts")).to_have_text("Versuche: 0")
    for field_id, value in [
        ("row1_mean", "2"),
        ("row1_variance", "0,6667"),
        ("row1_denominator", "0,8165"),
        ("row2_mean", "3,0"),
        ("row2_variance", "3"),
        ("row2_denominator", "1.732"),  # a point is read too
    ]:
        field(page, lesson, field_id).fill(value)
    page.get_by_role("button", name=lesson.numbers.check_label).click()
    expect(page.locator("#gate-numbers")).to_have_text("6 von 6 Zahlen getroffen.")
    expect(page.locator("#field-row1_variance-attempts")).to_have_text("Versuche: 1")

    right = next(choice for choice in lesson.reading.choices if choice.correct)
    page.get_by_role("radio", name=right.label).check()
    page.get_by_role("button", name=lesson.reading.lock_label).click()
    expect(page.locator("#gate-reading")).to_have_text("Die richtige Deutung ist festgelegt.")
    expect(page.locator("#gate-status .badge")).to_have_text("noch nicht")

    page.get_by_text(lesson.hand.table_summary).click()
    assert sideways_scroll(page) <= 0
    assert violations(page) == "[]"


def test_the_lesson_in_arabic_from_the_prediction_to_the_gate(new_page: NewPage) -> None:
    lesson = ARABIC
    page = new_page(locale="ar", bypass_csp=True, viewport=SMALL_PHONE)
    page.goto("/")
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("html")).to_have_attribute("lang", "ar")
    expect(page.locator("h1")).to_have_text(lesson.title)
    assert sideways_scroll(page) <= 0
    # The text runs right to left; a chart keeps its mathematical direction.
    assert page.evaluate("getComputedStyle(document.body).direction") == "rtl"

    page.get_by_role("radio", name=lesson.predict.choices[0].label).check()
    page.get_by_role("button", name=lesson.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text(lesson.predict.choices[0].label)

    field(page, lesson, "row1_mean").fill("1,5")  # a comma is no decimal point in Arabic
    page.get_by_role("button", name=lesson.numbers.check_label).click()
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text("1.5")
    expect(page.locator("#field-row1_mean-attempts")).to_have_text("المحاولات: 0")
    for field_id, value in [
        ("row1_mean", "2"),
        ("row1_variance", "2/3"),
        ("row1_denominator", "0.8165"),
        ("row2_mean", "3"),
        ("row2_variance", "3"),
        ("row2_denominator", "1.732"),
    ]:
        field(page, lesson, field_id).fill(value)
    page.get_by_role("button", name=lesson.numbers.check_label).click()
    expect(page.locator("#gate-numbers")).to_have_text("أصبت 6 من 6 أعداد.")

    right = next(choice for choice in lesson.reading.choices if choice.correct)
    page.get_by_role("radio", name=right.label).check()
    page.get_by_role("button", name=lesson.reading.lock_label).click()
    expect(page.locator("#gate-reading")).to_have_text("التفسير الصحيح مثبّت.")
    expect(page.locator("#gate-status .badge")).to_have_text("ليس بعد")

    page.get_by_text(lesson.hand.table_summary).click()
    assert sideways_scroll(page) <= 0
    assert violations(page) == "[]"


def test_the_switch_changes_the_language_without_javascript(new_page: NewPage) -> None:
    page = new_page(java_script_enabled=False)
    page.goto("/?eps=off")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    page.locator("nav.language-switch").get_by_role("link", name="Deutsch").click()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    assert page.url.endswith("/?eps=off")
    expect(page.locator("h1")).to_have_text(GERMAN.title)


@pytest.mark.parametrize(
    ("locale", "typed", "mean", "refused", "message"),
    [
        (
            "de-DE",
            "1,5; 2; 2,5",
            "2,000000",
            "1,5;;2",
            "Zwischen zwei Semikolons steht keine Zahl.",
        ),
        ("ar", "١٫٥، ٢، ٢٫٥", "2.000000", "1, banane", "«banane» ليس عددًا."),
    ],
)
def test_your_own_row_in_the_languages_writing(
    new_page: NewPage, locale: str, typed: str, mean: str, refused: str, message: str
) -> None:
    lesson = GERMAN if locale.startswith("de") else ARABIC
    page = new_page(locale=locale, viewport=PHONE)
    page.goto("/")
    page.get_by_role("radio", name=lesson.predict.choices[1].label).check()
    page.get_by_role("button", name=lesson.predict.commit_label).click()
    own = page.get_by_label(lesson.own_row.label)
    own.fill(typed)
    steps = page.locator("#own-row-steps")
    expect(steps.locator("[data-ln=mean]")).to_have_text(mean)
    # The row is named in the page's writing, as the server names it.
    expect(steps.locator("[data-ln=input]")).to_have_text(
        "[1,5; 2; 2,5]" if lesson is GERMAN else "[1.5, 2, 2.5]"
    )
    own.fill(refused)
    expect(page.locator("#own-row-message")).to_contain_text(message)
    expect(own).to_have_attribute("aria-invalid", "true")
