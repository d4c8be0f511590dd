"""One tap, one request, in Chromium: a double tap on "Check my numbers" sends one check and a
double tap on Play counts one play, both while the first answer travels and when it is back
before the second tap (a fast server, a phone's double-tap interval). Counted twice: the POSTs
the page sent, and what the server recorded. On one server per module with a sample recording,
so that rows play."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from lesson_page import check_numbers, field
from playwright.sync_api import Page, Request, expect

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from lesson_answers import LESSON
from lesson_answers import RIGHT_NUMBERS as RIGHT
from lesson_answers import RIGHT_READING_CHOICE as RIGHT_READING
from live_server import LiveServer
from normdive.web.app import create_app

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
ROW_LABELS = {row.key: row.label for row in LESSON.rows}
OUTCOME_LABELS = {outcome.id: outcome.label for outcome in LESSON.outcomes}
# How long a test waits after an answer before counting the requests sent: a second one,
# sent on the second tap, would be under way by then (no time is asserted).
SETTLE_MS = 800


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """This module's server: the session's has no recording, so nothing would play."""
    folder = tmp_path_factory.mktemp("one-tap")
    settings = build_settings(
        migrated_sqlite_url(folder),
        folder,
        recording_path=write_recording(folder, ablation_recording()),
    )
    server = LiveServer(create_app(settings))
    server.start()
    yield server
    server.stop()


def posts_to(page: Page, path: str) -> list[str]:
    """The POSTs the page sends to `path`, as they are sent."""
    sent: list[str] = []

    def note(request: Request) -> None:
        if request.method == "POST" and request.url.endswith(path):
            sent.append(request.url)

    page.on("request", note)
    return sent


def state(page: Page) -> dict[str, object]:
    answer = page.request.get("/api/state")
    assert answer.ok
    data = answer.json()["state"]
    assert isinstance(data, dict)
    return data


def commit(page: Page) -> None:
    page.goto("/")
    page.get_by_role("radio", name="Residual connections").check()
    page.get_by_role("button", name=LESSON.predict.commit_label).click()
    expect(page.locator("#committed-prediction")).to_have_text("Residual connections")


def predict_every_row(page: Page) -> None:
    for row in LESSON.rows:
        group = page.get_by_role("group", name=f"{row.label}: your prediction")
        group.get_by_role("radio", name=OUTCOME_LABELS["learns"], exact=True).check()
        page.get_by_role("button", name=f"{LESSON.ablation.predict_label} ({row.label})").click()
        expect(page.locator(f"#row-{row.key}-prediction")).to_have_text(OUTCOME_LABELS["learns"])


def play_button(page: Page, key: str):  # type: ignore[no-untyped-def]
    label = ROW_LABELS[key]
    return page.get_by_role("button", name=re.compile(rf"^Play (this row|it again) \({label}\)$"))


def test_a_double_tap_on_check_sends_one_check(new_page: NewPage) -> None:
    page = new_page()
    commit(page)
    sent = posts_to(page, "/numbers")
    field(page, "row1_mean").fill("2.5")
    field(page, "row1_variance").fill("two")  # a format error: never checked, never charged
    page.get_by_role("button", name=LESSON.numbers.check_label).dblclick()
    expect(page.locator("#field-row1_mean-attempts")).to_have_text("Attempts: 1")
    page.wait_for_timeout(SETTLE_MS)  # room for a second request, were one sent
    expect(page.locator("#numbers-alert")).to_have_count(0)  # no "Nothing has changed"
    assert len(sent) == 1
    fields = state(page)["fields"]
    assert isinstance(fields, dict)
    assert fields["row1_mean"]["attempts"] == 1
    assert state(page)["evaluated_runs"] == 1

    # A tap whose answer is back before the second tap of the pair: still one check.
    field(page, "row1_mean").fill("2.25")
    with page.expect_response(re.compile(r"/numbers$")):
        check_numbers(page)
    check_numbers(page)
    expect(page.locator("#field-row1_mean-attempts")).to_have_text("Attempts: 2")
    page.wait_for_timeout(SETTLE_MS)  # room for a second request, were one sent
    expect(page.locator("#numbers-alert")).to_have_count(0)
    assert len(sent) == 2
    assert state(page)["evaluated_runs"] == 2


def test_the_gate_closing_is_heard(new_page: NewPage) -> None:
    page = new_page(reduced_motion="reduce")
    commit(page)
    for field_id, value in RIGHT.items():
        field(page, field_id).fill(value)
    check_numbers(page)
    expect(page.locator("#gate-numbers")).to_have_text("6 of 6 numbers landed.")
    page.get_by_role("radio", name=RIGHT_READING.label).check()
    page.get_by_role("button", name=LESSON.reading.lock_label).click()
    expect(page.locator("#gate-reading")).to_have_text("The right reading is locked.")
    predict_every_row(page)
    announcer = page.locator("#announcer")
    expect(announcer).not_to_contain_text(LESSON.gate.met)
    play_button(page, "neither").click()  # not the best row: the gate stays open
    expect(page.locator("#row-neither-plays")).to_have_text("Played 1 time")
    expect(announcer).to_contain_text(LESSON.ablation.final_heading)
    expect(announcer).not_to_contain_text(LESSON.gate.met)
    play_button(page, "both").click()  # the best row: the last condition is met
    expect(page.locator("#gate-status")).to_contain_text("met")
    # Said after the row's figures, which take the live region over once drawn.
    expect(announcer).to_contain_text(LESSON.ablation.final_heading)
    expect(announcer).to_contain_text(LESSON.gate.met)


def test_a_double_tap_on_play_counts_one_play(new_page: NewPage) -> None:
    page = new_page(reduced_motion="reduce")
    commit(page)
    predict_every_row(page)
    sent = posts_to(page, "/rows/both/play")
    play_button(page, "both").dblclick()
    expect(page.locator("#row-both-plays")).to_have_text("Played 1 time")
    page.wait_for_timeout(SETTLE_MS)
    assert len(sent) == 1

    with page.expect_response(re.compile(r"/rows/both/play$")):
        play_button(page, "both").click()
    play_button(page, "both").click()
    expect(page.locator("#row-both-plays")).to_have_text("Played 2 times")
    page.wait_for_timeout(SETTLE_MS)  # room for a second request, were one sent
    assert len(sent) == 2
    ablation = state(page)["ablation"]
    assert isinstance(ablation, dict)
    both = next(row for row in ablation["rows"] if row["key"] == "both")
    assert both["plays"] == 2
