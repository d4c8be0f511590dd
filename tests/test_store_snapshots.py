"""Snapshots: each learner's History kept in learner_snapshots, as a starting point only.

Whatever the row holds (nothing, an older History, one kept for another lesson shape), a read
and the instructor view's pool give exactly the fold of the learner's events in the store, and
keep the current one for the next reader. The upsert's SQL runs on both databases.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, select, text

from lesson_answers import LESSON
from normdive.progress.events import EventKind
from normdive.progress.history import History
from normdive.progress.report import summary_record
from normdive.store.event_store import Store
from normdive.store.snapshots import Snapshots
from normdive.store.tables import LearnerSnapshot

pytestmark = pytest.mark.both_databases

START = History.start(LESSON)


@pytest.fixture
def snapshots(engine: Engine) -> Snapshots:
    return Snapshots(engine, START)


def working(store: Store) -> str:
    learner = store.create_learner()
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    store.append(learner, EventKind.HINT_OPENED, {"rung": 1})
    return learner


def kept_row(engine: Engine, learner: str) -> LearnerSnapshot | None:
    with engine.connect() as connection:
        row = connection.execute(
            select(LearnerSnapshot.__table__).where(LearnerSnapshot.learner_id == learner)
        ).first()
    return row  # type: ignore[return-value]


def fold(store: Store, learner: str) -> History:
    return History.of(store.events_for(learner), LESSON)


def test_a_read_folds_what_is_missing_and_keeps_it(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    learner = working(store)
    assert kept_row(engine, learner) is None  # written through the store: nothing kept
    history = snapshots.read(learner)
    assert history == fold(store, learner)
    row = kept_row(engine, learner)
    assert row is not None and row.last_event_id == history.last_event_id
    assert History.from_json(json.loads(row.body), START) == history
    assert json.loads(row.summary) == summary_record(history)

    # Behind: an event appended after it was kept is read and folded on top.
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "scale, then shift"})
    later = snapshots.read(learner)
    assert later == fold(store, learner) and later.takeaway == "scale, then shift"
    row = kept_row(engine, learner)
    assert row is not None and row.last_event_id == later.last_event_id


def test_a_kept_snapshot_only_moves_forwards(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    learner = working(store)
    older = snapshots.read(learner)
    store.append(learner, EventKind.HINT_OPENED, {"rung": 2})
    newer = snapshots.read(learner)
    snapshots.keep(learner, older)  # a slower request of the same learner, arriving late
    row = kept_row(engine, learner)
    assert row is not None and row.last_event_id == newer.last_event_id


def test_one_kept_for_another_lesson_shape_is_folded_again(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    learner = working(store)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO learner_snapshots (learner_id, lesson_key, last_event_id, body, "
                "summary) VALUES (:learner, 'another-lesson', 999999, 'not json', '[]')"
            ),
            {"learner": learner},
        )
    assert snapshots.read(learner) == fold(store, learner)
    row = kept_row(engine, learner)
    assert row is not None and row.lesson_key == START.lesson_key
    members = list(snapshots.pool(None))
    assert [m.learner_id for m in members] == [learner]
    assert members[0].record == summary_record(fold(store, learner))


def test_the_pool_reads_members_behind_or_missing_again(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    current, behind, missing = working(store), working(store), working(store)
    snapshots.read(current)
    snapshots.read(behind)
    store.append(behind, EventKind.ROW_PLAYED, {"row": "both"})
    members = {m.learner_id: m.record for m in snapshots.pool(None, batch_size=1)}
    assert set(members) == {current, behind, missing}
    for learner in (current, behind, missing):
        assert members[learner] == summary_record(fold(store, learner))
        row = kept_row(engine, learner)
        assert row is not None and row.last_event_id == fold(store, learner).last_event_id


def test_nothing_is_kept_for_a_learner_without_events_or_gone(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    quiet = store.create_learner()
    assert snapshots.read(quiet) == START
    assert kept_row(engine, quiet) is None
    learner = working(store)
    history = snapshots.read(learner)
    gone = "f" * 32  # never stored: the foreign key refuses the row, and nothing fails
    snapshots.keep(gone, history)
    assert kept_row(engine, gone) is None
    # In one batch with others, the others are still kept.
    other = working(store)
    snapshots.keep_many([(gone, history), (other, fold(store, other))])
    assert kept_row(engine, gone) is None
    row = kept_row(engine, other)
    assert row is not None and row.last_event_id == fold(store, other).last_event_id


def test_a_shape_digest_names_fields_rows_and_outcomes() -> None:
    other = History(
        lesson_fields=START.lesson_fields[:-1],
        lesson_rows=START.lesson_rows,
        lesson_outcomes=START.lesson_outcomes,
    )
    assert other.lesson_key != START.lesson_key
    assert History.start(LESSON).lesson_key == START.lesson_key
