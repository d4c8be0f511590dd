"""What the lab's and the re-run's browser tests share: a server with a lab grid, a learner
whose gate has closed, and the checks of a phone's page (no sideways scroll, axe)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from lesson_answers import RIGHT_NUMBERS, RIGHT_READING_ID
from live_server import LiveServer
from normdive.recording.format import ROW_KEYS
from normdive.recording.runs import Runs
from normdive.web.app import create_app
from normdive.web.security.csrf import HEADER
from sample_lab import write_lab_grid

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


AXE = "node_modules/axe-core/axe.min.js"


def serve_with_grid(
    tmp_path_factory: pytest.TempPathFactory, name: str, grid: Runs | None = None
) -> Iterator[LiveServer]:
    """A module's server: the sample recording with a lab grid beside it (the tiny sample
    grid by default), on a SQLite file of its own."""
    folder = tmp_path_factory.mktemp(name)
    recording = write_recording(folder, ablation_recording())
    write_lab_grid(recording, grid)
    server = LiveServer(
        create_app(build_settings(migrated_sqlite_url(folder), folder, recording_path=recording))
    )
    server.start()
    yield server
    server.stop()


def no_horizontal_scroll(page: Page, width: int) -> None:
    scrolled = page.evaluate("document.scrollingElement.scrollWidth")
    assert scrolled <= width, f"the page scrolls sideways: {scrolled}px"


def axe_violations(page: Page) -> list[dict[str, object]]:
    page.add_script_tag(path=AXE)
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [{"id": v["id"], "nodes": [n["html"] for n in v["nodes"]]} for v in found]
