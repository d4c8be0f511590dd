"""What the lab's browser tests share: a learner whose gate has closed."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from lesson_answers import RIGHT_NUMBERS, RIGHT_READING_ID
from normdive.recording.format import ROW_KEYS
from normdive.web.security.csrf import HEADER

PREDICTIONS = {"both": "learns", "residual_only": "partial"}
PREDICTIONS |= {"layernorm_only": "chance", "neither": "chance"}


def post_the_work(page: Page) -> None:
    """The learner's work, posted as the page's forms post it, so the test starts at a
    closed gate (the server's word, whatever the page's language); the walk itself is tested
    in test_browser_ablation."""
    page.goto("/")
    token = page.request.get("/api/state").json()["csrf_token"]
    steps = [
        ("/predict", {"choice": "layer_norm"}),
        ("/numbers", RIGHT_NUMBERS),
        ("/reading", {"choice": RIGHT_READING_ID}),
        *((f"/rows/{key}/predict", {"outcome": o}) for key, o in PREDICTIONS.items()),
        *((f"/rows/{key}/play", {}) for key in ROW_KEYS),
    ]
    for path, form in steps:
        answer = page.request.post(
            path, form=form, headers={HEADER: token, "Accept": "application/json"}
        )
        assert answer.ok, (path, answer.text())
    assert page.request.get("/api/state").json()["state"]["gate"]["closed"] is True
    page.reload()


def close_the_gate(page: Page) -> None:
    """post_the_work, and the English page says the gate is met."""
    post_the_work(page)
    expect(page.locator("#gate-status")).to_contain_text("met")
