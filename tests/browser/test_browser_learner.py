"""What new learners tripped on, each in Chromium and found by role and label: an unchanged
wrong answer is not charged again (with and without JavaScript), the run count says what adds
a run, the gate counts the numbers that landed, the gate's heading is named without its
status, one run is written in the singular, the badge says who worked the numbers out, the
switch stays under the finger as it flips and says what it did to the constant row, the answer
hint waits for the row predictions, a reading locked from the keyboard keeps the focus on the
page, and a check keeps its button under the finger."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from lesson_page import attempts, check_numbers, field
from playwright.sync_api import Locator, Page, expect

from lesson_answers import LESSON
from lesson_answers import RIGHT_READING_CHOICE as RIGHT_READING
from lesson_answers import WRONG_READING_CHOICE as WRONG_READING
from normdive.i18n.catalogues import activated, gettext
from normdive.i18n.locales import supported
from normdive.lesson.plurals import counted
from normdive.lesson.translations import localized
from normdive.progress.actions import NO_NUMBER_TYPED, NO_PREDICTION_CHOSEN

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
NOTHING_CHANGED = "Nothing has changed since your last check"
# Longer than page.js's DOUBLE_TAP_MS: a second press this long after an answer is the
# learner's own, not the second tap of a double tap.
DELIBERATE_PRESS_MS = 800


def commit(page: Page) -> None:
    page.goto("/")
    page.get_by_role("radio", name="Residual connections").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")


def run_count(page: Page):  # type: ignore[no-untyped-def]
    return page.locator("#hints-run-count")


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_an_unchanged_wrong_answer_is_not_charged_again(
    new_page: NewPage, javascript: bool
) -> None:
    page = new_page(java_script_enabled=javascript)
    commit(page)
    field(page, "row1_mean").fill("2.5")  # the mean of [1, 2, 3] is 2
    check_numbers(page)
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(run_count(page)).to_have_text("You have run it 1 time.")

    # The learner checks only the variance; "2.5" is still in the mean's field.
    expect(field(page, "row1_mean")).to_have_value("2.5")
    field(page, "row1_variance").fill("1")
    check_numbers(page)
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 1")
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(run_count(page)).to_have_text("You have run it 2 times.")

    # Nothing typed has changed: a clear message by the form, no attempt, no run. (A press of
    # its own, a moment later: the same press at once is a double tap, which sends nothing.)
    if javascript:
        page.wait_for_timeout(DELIBERATE_PRESS_MS)
    check_numbers(page)
    expect(page.get_by_role("alert")).to_contain_text(NOTHING_CHANGED)
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 1")
    expect(run_count(page)).to_have_text("You have run it 2 times.")

    # A changed answer is graded and costs its attempt.
    field(page, "row1_mean").fill("2")
    check_numbers(page)
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 2")
    expect(field(page, "row1_mean")).to_have_attribute("readonly", "")
    expect(run_count(page)).to_have_text("You have run it 3 times.")


def test_the_run_count_says_what_adds_a_run(new_page: NewPage) -> None:
    page = new_page()
    commit(page)
    hints = page.get_by_role("region", name=LESSON.hints.heading)
    expect(hints).to_contain_text("You have run it 0 times.")
    expect(hints.locator("#hints-runs")).to_have_text(
        f"You have run it 0 times. {' '.join(LESSON.hints.runs_meaning.split())}"
    )


def test_the_gate_counts_the_numbers_that_landed(new_page: NewPage) -> None:
    page = new_page()
    commit(page)
    # Three numbers checked, one of them landed.
    field(page, "row1_mean").fill("2")
    field(page, "row1_variance").fill("1")
    field(page, "row2_mean").fill("12")
    check_numbers(page)
    expect(attempts(page, "row2_mean")).to_have_text("Attempts: 1")
    gate = page.get_by_role("heading", name=LESSON.gate.heading, exact=True).locator("..")
    expect(gate.get_by_text(re.compile(r"numbers (checked|landed)"))).to_have_text(
        "1 of 6 numbers landed."
    )


def test_the_gate_heading_is_named_without_its_status(new_page: NewPage) -> None:
    page = new_page()
    page.goto("/")
    heading = page.get_by_role("heading", name=LESSON.gate.heading, exact=True)
    expect(heading).to_be_visible()
    expect(heading).to_have_accessible_name(LESSON.gate.heading)
    status = page.locator("#gate-status")
    expect(status).to_be_visible()
    expect(status.locator(".badge")).to_have_text("not yet")
    expect(status).to_have_text("Status: not yet")


def test_one_run_is_written_in_the_singular(new_page: NewPage) -> None:
    page = new_page()
    commit(page)
    page.get_by_role("radio", name=WRONG_READING.label).check()
    page.get_by_role("button", name=LESSON.reading.lock_label).click()
    expect(page.locator("#reading-feedback")).to_be_visible()
    expect(run_count(page)).to_have_text("You have run it 1 time.")
    page.reload()
    expect(run_count(page)).to_have_text("You have run it 1 time.")


def scroll_settled(page: Page) -> None:
    """Wait until the page stops scrolling (a smooth scroll takes a while)."""
    last = None
    for _ in range(40):
        now = page.evaluate("window.scrollY")
        if now == last:
            return
        last = now
        page.wait_for_timeout(150)


@pytest.mark.smooth_scrolling
@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_jump_to_a_section_lands_on_it(new_page: NewPage, javascript: bool) -> None:
    # A no-JavaScript answer is a redirect to the section's anchor; a link can name one too.
    # The section must be at the top of the screen, not somewhere below a guessed height.
    page = new_page(java_script_enabled=javascript, viewport={"width": 375, "height": 740})
    commit(page)
    for anchor in ("numbers-section", "reading-section", "player"):
        page.goto("about:blank")
        page.goto(f"/#{anchor}")
        page.wait_for_load_state("load")
        scroll_settled(page)
        top = page.evaluate(f"document.getElementById('{anchor}').getBoundingClientRect().top")
        assert -2 <= top <= 120, (anchor, top)


PHONE = {"width": 375, "height": 740}


def test_a_refused_check_speaks_beside_the_button_and_goes_once_an_answer_changes(
    new_page: NewPage,
) -> None:
    page = new_page(viewport=PHONE, has_touch=True)
    commit(page)
    check_numbers(page)  # every field blank
    alert = page.locator("#numbers").get_by_role("alert")
    expect(alert).to_have_text(" ".join(NO_NUMBER_TYPED.split()))
    # On a phone, the message is on the screen the learner tapped on.
    expect(alert).to_be_in_viewport()
    expect(page.get_by_role("button", name=LESSON.numbers.check_label)).to_be_in_viewport()
    field(page, "row1_mean").fill("2")
    expect(alert).to_have_count(0)
    # What a check found is beside the button too (the fields' own notes are far above it).
    field(page, "row1_variance").fill("abc")
    check_numbers(page)
    outcome = page.locator("#numbers-outcome")
    expect(outcome).to_contain_text(f"{LESSON.numbers.landed_text}")
    expect(outcome).to_contain_text("not a number")
    expect(outcome).to_be_in_viewport()
    field(page, "row1_variance").fill("2/3")
    expect(outcome).to_be_hidden()


def test_an_uncommitted_prediction_is_told_once_and_the_message_goes_with_a_choice(
    new_page: NewPage,
) -> None:
    page = new_page(viewport=PHONE, has_touch=True)
    page.goto("/")
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    predict = page.locator("#predict-body")
    expect(predict.get_by_role("alert")).to_have_text(NO_PREDICTION_CHOSEN)
    expect(predict.get_by_text(LESSON.predict.prompt)).to_have_count(0)
    page.get_by_role("radio", name="Residual connections").check()
    expect(predict.get_by_role("alert")).to_have_count(0)


def test_numbers_typed_and_not_checked_survive_a_reload(new_page: NewPage) -> None:
    page = new_page(viewport=PHONE, has_touch=True)
    commit(page)
    field(page, "row1_mean").fill("2.5")
    field(page, "row2_mean").fill("3")
    page.reload()
    expect(field(page, "row1_mean")).to_have_value("2.5")
    expect(field(page, "row2_mean")).to_have_value("3")
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 0")
    # Checked, they are the server's: a reload shows what it kept, and nothing of the draft.
    field(page, "row2_mean").fill("")
    check_numbers(page)
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(field(page, "row2_mean")).to_have_value("")
    page.reload()
    expect(field(page, "row1_mean")).to_have_value("2.5")
    expect(field(page, "row2_mean")).to_have_value("")
    # A draft typed back after a reload is not the answer the field's verdict was given for:
    # the verdict is set aside, as the server does for an answer it echoes unchecked.
    expect(page.locator("#field-row1_mean-feedback")).to_be_visible()
    expect(field(page, "row1_mean")).to_have_attribute("aria-invalid", "true")
    # Typing sets the verdict aside at once, and typing back the answer it was given for
    # brings it back.
    field(page, "row1_mean").fill("2.4")
    expect(page.locator("#field-row1_mean-feedback")).to_be_hidden()
    expect(field(page, "row1_mean")).not_to_have_attribute("aria-invalid", "true")
    field(page, "row1_mean").fill(" 2.5")
    expect(page.locator("#field-row1_mean-feedback")).to_be_visible()
    expect(field(page, "row1_mean")).to_have_attribute("aria-invalid", "true")
    field(page, "row1_mean").fill("2.4")
    page.reload()
    expect(field(page, "row1_mean")).to_have_value("2.4")
    expect(page.locator("#field-row1_mean-feedback")).to_be_hidden()
    expect(field(page, "row1_mean")).not_to_have_attribute("aria-invalid", "true")
    # Another tab of the same learner starts from the server's fields.
    other = page.context.new_page()
    other.goto("/")
    expect(field(other, "row2_mean")).to_have_value("")


@pytest.mark.parametrize(
    ("javascript", "worked_out"),
    [(True, LESSON.hand.computed_here), (False, LESSON.hand.computed_by_server)],
    ids=["js", "no-js"],
)
def test_the_badge_says_who_worked_the_numbers_out(
    new_page: NewPage, javascript: bool, worked_out: str
) -> None:
    page = new_page(java_script_enabled=javascript)
    commit(page)
    panel = page.locator("#hand .panel")
    expect(panel.locator(".badges .badge").first).to_have_text(worked_out)
    expect(panel.locator(".caption")).to_have_text(
        LESSON.hand.summary_caption.format(where=worked_out)
    )


def test_the_switch_stays_under_the_finger_as_it_flips(new_page: NewPage) -> None:
    page = new_page(viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True)
    commit(page)
    switch = page.get_by_role("switch", name=re.compile("Epsilon under the square root"))
    expect(switch).to_be_checked()
    switch.scroll_into_view_if_needed()
    before = switch.bounding_box()
    switch.tap()
    expect(switch).not_to_be_checked()
    expect(page.locator("#hand .badges [data-ln=eps]")).to_have_text("0")
    after = switch.bounding_box()
    assert before is not None and after is not None
    assert after["y"] == before["y"]


@pytest.mark.parametrize("locale", ["en", "de-DE"])
def test_a_typed_over_answer_is_described_as_not_checked_yet(
    new_page: NewPage, locale: str
) -> None:
    # The slip's feedback describes "6", the answer it judged; a screen reader reading the
    # field with another value in it hears that it is not checked yet instead.
    lesson = localized(LESSON, supported(locale))
    page = new_page(locale=locale)
    page.goto("/")
    page.get_by_role("radio", name=lesson.predict.choices[1].label).check()
    page.get_by_role("button", name=lesson.predict.commit_label).click()
    label = next(f.label for f in lesson.number_fields if f.id == "row1_mean")
    mean = page.get_by_label(label, exact=True)
    slip = lesson.slip_feedback["mean_not_divided"]
    mean.fill("6")
    page.get_by_role("button", name=lesson.numbers.check_label).click()
    expect(mean).to_have_accessible_description(re.compile(re.escape(slip)))
    with activated(supported(locale) or "en"):
        not_yet = gettext("Not checked yet.")
    mean.fill("7")
    expect(mean).not_to_have_accessible_description(re.compile(re.escape(slip)))
    expect(mean).to_have_accessible_description(re.compile(re.escape(not_yet)))
    expect(mean).not_to_have_attribute("aria-invalid", "true")
    mean.fill("6")  # the answer judged, typed again: its verdict is back
    expect(mean).to_have_accessible_description(re.compile(re.escape(slip)))
    expect(mean).not_to_have_accessible_description(re.compile(re.escape(not_yet)))


def test_the_answer_hint_waits_for_the_row_predictions(new_page: NewPage) -> None:
    page = new_page()
    commit(page)
    for run in range(1, 6):  # five runs without a single row predicted
        field(page, "row1_mean").fill(str(6 + run))
        check_numbers(page)
        expect(attempts(page, "row1_mean")).to_have_text(f"Attempts: {run}")
    expect(run_count(page)).to_have_text("You have run it 5 times.")
    page.get_by_role("button", name=re.compile("Open this hint.*A question")).click()
    answer = page.get_by_role("button", name=re.compile("Open this hint.*The answer"))
    expect(answer).to_be_disabled()
    expect(page.locator("#hint-2-status")).to_have_text(
        counted(LESSON.hints.answer_needs_predictions, 4, rows=4)
    )
    expect(answer).to_have_accessible_description(
        counted(LESSON.hints.answer_needs_predictions, 4, rows=4)
    )


def test_the_switch_says_what_it_did_to_the_constant_row(new_page: NewPage) -> None:
    # The sentence under the constant row changes as the switch flips; a screen reader hears it.
    page = new_page(viewport=PHONE, has_touch=True)
    commit(page)
    switch = page.get_by_role("switch", name=re.compile("Epsilon under the square root"))
    switch.tap()
    announcer = page.locator("#announcer")
    expect(announcer).to_contain_text(LESSON.hand.edge_now_off)
    expect(announcer).to_contain_text("not a number")
    switch.tap()
    expect(announcer).to_contain_text(LESSON.hand.edge_now_on)
    expect(announcer).not_to_contain_text("not a number")


def test_locking_the_right_reading_from_the_keyboard_keeps_the_focus(new_page: NewPage) -> None:
    # Enter on a radio locks the reading; the radios are then disabled, and focus goes to the
    # reading's region drawn again, not to the page's body.
    page = new_page()
    commit(page)
    page.get_by_role("radio", name=RIGHT_READING.label).focus()
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    expect(page.locator("#reading-feedback")).to_contain_text("Right.")
    expect(page.locator("#reading")).to_be_focused()


def test_a_check_keeps_its_button_under_the_finger(new_page: NewPage) -> None:
    # Feedback appears under the fields above the button; the page must not jump with it.
    page = new_page(viewport=PHONE, has_touch=True)
    commit(page)
    field(page, "row1_mean").fill("1.5")
    field(page, "row1_variance").fill("2/3")
    field(page, "row2_mean").fill("7")
    button = page.get_by_role("button", name=LESSON.numbers.check_label)
    button.scroll_into_view_if_needed()
    page.evaluate(
        "window.scrollBy({top: document.getElementById('numbers-check')"
        ".getBoundingClientRect().top - 350, behavior: 'instant'})"
    )
    before = button.bounding_box()
    button.tap()
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(button).to_be_focused()
    after = button.bounding_box()
    assert before is not None and after is not None
    assert abs(after["y"] - before["y"]) <= 2, (before, after)
    expect(button).to_be_in_viewport()


def test_an_entry_that_is_not_a_number_is_told_apart_from_a_wrong_answer(
    new_page: NewPage,
) -> None:
    page = new_page()
    commit(page)
    field(page, "row1_mean").fill("2.5")  # a number, and wrong
    field(page, "row1_variance").fill("two")  # not a number: not checked
    check_numbers(page)
    wrong = page.locator("#field-row1_mean-feedback")
    unread = page.locator("#field-row1_variance-feedback")
    # In words: the entry was not checked and cost nothing; the wrong answer says no such thing.
    expect(unread).to_contain_text(f"{LESSON.numbers.not_checked_text} That is not a number")
    expect(wrong).not_to_contain_text(LESSON.numbers.not_checked_text)
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 0")
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(page.locator("#announcer")).to_contain_text(
        f"Variance of [1, 2, 3]: {LESSON.numbers.not_checked_text} That is not a number"
    )

    # In style: neither the note nor the field wears the wrong answer's red.
    def style(element: Locator, name: str) -> str:
        return str(element.evaluate(f"e => getComputedStyle(e).{name}"))

    assert style(unread, "color") != style(wrong, "color")
    assert style(unread, "backgroundColor") != style(wrong, "backgroundColor")
    mean, variance = field(page, "row1_mean"), field(page, "row1_variance")
    assert style(variance, "borderTopColor") != style(mean, "borderTopColor")
    assert style(variance, "borderTopStyle") == "dashed"


def test_before_the_prediction_every_locked_control_looks_locked_and_says_why(
    new_page: NewPage,
) -> None:
    page = new_page()
    page.goto("/")
    why = LESSON.predict.locked_note
    locked = [
        page.get_by_role("switch", name=LESSON.hand.switch_label),
        page.get_by_label(LESSON.own_row.label),
        *(field(page, number_field.id) for number_field in LESSON.number_fields),
        page.get_by_role("button", name=LESSON.numbers.check_label),
        *(page.get_by_role("radio", name=choice.label) for choice in LESSON.reading.choices),
        page.get_by_role("button", name=LESSON.reading.lock_label),
    ]
    for control in locked:
        expect(control).to_be_disabled()
        expect(control).to_have_accessible_description(re.compile(re.escape(why)))
    # Hatched and dashed, unlike the live controls they become.
    check = page.get_by_role("button", name=LESSON.numbers.check_label)
    mean = field(page, "row1_mean")
    for control in (check, mean):
        assert control.evaluate("e => getComputedStyle(e).borderTopStyle") == "dashed"
        assert "gradient" in control.evaluate("e => getComputedStyle(e).backgroundImage")
    commit(page)
    for control in locked[:3]:
        expect(control).to_be_enabled()
        expect(control).not_to_have_accessible_description(re.compile(re.escape(why)))
    assert mean.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
