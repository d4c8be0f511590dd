"""web.views.kept: a pure function of immutable objects computed once per distinct arguments,
an object keyed by its identity and plain values by value; and the recording's views, each
computed once per recording and shared by every learner shown it."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from helpers import ablation_recording
from lesson_answers import LESSON
from normdive.web.views.kept import ByValue, by_value, kept
from normdive.web.views.player import gradients_view, player_view, provenance_view
from normdive.web.views.sweep import played_intro

RECORDING = ablation_recording()


class Pair(NamedTuple):
    left: int
    right: int


def counting() -> tuple[list[tuple[object, ...]], object]:
    calls: list[tuple[object, ...]] = []

    @kept(8)
    def seen(*args: object) -> tuple[object, ...]:
        calls.append(args)
        return args

    return calls, seen


def test_plain_values_are_keys_by_value_and_objects_by_identity() -> None:
    calls, seen = counting()
    first, twin = ["a"], ["a"]  # equal, not the same object
    assert seen("text", 3, None, first) == ("text", 3, None, ("a",))  # a list arrives as a tuple
    seen("text", 3, None, ["a"])  # the list's items, read now: the same key
    assert len(calls) == 1
    shared = object()
    seen(shared)
    seen(shared)
    seen(object())
    assert len(calls) == 3
    pair = Pair(1, 2)
    assert seen(pair) == (pair,)  # a named tuple is an object: it arrives as itself
    seen(Pair(1, 2))
    assert len(calls) == 5
    assert first == twin


def test_an_argument_by_value_is_one_key_for_equal_objects_of_one_type() -> None:
    calls, seen = counting()
    seen(by_value(Pair(1, 2)))
    seen(by_value(Pair(1, 2)))  # built apart, equal
    seen(by_value((1, 2)))  # equal as tuples, another type
    seen(by_value({"a": 1}))
    seen(by_value({"a": 1}))  # a dict by its items
    assert len(calls) == 3
    assert calls[0] == (Pair(1, 2),)  # the function is given the object itself


def test_what_cannot_be_hashed_is_kept_by_identity() -> None:
    calls, seen = counting()
    holder = Pair([1], 2)  # type: ignore[arg-type]  (a list inside: no hash)
    assert not isinstance(by_value(holder), ByValue)
    seen(by_value(holder))
    seen(by_value(holder))
    seen(by_value(Pair([1], 2)))  # type: ignore[arg-type]
    assert len(calls) == 2


def test_keyword_arguments_are_refused() -> None:
    _, seen = counting()
    with pytest.raises(TypeError, match="positional arguments only"):
        seen(name="x")  # type: ignore[operator]


def test_the_recordings_views_are_computed_once_per_recording() -> None:
    played = ["both", "neither"]
    assert player_view(RECORDING, LESSON, "both", played) is player_view(
        RECORDING, LESSON, "both", tuple(played)
    )
    assert gradients_view(RECORDING, LESSON) is gradients_view(RECORDING, LESSON)
    card = provenance_view(RECORDING, LESSON, "a.json")
    assert card is provenance_view(RECORDING, LESSON, "a.json")
    assert played_intro(LESSON, RECORDING) is played_intro(LESSON, RECORDING)
    # Every player of the row shares its curves, whichever rows were played beside it.
    alone = player_view(RECORDING, LESSON, "both", ["both"])
    together = player_view(RECORDING, LESSON, "both", played)
    assert alone is not None and together is not None
    assert alone.together is None and together.together is not None
    assert together.accuracy_chart is alone.accuracy_chart
    assert together.points is alone.points


def test_another_recording_gets_views_of_its_own() -> None:
    other = RECORDING.model_copy(
        update={"plan": RECORDING.plan.model_copy(update={"first": {"seed": 1}})}
    )
    mine = player_view(RECORDING, LESSON, "both")
    theirs = player_view(other, LESSON, "both")
    assert mine is not None and theirs is not None
    assert (mine.seed, theirs.seed) == (0, 1)
    assert provenance_view(other, LESSON, "a.json").seed == 1
