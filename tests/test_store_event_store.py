"""The Store on a real SQLite file and on PostgreSQL: append-only events, in order, one learner
at a time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, delete, insert

from normdive.progress.events import EventKind
from normdive.store.event_store import Store, UnknownLearner, is_learner_id, storable
from normdive.store.tables import EventRecord, Learner

pytestmark = pytest.mark.both_databases


def test_a_new_learner_has_a_random_128_bit_hex_id(store: Store) -> None:
    first, second = store.create_learner(), store.create_learner()
    assert is_learner_id(first) and is_learner_id(second)
    assert len(first) == 32 and first != second
    assert store.learner_exists(first)
    assert store.events_for(first) == []


@pytest.mark.parametrize("learner_id", ["0" * 32, "not-an-id", "", "A" * 32, "0" * 33])
def test_unknown_or_malformed_ids_do_not_exist(store: Store, learner_id: str) -> None:
    assert not store.learner_exists(learner_id)
    assert store.events_for(learner_id) == []
    with pytest.raises(UnknownLearner):
        store.append(learner_id, EventKind.TAKEAWAY_SAVED, {"text": "x"})


def test_events_come_back_in_the_order_they_were_appended(store: Store) -> None:
    learner = store.create_learner()
    before = datetime.now(UTC) - timedelta(minutes=1)
    appended = [
        store.append(learner, EventKind.PREREQUISITE_DONE, {"source": "operator"}),
        store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"}),
        store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "one"}),
        store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "two"}),
    ]
    read = store.events_for(learner)
    assert read == appended
    assert [event.payload.get("text") for event in read[2:]] == ["one", "two"]
    assert [event.id for event in read] == sorted(event.id for event in read)
    for event in read:
        assert event.created_at.tzinfo is not None
        assert event.created_at.utcoffset() == timedelta(0)
        assert before <= event.created_at <= datetime.now(UTC) + timedelta(minutes=1)


def test_two_learners_never_see_each_other(store: Store) -> None:
    alice, bob = store.create_learner(), store.create_learner()
    store.append(alice, EventKind.TAKEAWAY_SAVED, {"text": "alice"})
    store.append(bob, EventKind.TAKEAWAY_SAVED, {"text": "bob"})
    store.append(alice, EventKind.PREDICTION_COMMITTED, {"choice": "layer_norm"})
    assert [e.payload for e in store.events_for(alice)] == [
        {"text": "alice"},
        {"choice": "layer_norm"},
    ]
    assert [e.payload for e in store.events_for(bob)] == [{"text": "bob"}]
    assert {e.learner_id for e in store.events_for(alice)} == {alice}


def test_a_payload_keeps_nested_json(store: Store) -> None:
    learner = store.create_learner()
    payload = {
        "answers": [
            {"field": "row1_mean", "raw": " 2 ", "parsed": "2", "verdict": "right", "slip": None},
            {"field": "row1_variance", "raw": "x", "parsed": None, "verdict": "format_error"},
        ],
        "count": 2,
        "ratio": 0.5,
        "flag": True,
    }
    store.append(learner, EventKind.NUMBERS_CHECKED, payload)
    assert store.events_for(learner)[0].payload == payload


def test_nul_and_lone_surrogates_are_replaced_before_storing(store: Store) -> None:
    # PostgreSQL's JSONB refuses both; the learner's text survives with U+FFFD in their place.
    learner = store.create_learner()
    event = store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "a\x00b\ud800c", "k\x00": 1})
    assert event.payload == {"text": "a\ufffdb\ufffdc", "k\ufffd": 1}
    assert store.events_for(learner)[0].payload == event.payload


@pytest.mark.parametrize(
    "payload", [{"x": float("nan")}, {"x": float("inf")}, {"x": object()}, {"x": {1: "a"}}]
)
def test_what_json_cannot_hold_is_refused_and_nothing_is_stored(
    store: Store, payload: dict[str, object]
) -> None:
    learner = store.create_learner()
    with pytest.raises(ValueError):
        store.append(learner, EventKind.TAKEAWAY_SAVED, payload)
    assert store.events_for(learner) == []


def test_storable_is_identity_on_clean_json() -> None:
    value = {"a": [1, 2.5, None, True, "text"], "b": {"c": "d"}}
    assert storable(value) == value


def test_the_store_offers_no_way_to_change_history() -> None:
    public = {name for name in dir(Store) if not name.startswith("_")}
    # prediction_counts only reads: bare counts across learners. ensure_learner
    # adds a learner who is not stored yet and leaves a stored one as they are.
    assert public == {
        "create_learner",
        "ensure_learner",
        "learner_exists",
        "append",
        "append_decided",
        "events_for",
        "read",
        "prediction_counts",
    }


def test_kinds_from_a_newer_version_are_skipped_when_reading(store: Store, engine: Engine) -> None:
    learner = store.create_learner()
    with engine.begin() as connection:
        connection.execute(
            insert(EventRecord).values(learner_id=learner, kind="a_kind_from_later", payload={})
        )
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "kept"})
    assert [event.kind for event in store.events_for(learner)] == [EventKind.TAKEAWAY_SAVED]


def test_deleting_a_learner_cascades_to_their_events(store: Store, engine: Engine) -> None:
    # Not a Store operation (history is append-only); an operator's erasure relies on it.
    learner, other = store.create_learner(), store.create_learner()
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "gone"})
    store.append(other, EventKind.TAKEAWAY_SAVED, {"text": "stays"})
    with engine.begin() as connection:
        connection.execute(delete(Learner).where(Learner.id == learner))
    assert not store.learner_exists(learner)
    assert store.events_for(learner) == []
    assert len(store.events_for(other)) == 1


def test_a_hundred_appends_from_threads_are_all_there(store: Store) -> None:
    learners = [store.create_learner() for _ in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(20)

    def worker(index: int) -> None:
        try:
            start.wait()
            for step in range(5):
                number = index * 5 + step
                store.append(learners[number % 4], EventKind.TAKEAWAY_SAVED, {"text": str(number)})
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seen = []
    for index, learner in enumerate(learners):
        events = store.events_for(learner)
        assert {int(e.payload["text"]) % 4 for e in events} == {index}
        seen.extend(int(e.payload["text"]) for e in events)
    assert sorted(seen) == list(range(100))
    ids = [e.id for learner in learners for e in store.events_for(learner)]
    assert len(set(ids)) == 100
