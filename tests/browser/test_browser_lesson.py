"""A learner in Chromium, finding everything by role and label: commit, flip the switch,
land six numbers, lock a reading, save a takeaway, reload and find it all; at 375 px too;
an axe-core audit; and the page without JavaScript."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from lesson_page import (
    NAN4,
    PHONE,
    ZEROS4,
    attempts,
    check_numbers,
    commit_prediction,
    field,
    no_horizontal_scroll,
    work_through_the_lesson,
)
from playwright.sync_api import Page, expect

from lesson_answers import LESSON
from lesson_answers import WRONG_READING_CHOICE as WRONG_READING
from normdive.progress.actions import NO_PREDICTION_CHOSEN

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"


def test_a_learner_works_through_the_lesson(new_page: NewPage) -> None:
    work_through_the_lesson(new_page())


def test_the_same_at_375_px_wide(new_page: NewPage) -> None:
    page = new_page(viewport=PHONE, has_touch=True)
    page.goto("/")
    no_horizontal_scroll(page)
    work_through_the_lesson(page, check_width=True)
    no_horizontal_scroll(page)
    # A long row of your own wraps rather than widening the page.
    page.get_by_label(LESSON.own_row.label).fill(", ".join(["-123456.789"] * 16))
    expect(page.locator("#own-row-steps [data-ln=mean]")).to_have_text("-123456.789000")
    no_horizontal_scroll(page)
    # Touch targets: every visible button and choice is at least 44 px tall.
    for target in page.locator("button:visible, .choice, .switch").all():
        box = target.bounding_box()
        assert box is not None and box["height"] >= 44, target


def test_your_own_row_computes_as_you_type(new_page: NewPage) -> None:
    page = new_page()
    commit_prediction(page)
    own = page.get_by_label(LESSON.own_row.label)
    own.fill("3, 1, 4, 1, 5")
    steps = page.locator("#own-row-steps")
    expect(steps.locator("[data-ln=input]")).to_have_text("[3, 1, 4, 1, 5]")
    expect(steps.locator("[data-ln=mean]")).to_have_text("2.800000")
    expect(steps.locator("[data-ln=variance]")).to_have_text("2.560000")
    # A fraction reads as an answer reads it.
    own.fill("1/3, 2 / 3, 1")
    expect(steps.locator("[data-ln=input]")).to_have_text("[1/3, 2/3, 1]")
    expect(steps.locator("[data-ln=mean]")).to_have_text("0.666667")
    own.fill("7, 7")
    page.get_by_role("switch", name=LESSON.hand.switch_label).click()
    expect(steps.locator("[data-ln=normalised]")).to_have_text("[not a number, not a number]")
    own.fill("1, 2, banana")
    expect(page.locator("#own-row-message")).to_contain_text("“banana” is not a number.")
    expect(own).to_have_attribute("aria-invalid", "true")
    expect(steps.locator(".row-steps")).to_have_count(0)
    own.fill("")
    expect(page.locator("#own-row-message")).to_have_text("")
    # Typed key by key, a half-typed entry ("1e" on the way to "1e5") says nothing: the
    # problem would only flash, and be read out, at every key.
    seen: list[str] = []
    page.expose_function("sawMessage", lambda text: seen.append(text))
    page.evaluate(
        """() => new MutationObserver(() => window.sawMessage(
             document.getElementById("own-row-message").textContent))
           .observe(document.getElementById("own-row-message"),
                    {childList: true, characterData: true, subtree: true})"""
    )
    own.press_sequentially("2, 1e5", delay=40)
    expect(steps.locator("[data-ln=input]")).to_have_text("[2, 100000]")
    page.wait_for_timeout(700)
    assert [text for text in seen if text] == []
    expect(page.locator("#own-row-message")).to_have_text("")


def test_your_own_row_is_heard_once_typing_pauses(new_page: NewPage) -> None:
    page = new_page()
    commit_prediction(page)
    page.get_by_label(LESSON.own_row.label).press_sequentially("3, 1, 4", delay=40)
    announcer = page.locator("#announcer")
    # The steps as shown, in order, read as sentences by the page's live region.
    expect(announcer).to_contain_text("Row [3, 1, 4].")
    expect(announcer).to_contain_text(f"{LESSON.hand.mean_step}: 2.666667.")
    expect(announcer).to_contain_text(f"{LESSON.hand.out_label}: [")
    # A problem is said where it was (beside the field), not as a result.
    page.get_by_label(LESSON.own_row.label).fill("1, 2, banana")
    expect(page.locator("#own-row-message")).to_contain_text("“banana” is not a number.")
    expect(announcer).to_contain_text("Row [3, 1, 4].")


def not_a_number_row(length: int) -> str:
    return "[" + ", ".join(["not a number"] * length) + "]"


def test_your_own_row_of_equal_decimals_is_not_a_number_without_eps(new_page: NewPage) -> None:
    # The mean of three 0.1s is not 0.1 in binary: float steps showed [-1, -1, -1] here.
    page = new_page()
    commit_prediction(page)
    page.get_by_role("switch", name=LESSON.hand.switch_label).click()
    own = page.get_by_label(LESSON.own_row.label)
    steps = page.locator("#own-row-steps")
    for text, length in (("0.1 0.1 0.1", 3), (" ".join(["0.1"] * 7), 7), ("-2.5 " * 4, 4)):
        own.fill(text)
        expect(steps.locator("[data-ln=variance]")).to_have_text("0.000000")
        expect(steps.locator("[data-ln=normalised]")).to_have_text(not_a_number_row(length))
    note = steps.get_by_text(LESSON.own_row.variance_hidden)
    expect(note).to_be_hidden()
    # Full-width digits read as digits.
    own.fill("３ １")
    expect(steps.locator("[data-ln=input]")).to_have_text("[3, 1]")
    expect(steps.locator("[data-ln=normalised]")).to_have_text("[1.000000, -1.000000]")
    # A variance above 0 that six decimals show as 0.000000 is said to be one.
    own.fill("1e-7 2e-7")
    expect(steps.locator("[data-ln=normalised]")).to_have_text("[-1.000000, 1.000000]")
    expect(note).to_be_visible()


def test_without_javascript_your_own_row_of_equal_decimals_is_not_a_number(
    new_page: NewPage,
) -> None:
    page = new_page(java_script_enabled=False)
    page.goto("/")
    page.get_by_role("radio", name="Layer norm").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page).to_have_url(re.compile(r"/#try$"))
    page.goto("/?eps=off&row=0.1+0.1+0.1")
    steps = page.locator("#own-row-steps")
    expect(steps.locator("[data-ln=variance]")).to_have_text("0.000000")
    expect(steps.locator("[data-ln=normalised]")).to_have_text(not_a_number_row(3))
    expect(steps.get_by_text(LESSON.own_row.variance_hidden)).to_be_hidden()


def test_the_takeaway_saves_itself_and_warns_before_leaving_unsaved(new_page: NewPage) -> None:
    page = new_page()
    page.goto("/")
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    box.fill("Saved without pressing the button.")
    expect(page.locator("#takeaway-status")).to_have_text("Saved", timeout=15_000)
    page.reload()
    expect(box).to_have_value("Saved without pressing the button.")

    # Over the limit: a clear message, nothing saved, and leaving asks first.
    box.fill("x" * (LESSON.takeaway.max_chars + 5))
    expect(page.locator("#takeaway-status")).to_contain_text("Too long to save")
    expect(page.locator("#takeaway-count")).to_have_text(
        f"{LESSON.takeaway.max_chars + 5} of {LESSON.takeaway.max_chars} characters"
    )
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_contain_text("the limit is 2,000")
    with page.expect_event("dialog") as asked:
        page.close(run_before_unload=True)
    assert asked.value.type == "beforeunload"
    asked.value.accept()  # leave anyway
    page.wait_for_event("close")


def test_a_takeaway_reloaded_before_it_saved_comes_back_and_saves(new_page: NewPage) -> None:
    page = new_page()
    page.goto("/")
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    status = page.locator("#takeaway-status")
    box.fill("Typed, then reloaded at once.")
    expect(status).to_have_text(LESSON.takeaway.not_saved_text)
    page.reload()  # well within the autosave's moment
    expect(box).to_have_value("Typed, then reloaded at once.")
    expect(status).to_have_text(LESSON.takeaway.saved_text, timeout=15_000)
    # Saved, it is the server's: another tab shows it, and a reload finds no draft to restore.
    other = page.context.new_page()
    other.goto("/")
    expect(other.get_by_label(LESSON.takeaway.label, exact=True)).to_have_value(
        "Typed, then reloaded at once."
    )
    page.reload()
    expect(box).to_have_value("Typed, then reloaded at once.")
    expect(status).not_to_have_text(LESSON.takeaway.not_saved_text)


def test_a_takeaway_draft_saved_over_elsewhere_is_not_restored(new_page: NewPage) -> None:
    # Tab A cannot save (its posts are refused), so its draft stays; tab B, the same learner,
    # saves later. A's reload shows B's saved text: the draft was typed over an older one.
    page = new_page()
    page.goto("/")
    page.route(
        "**/takeaway",
        lambda route: route.fulfill(status=409, json={"ok": False, "message": "Not now."}),
    )
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    box.fill("Typed in tab A, never saved.")
    expect(page.locator("#takeaway-status")).not_to_have_text(LESSON.takeaway.not_saved_text)
    other = page.context.new_page()
    other.goto("/")
    other_box = other.get_by_label(LESSON.takeaway.label, exact=True)
    other_box.fill("Saved in tab B.")
    other.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(other.locator("#takeaway-status")).to_have_text(LESSON.takeaway.saved_text)
    page.unroute("**/takeaway")
    page.reload()
    expect(box).to_have_value("Saved in tab B.")


def run_axe(page: Page) -> list[dict[str, object]]:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document)")
    return list(result["violations"])


def describe(violations: list[dict[str, object]]) -> str:
    return json.dumps(
        [
            {"id": v["id"], "help": v["help"], "nodes": [n["html"] for n in v["nodes"]]}  # type: ignore[index, union-attr]
            for v in violations
        ],
        indent=1,
    )


def test_axe_core_finds_no_violations(new_page: NewPage) -> None:
    # bypass_csp lets the audit script in; the page itself runs no inline script.
    page = new_page(bypass_csp=True)
    page.goto("/")
    before = run_axe(page)
    assert before == [], describe(before)

    commit_prediction(page)
    field(page, "row1_mean").fill("two")
    field(page, "row1_variance").fill("1")
    check_numbers(page)
    expect(attempts(page, "row1_variance")).to_have_text("Attempts: 1")
    page.get_by_role("radio", name=WRONG_READING.label).check()
    page.get_by_role("button", name=LESSON.reading.lock_label).click()
    expect(page.locator("#reading-feedback")).to_be_visible()
    page.get_by_label(LESSON.own_row.label).fill("1, 2, x")
    page.get_by_text(LESSON.hand.table_summary).click()
    page.get_by_role("switch", name=LESSON.hand.switch_label).click()
    during = run_axe(page)
    assert during == [], describe(during)

    phone = new_page(bypass_csp=True, viewport=PHONE)
    phone.goto("/?eps=off&row=1,2,3,4")
    small = run_axe(phone)
    assert small == [], describe(small)


def test_without_javascript_a_number_still_lands(new_page: NewPage) -> None:
    page = new_page(java_script_enabled=False)
    page.goto("/")
    page.get_by_role("radio", name="Layer norm").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page).to_have_url(re.compile(r"/#try$"))
    expect(page.locator("#committed-prediction")).to_have_text("Layer norm")

    field(page, "row1_mean").fill("6")  # the sum, not the mean
    check_numbers(page)
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 1")
    expect(page.locator("#field-row1_mean-feedback")).to_contain_text("sum")
    field(page, "row1_mean").fill("2.0004")
    check_numbers(page)
    expect(page).to_have_url(re.compile(r"/#numbers-section$"))
    expect(attempts(page, "row1_mean")).to_have_text("Attempts: 2")
    expect(field(page, "row1_mean")).to_have_attribute("readonly", "")
    expect(page.locator("#gate-numbers")).to_have_text("1 of 6 numbers landed.")

    # The switch works as a form: tick it off, apply, and the server draws eps = 0.
    page.get_by_role("switch", name=LESSON.hand.switch_label).uncheck()
    page.get_by_role("button", name="Apply the switch").click()
    expect(page.locator("#edge-now")).to_have_text(f"{LESSON.hand.edge_now_off} {NAN4}.")
    expect(page).to_have_url(re.compile(r"/\?eps=off#hand$"))
    # Ticked on again, and off and on once more: the address says eps once at most.
    for _ in range(2):
        page.get_by_role("switch", name=LESSON.hand.switch_label).check()
        page.get_by_role("button", name="Apply the switch").click()
        expect(page.locator("#edge-now")).to_have_text(f"{LESSON.hand.edge_now_on} {ZEROS4}.")
        expect(page).to_have_url(re.compile(r"/#hand$"))
        page.get_by_role("switch", name=LESSON.hand.switch_label).uncheck()
        page.get_by_role("button", name="Apply the switch").click()
        expect(page).to_have_url(re.compile(r"/\?eps=off#hand$"))

    # A refusal re-renders the page with the message by the form, and again at the top of the
    # page, where the answer opens, with a link down to the form.
    page.get_by_role("button", name=LESSON.reading.lock_label).click()
    expect(page.get_by_role("alert")).to_contain_text("Pick one of the four readings")
    summary = page.locator("#error-summary")
    expect(summary.get_by_role("heading", name="Nothing was saved")).to_be_in_viewport()
    expect(summary.get_by_role("link", name="Go to the form")).to_be_in_viewport()
    expect(summary).to_contain_text("Pick one of the four readings")
    summary.get_by_role("link", name="Go to the form").click()
    expect(page).to_have_url(re.compile(r"#reading-section$"))
    expect(page.get_by_role("button", name=LESSON.reading.lock_label)).to_be_in_viewport()


def test_without_javascript_back_after_a_refusal_finds_a_real_page(new_page: NewPage) -> None:
    page = new_page(java_script_enabled=False)
    page.goto("/")
    # Committing with nothing picked is refused: the message, at the top and by the form.
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#error-summary")).to_contain_text(NO_PREDICTION_CHOSEN)
    expect(page.locator("#predict-alert")).to_have_text(NO_PREDICTION_CHOSEN)
    # A reload asks nothing (no "Confirm form resubmission") and shows the page as it is.
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    expect(page.locator("#error-summary")).to_have_count(0)
    page.get_by_role("radio", name="Layer norm").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text("Layer norm")
    # Back returns to the page the refusal landed on: a page, not a browser error.
    answer = page.go_back()
    assert answer is not None and answer.ok
    expect(page.get_by_role("heading", level=1)).to_have_text(LESSON.title)
    expect(page.locator("#committed-prediction")).to_have_text("Layer norm")

    # A takeaway over the limit: refused, every character kept, and Back works the same.
    too_long = "Mine, and too long. " * 101
    box = page.get_by_label(LESSON.takeaway.label, exact=True)
    box.fill(too_long)
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_contain_text("Too long to save")
    expect(page.get_by_label(LESSON.takeaway.label, exact=True)).to_have_value(too_long)
    page.get_by_label(LESSON.takeaway.label, exact=True).fill("Short and mine.")
    page.get_by_role("button", name=LESSON.takeaway.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text(LESSON.takeaway.saved_text)
    answer = page.go_back()
    assert answer is not None and answer.ok
    expect(page.get_by_label(LESSON.takeaway.label, exact=True)).to_have_value("Short and mine.")


@pytest.mark.parametrize("java_script", [True, False], ids=["js", "no-js"])
def test_a_table_is_a_tab_stop_only_while_it_scrolls(new_page: NewPage, java_script: bool) -> None:
    page = new_page(viewport={"width": 1280, "height": 900}, java_script_enabled=java_script)
    page.goto("/")
    page.get_by_text(LESSON.hand.table_summary, exact=True).click()  # opens the steps table
    region = page.get_by_role("region", name=LESSON.hand.table_summary)
    expect(region).to_be_visible()
    if not java_script:  # the server's tabindex: a keyboard can always reach it
        expect(region).to_have_attribute("tabindex", "0")
        return
    expect(region).not_to_have_attribute("tabindex", "0")  # wide: the table fits
    page.set_viewport_size(PHONE)
    expect(region).to_have_attribute("tabindex", "0")  # narrow: it scrolls, so it is reachable
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(region).not_to_have_attribute("tabindex", "0")
