"""record_prerequisite_done: the one place `normdive prerequisite done` and the host's
`POST /api/prerequisite` record lesson 8.5, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import migrated_sqlite_url
from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.event_store import Store, UnknownLearner
from normdive.store.prerequisite import PrerequisiteSource, record_prerequisite_done


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(make_engine(migrated_sqlite_url(tmp_path)))


@pytest.mark.parametrize("source", list(PrerequisiteSource))
def test_it_is_recorded_once_with_its_source(store: Store, source: PrerequisiteSource) -> None:
    learner = store.create_learner()
    assert record_prerequisite_done(store, learner, source) is False
    assert record_prerequisite_done(store, learner, PrerequisiteSource.HOST) is True
    assert record_prerequisite_done(store, learner, PrerequisiteSource.OPERATOR) is True
    assert [(e.kind, e.payload) for e in store.events_for(learner)] == [
        (EventKind.PREREQUISITE_DONE, {"source": source.value})
    ]


def test_a_learner_not_stored_yet_is_stored_with_the_event(store: Store) -> None:
    other = store.create_learner()
    unseen = "ab" * 16
    assert record_prerequisite_done(store, unseen, PrerequisiteSource.OPERATOR) is False
    assert [e.kind for e in store.events_for(unseen)] == [EventKind.PREREQUISITE_DONE]
    assert store.events_for(other) == []


def test_text_that_is_not_a_learner_id_is_refused(store: Store) -> None:
    with pytest.raises(UnknownLearner):
        record_prerequisite_done(store, "not-an-id", PrerequisiteSource.OPERATOR)
