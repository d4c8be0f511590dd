"""The lesson page's number fields as a learner finds them in Chromium: by their label, and
the check button by its name (shared by the browser tests)."""

from __future__ import annotations

from playwright.sync_api import Locator, Page

from lesson_answers import LESSON


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
