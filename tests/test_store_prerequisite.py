"""record_prerequisite_done: the one place `normdive prerequisite done` and the host's
`POST /api/prerequisite` record lesson 8.5, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import migrated_sqlite_url
from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.events import Store, UnknownLearner
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


def test_an_unknown_learner_is_refused_and_nothing_is_stored(store: Store) -> None:
    other = store.create_learner()
    with pytest.raises(UnknownLearner):
        record_prerequisite_done(store, "ab" * 16, PrerequisiteSource.OPERATOR)
    assert store.events_for("ab" * 16) == []
    assert store.events_for(other) == []
