"""Store.append_decided: decide from the learner's history and append only on that history.
Store.read: a history read so far, extended by only the newer events.

A rival append between the read and the append (another request of the same learner) makes
the decision be taken again on the new history; after OPTIMISTIC_TRIES such losses the
decision is taken under the learner's lock, where it cannot lose. The rival here is a real
second write through the store, made from inside the decision, at the worst moment.
"""

from __future__ import annotations

import pytest

from normdive.progress.actions import ActionRefused
from normdive.progress.events import EventKind
from normdive.store.event_store import OPTIMISTIC_TRIES, EventList, Store, UnknownLearner

pytestmark = pytest.mark.both_databases

SAVED = EventKind.TAKEAWAY_SAVED


def test_the_decision_is_appended_in_order_and_returned(store: Store) -> None:
    learner = store.create_learner()
    store.append(learner, SAVED, {"text": "before"})
    seen: list[list[str]] = []

    def decide(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        seen.append([event.payload["text"] for event in history.events])
        return [(SAVED, {"text": "one"}), (SAVED, {"text": "two"})]

    decided_on, appended = store.append_decided(learner, decide, EventList())
    assert seen == [["before"]]
    assert [e.payload["text"] for e in decided_on.events] == ["before"]
    assert appended == store.events_for(learner)[1:]
    assert [e.payload["text"] for e in appended] == ["one", "two"]


def test_nothing_decided_appends_nothing_and_a_refusal_stores_nothing(store: Store) -> None:
    learner = store.create_learner()
    assert store.append_decided(learner, lambda history: [], EventList()) == (EventList(), [])

    def refuse(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        raise ActionRefused("no")

    with pytest.raises(ActionRefused):
        store.append_decided(learner, refuse, EventList())
    assert store.events_for(learner) == []


def test_a_rival_append_makes_the_decision_be_taken_again(store: Store) -> None:
    learner = store.create_learner()
    calls: list[int] = []

    def once(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        calls.append(len(history.events))
        if len(calls) == 1:
            store.append(learner, SAVED, {"text": "rival"})  # lands between read and append
        if any(event.payload["text"] == "rival" for event in history.events):
            return []  # what was to be stored once is already there
        return [(SAVED, {"text": "rival"})]

    decided_on, appended = store.append_decided(learner, once, EventList())
    assert calls == [0, 1]
    assert appended == [] and [e.payload["text"] for e in decided_on.events] == ["rival"]
    assert [e.payload["text"] for e in store.events_for(learner)] == ["rival"]


def test_after_losing_every_try_the_decision_is_taken_under_the_lock(store: Store) -> None:
    learner = store.create_learner()
    calls: list[int] = []

    def always_raced(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        calls.append(len(history.events))
        if len(calls) <= OPTIMISTIC_TRIES:
            store.append(learner, SAVED, {"text": f"rival {len(calls)}"})
        return [(SAVED, {"text": "mine"})]

    decided_on, appended = store.append_decided(learner, always_raced, EventList())
    assert calls == list(range(OPTIMISTIC_TRIES + 1))
    assert len(decided_on.events) == OPTIMISTIC_TRIES
    texts = [e.payload["text"] for e in store.events_for(learner)]
    assert texts == [f"rival {n}" for n in range(1, OPTIMISTIC_TRIES + 1)] + ["mine"]
    assert [e.payload["text"] for e in appended] == ["mine"]


def test_an_unknown_learner_is_refused(store: Store) -> None:
    with pytest.raises(UnknownLearner):
        store.append_decided("0" * 32, lambda h: [(SAVED, {"text": "x"})], EventList())
    with pytest.raises(UnknownLearner):
        store.append_decided("not an id", lambda h: [(SAVED, {"text": "x"})], EventList())


def test_a_history_read_so_far_takes_only_the_newer_events(store: Store) -> None:
    learner = store.create_learner()
    store.append(learner, SAVED, {"text": "one"})
    first = store.read(learner, EventList())
    assert [e.payload["text"] for e in first.events] == ["one"]
    assert store.read(learner, first) is first  # nothing newer: the same object back
    store.append(learner, SAVED, {"text": "two"})
    second = store.read(learner, first)
    assert [e.payload["text"] for e in second.events] == ["one", "two"]
    assert second == store.read(learner, EventList())
    assert second.last_event_id == store.events_for(learner)[-1].id


def test_a_decision_starts_from_the_history_it_is_given(store: Store) -> None:
    learner = store.create_learner()
    store.append(learner, SAVED, {"text": "one"})
    known = store.read(learner, EventList())
    store.append(learner, SAVED, {"text": "two"})
    seen: list[list[str]] = []

    def decide(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        seen.append([event.payload["text"] for event in history.events])
        return [(SAVED, {"text": "three"})]

    decided_on, appended = store.append_decided(learner, decide, known)
    assert seen == [["one", "two"]]
    assert decided_on.events[-1].id < appended[0].id == store.events_for(learner)[-1].id


def test_a_history_just_read_is_decided_on_at_once_and_loses_to_a_newer_append(
    store: Store,
) -> None:
    learner = store.create_learner()
    store.append(learner, SAVED, {"text": "one"})
    read = store.read(learner, EventList())
    seen: list[list[str]] = []

    def decide(history: EventList) -> list[tuple[EventKind, dict[str, str]]]:
        seen.append([event.payload["text"] for event in history.events])
        return [(SAVED, {"text": "mine"})]

    store.append_decided(learner, decide, read, just_read=True)
    assert seen == [["one"]]  # decided on what was given, with no read of its own
    store.append(learner, SAVED, {"text": "rival"})  # lands after `read` was taken
    seen.clear()
    store.append_decided(learner, decide, read, just_read=True)
    assert seen == [["one"], ["one", "mine", "rival"]]  # lost once, decided again on the news
    texts = [e.payload["text"] for e in store.events_for(learner)]
    assert texts == ["one", "mine", "rival", "mine"]
