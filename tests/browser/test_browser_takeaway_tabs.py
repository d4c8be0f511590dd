"""One learner, two tabs: a tab drawn before the other saved a takeaway never saves over it
unseen, by autosave or by its button; it is told, keeps what it typed, and may then save."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from lesson_answers import LESSON

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
TEXT = LESSON.takeaway
# The autosave waits a moment after typing stops (takeaway.js AUTOSAVE_DELAY_MS), then posts.
AUTOSAVE_WAIT_MS = 15_000
AUTOSAVE_MS = 1_500  # takeaway.js AUTOSAVE_DELAY_MS


def save(page: Page, text: str) -> None:
    page.get_by_label(TEXT.label, exact=True).fill(text)
    page.get_by_role("button", name=TEXT.save_label).click()
    expect(page.locator("#takeaway-status")).to_have_text(TEXT.saved_text)


def test_an_old_tab_is_told_of_a_newer_takeaway_and_loses_nothing(new_page: NewPage) -> None:
    one = new_page()
    one.goto("/")
    save(one, "Tab one's first words.")
    two = one.context.new_page()
    two.goto("/")
    expect(two.get_by_label(TEXT.label, exact=True)).to_have_value("Tab one's first words.")
    save(two, "Tab two's newer words.")

    # Tab one still shows its own text; typing there autosaves, and the save is refused: the
    # newer words are quoted above the box, said at once.
    box = one.get_by_label(TEXT.label, exact=True)
    status = one.locator("#takeaway-status")
    newer = one.locator("#takeaway-newer")
    box.fill("Tab one's later words.")
    stale = TEXT.stale.format(saved="Tab two's newer words.")
    expect(newer).to_have_text(stale, timeout=AUTOSAVE_WAIT_MS)
    expect(newer).to_have_attribute("role", "alert")
    expect(status).to_have_text(TEXT.merging_text)
    expect(box).to_have_value("Tab one's later words.")
    two.reload()
    expect(two.get_by_label(TEXT.label, exact=True)).to_have_value("Tab two's newer words.")

    # Told, tab one saves on purpose, and its text is the takeaway now; then tab two, drawn
    # before that save, is refused by its button in turn.
    one.get_by_role("button", name=TEXT.save_label).click()
    expect(status).to_have_text(TEXT.saved_text)
    expect(newer).to_be_hidden()
    # A second save from tab one builds on its own first: no refusal.
    save(one, "Tab one's last words.")
    two_box = two.get_by_label(TEXT.label, exact=True)
    two_box.fill("Tab two again.")
    two.get_by_role("button", name=TEXT.save_label).click()
    expect(two.locator("#takeaway-newer")).to_have_text(
        TEXT.stale.format(saved="Tab one's last words.")
    )
    one.reload()
    expect(box).to_have_value("Tab one's last words.")


def test_the_newer_words_stay_on_screen_until_a_save_by_the_button(new_page: NewPage) -> None:
    # Tab two is drawn first; tab one saves; tab two, typing, is refused and quotes tab one.
    two = new_page()
    two.goto("/")
    one = two.context.new_page()
    one.goto("/")
    save(one, "Tab one's words.")
    box = two.get_by_label(TEXT.label, exact=True)
    newer = two.get_by_role("alert").filter(has_text="Tab one's words.")
    box.fill("Tab two's words.")
    quoted = TEXT.stale.format(saved="Tab one's words.")
    expect(newer).to_have_text(quoted, timeout=AUTOSAVE_WAIT_MS)

    # The learner starts to merge them: one more word, and more than the autosave's moment.
    box.fill("Tab two's words. Tab one's")
    two.wait_for_timeout(4 * AUTOSAVE_MS)
    expect(newer).to_have_text(quoted)  # still on screen
    expect(two.locator("#takeaway-status")).to_have_text(TEXT.merging_text)
    state = one.request.get("/api/state").json()["state"]
    assert state["takeaway"] == "Tab one's words."  # nothing saved over them

    # Saved by the button, written after reading them: the merge is the takeaway.
    box.fill("Tab two's words. Tab one's words.")
    two.get_by_role("button", name=TEXT.save_label).click()
    expect(two.locator("#takeaway-status")).to_have_text(TEXT.saved_text)
    expect(newer).to_be_hidden()
    one.reload()
    expect(one.get_by_label(TEXT.label, exact=True)).to_have_value(
        "Tab two's words. Tab one's words."
    )


def test_without_javascript_an_old_tab_lands_on_the_error_summary(new_page: NewPage) -> None:
    one = new_page(java_script_enabled=False)
    one.goto("/")
    two = one.context.new_page()
    two.goto("/")
    save(two, "Tab two's words.")
    one.get_by_label(TEXT.label, exact=True).fill("Tab one's words.")
    one.get_by_role("button", name=TEXT.save_label).click()
    stale = TEXT.stale.format(saved="Tab two's words.")
    expect(one.locator("#error-summary")).to_contain_text(stale)
    expect(one.get_by_label(TEXT.label, exact=True)).to_have_value("Tab one's words.")
    # Told, a second press saves it.
    one.get_by_role("button", name=TEXT.save_label).click()
    expect(one.locator("#takeaway-status")).to_have_text(TEXT.saved_text)
    two.reload()
    expect(two.get_by_label(TEXT.label, exact=True)).to_have_value("Tab one's words.")
