"""What one render of the page gathers (normdive.web.views.page): what the URL carries through a
POST, and which of the recording's views a learner's state lets the page show."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from helpers import ablation_recording
from normdive.lesson.content import load_lesson
from normdive.progress.aggregate import PredictionCounts
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import recording_facts
from normdive.progress.state import LessonState, derive
from normdive.web.views.page import Carry, build_page_view, carry_from

LESSON = load_lesson()
RECORDING = ablation_recording()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, Carry()),
        ({"eps": "off", "row": " 1, 2 ", "play": "both"}, Carry(True, " 1, 2 ", "both")),
        ({"eps": "OFF", "row": "   ", "play": "best"}, Carry()),
        ({"row": "1" * 400}, Carry(row="1" * 400)),
        ({"row": "1" * 401}, Carry()),
        ({"row": "1\n2"}, Carry()),
        ({"play": " neither "}, Carry(play="neither")),
    ],
)
def test_carry_keeps_only_what_the_page_could_have_put_in_its_url(
    values: dict[str, str], expected: Carry
) -> None:
    assert carry_from(values, LESSON) == expected


@pytest.mark.parametrize(
    ("carry", "location"),
    [
        (Carry(), "/#try"),
        (Carry(eps_off=True), "/?eps=off#try"),
        (Carry(row="3, 1&4", play="both"), "/?row=3%2C+1%264&play=both#try"),
    ],
)
def test_carry_builds_the_303_location(carry: Carry, location: str) -> None:
    assert carry.location("try") == location


def event(kind: EventKind, **payload: object) -> Event:
    return Event(0, "0" * 32, kind, dict(payload), datetime(2025, 1, 1, tzinfo=UTC))


def state_after(*events: Event) -> LessonState:
    return derive(
        list(events), LESSON, recording=recording_facts(RECORDING), dev_prerequisite_done=True
    )


COMMITTED = event(EventKind.PREDICTION_COMMITTED, choice="residual")
PREDICTED = [
    event(EventKind.ROW_PREDICTED, row=key, outcome="chance")
    for key in ("both", "residual_only", "layernorm_only", "neither")
]


def test_the_player_shows_a_row_only_once_it_has_played() -> None:
    before = build_page_view(
        LESSON, state_after(COMMITTED, *PREDICTED), "id", player_row="both", recording=RECORDING
    )
    assert before.player is None and before.carry.play == ""
    played = state_after(COMMITTED, *PREDICTED, event(EventKind.ROW_PLAYED, row="both"))
    view = build_page_view(LESSON, played, "id", player_row="both", recording=RECORDING)
    assert view.player is not None and view.player.key == "both"
    assert view.carry.play == "both"
    assert view.gradients is None  # not before every row has played
    assert view.provenance is not None


def test_the_aggregate_waits_for_the_opening_prediction() -> None:
    counts = PredictionCounts(committed=5, opening={"residual": 5})
    assert build_page_view(LESSON, state_after(), "id", counts=counts).aggregate is None
    view = build_page_view(LESSON, state_after(COMMITTED), "id", counts=counts)
    assert view.aggregate is not None and view.aggregate.opening.shown


def test_before_the_commit_the_url_carries_nothing_of_try_it() -> None:
    view = build_page_view(LESSON, state_after(), "id", eps_on=False, own_row_text="1, 2")
    assert view.carry == Carry()
