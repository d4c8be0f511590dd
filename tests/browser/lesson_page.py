"""The lesson page as a learner finds it in Chromium (shared by the browser tests): the number
fields by their label, the check button by its name, and the walk through the lesson from the
prediction to the takeaway, found again after a reload (work_through_the_lesson). It imports
no test module, so a test file anywhere under tests/ may import it (as browser.lesson_page)
and run on its own."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from lesson_answers import LESSON
from lesson_answers import RIGHT_READING_CHOICE as RIGHT_READING
from lesson_answers import WRONG_READING_CHOICE as WRONG_READING


def field(page: Page, field_id: str) -> Locator:
    """The number field, by its label."""
    label = next(f.label for f in LESSON.number_fields if f.id == field_id)
    return page.get_by_label(label, exact=True)


def attempts(page: Page, field_id: str) -> Locator:
    """The field's "Attempts: N" line."""
    return page.locator(f"#field-{field_id}-attempts")


def check_numbers(page: Page) -> None:
    """Press the check button."""
    page.get_by_role("button", name=LESSON.numbers.check_label).click()


PHONE = {"width": 375, "height": 812}
NAN4 = "[not a number, not a number, not a number, not a number]"
ZEROS4 = "[0.000000, 0.000000, 0.000000, 0.000000]"
TAKEAWAY = "Layer norm divides by sqrt(var + eps); without eps, [4, 4, 4, 4] breaks. <b>mine</b>"


def no_horizontal_scroll(page: Page) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways: {width}px"


def commit_prediction(page: Page) -> None:
    page.goto("/")
    expect(page.get_by_role("switch", name=LESSON.hand.switch_label)).to_be_disabled()
    expect(page.locator("#try-lock")).to_contain_text(LESSON.predict.locked_note)
    page.get_by_role("radio", name="Residual connections").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")
    expect(page.locator("#try-lock")).to_have_text("")
    expect(page.locator("#announcer")).to_contain_text(LESSON.predict.committed_text)


def flip_the_switch(page: Page) -> None:
    switch = page.get_by_role("switch", name=LESSON.hand.switch_label)
    edge = page.locator("#edge-now")
    first_denominator = page.locator("#hand .row-steps").first.locator("[data-ln=denominator]")
    expect(switch).to_be_checked()
    expect(edge).to_have_text(f"{LESSON.hand.edge_now_on} {ZEROS4}.")
    switch.click()
    expect(switch).not_to_be_checked()
    expect(edge).to_have_text(f"{LESSON.hand.edge_now_off} {NAN4}.")
    expect(first_denominator).to_have_text("0.816497")
    expect(page.locator(".badges [data-ln=eps]")).to_have_text("0")
    switch.press("Space")  # the keyboard works too
    expect(switch).to_be_checked()
    expect(edge).to_have_text(f"{LESSON.hand.edge_now_on} {ZEROS4}.")
    expect(first_denominator).to_have_text("0.816503")


def land_six_numbers(page: Page) -> None:
    # A format error: a message, no attempt used.
    field(page, "row1_mean").fill("two")
    check_numbers(page)
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text("not a number")
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 0")
    expect(page.locator("#numbers-check")).to_be_focused()

    # The mean lands after the format error; the variance is wrong first (n - 1).
    field(page, "row1_mean").fill("2")
    field(page, "row1_variance").fill("1")
    field(page, "row1_variance").press("Enter")
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(field(page, "row1_mean")).to_have_attribute("readonly", "")
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text(LESSON.numbers.landed_text)
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 1")
    expect(page.locator("#field-row1_variance-feedback")).to_contain_text("n - 1")
    expect(field(page, "row1_variance")).to_be_focused()

    for field_id, value in [
        ("row1_variance", "2/3"),
        ("row1_denominator", "0.8165"),
        ("row2_mean", "3"),
        ("row2_variance", "3"),
        ("row2_denominator", "1.732"),
    ]:
        field(page, field_id).fill(value)
    check_numbers(page)
    expect(page.locator("#gate-numbers")).to_have_text("6 of 6 numbers landed.")
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 2")
    for field_id in ("row1_denominator", "row2_mean", "row2_variance", "row2_denominator"):
        expect(attempts(page, field_id)).to_have_text("Attempts: 1")
    expect(page.locator("#numbers-check")).to_be_disabled()


def lock_the_reading(page: Page) -> None:
    lock = page.get_by_role("button", name=LESSON.reading.lock_label)
    page.get_by_role("radio", name=WRONG_READING.label).check()
    lock.click()
    expect(page.locator("#reading-feedback")).to_contain_text("[4, 4, 4, 4]")
    expect(page.locator("#gate-reading")).to_have_text("The right reading is not locked yet.")
    page.get_by_role("radio", name=RIGHT_READING.label).check()
    lock.click()
    expect(page.locator("#gate-reading")).to_have_text("The right reading is locked.")
    expect(page.get_by_role("radio", name=RIGHT_READING.label)).to_be_disabled()
    expect(page.get_by_role("button", name=LESSON.reading.lock_label)).to_have_count(0)


def save_the_takeaway(page: Page) -> None:
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    expect(box).to_have_value(LESSON.takeaway.default_line)
    expect(page.locator("#takeaway-status")).to_have_text("Not saved yet")
    box.fill(TAKEAWAY)
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text("Saved")


def find_it_all_after_a_reload(page: Page) -> None:
    page.reload()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")
    expect(page.get_by_role("switch", name=LESSON.hand.switch_label)).to_be_enabled()
    for number_field in LESSON.number_fields:
        expect(field(page, number_field.id)).to_have_attribute("readonly", "")
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 2")
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(page.locator("#gate-numbers")).to_have_text("6 of 6 numbers landed.")
    expect(page.get_by_role("radio", name=RIGHT_READING.label)).to_be_checked()
    expect(page.locator("#gate-reading")).to_have_text("The right reading is locked.")
    expect(page.get_by_label(LESSON.takeaway.label, exact=True)).to_have_value(TAKEAWAY)
    expect(page.locator("#takeaway-status")).to_have_text("Saved")
    expect(page.locator("#hints-run-count")).to_have_text(LESSON.hints.runs_sentence(4))


def work_through_the_lesson(page: Page, check_width: bool = False) -> None:
    commit_prediction(page)
    flip_the_switch(page)
    land_six_numbers(page)
    lock_the_reading(page)
    save_the_takeaway(page)
    if check_width:
        page.get_by_text(LESSON.hand.table_summary).click()
        no_horizontal_scroll(page)
    find_it_all_after_a_reload(page)
