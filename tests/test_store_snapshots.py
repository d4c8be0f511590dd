"""Snapshots: each learner's History kept in learner_snapshots, as a starting point only.

Whatever the row holds (nothing, an older History, one kept for another lesson shape), a read
and the instructor view's pool give exactly the fold of the learner's events in the store, and
keep the current one for the next reader. The upsert's SQL runs on both databases.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

from lesson_answers import LESSON, RIGHT_NUMBERS, RIGHT_READING_ID, WRONG_READING_ID
from normdive.i18n.catalogues import activated
from normdive.progress.events import EventKind
from normdive.progress.history import History
from normdive.progress.report import summary_from_record, summary_record
from normdive.progress.state import RecordingFacts, derive
from normdive.store.event_store import Store
from normdive.store.snapshots import SNAPSHOT_EVERY_EVENTS, Snapshots, due
from normdive.store.tables import LearnerSnapshot

pytestmark = pytest.mark.both_databases

START = History.start(LESSON)
SQLITE_FULL = 2  # PRAGMA synchronous: the events' own setting


@pytest.fixture
def snapshots(engine: Engine) -> Snapshots:
    return Snapshots(engine, START)


def working(store: Store) -> str:
    learner = store.create_learner()
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    store.append(learner, EventKind.HINT_OPENED, {"rung": 1})
    return learner


def through_the_gate(store: Store) -> str:
    """A learner with every step's time, slips, format errors, rows and plays to keep."""
    learner = working(store)

    def entry(field: str, raw: str, verdict: str, slip: str | None = None) -> dict[str, Any]:
        return {"field": field, "raw": raw, "verdict": verdict, "slip": slip, "message": None}

    wrong = [
        entry("row1_variance", "1", "wrong", "sample_variance"),
        entry("row1_mean", "x", "format_error"),
    ]
    store.append(learner, EventKind.NUMBERS_CHECKED, {"answers": wrong})
    right = [entry(field, raw, "right") for field, raw in RIGHT_NUMBERS.items()]
    store.append(learner, EventKind.NUMBERS_CHECKED, {"answers": right})
    store.append(learner, EventKind.READING_LOCKED, {"choice": WRONG_READING_ID, "right": False})
    store.append(learner, EventKind.READING_LOCKED, {"choice": RIGHT_READING_ID, "right": True})
    for row in LESSON.rows:
        store.append(learner, EventKind.ROW_PREDICTED, {"row": row.key, "outcome": "learns"})
    for row in LESSON.rows:
        store.append(learner, EventKind.ROW_PLAYED, {"row": row.key})
    store.append(
        learner, EventKind.GATE_CLOSED, {"recording_digest": "a" * 64, "recording_file": "r"}
    )
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "normalise, then add back"})
    return learner


def kept_row(engine: Engine, learner: str) -> LearnerSnapshot | None:
    with engine.connect() as connection:
        row = connection.execute(
            select(LearnerSnapshot.__table__).where(LearnerSnapshot.learner_id == learner)
        ).first()
    return row  # type: ignore[return-value]


def kept_at(engine: Engine, learner: str) -> int | None:
    """The last_event_id of the learner's kept snapshot (None: none kept)."""
    row = kept_row(engine, learner)
    return row.last_event_id if row is not None else None


def fold(store: Store, learner: str) -> History:
    return History.of(store.events_for(learner), LESSON)


def test_a_read_folds_what_is_missing_and_keeps_it(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    learner = through_the_gate(store)
    assert kept_row(engine, learner) is None  # written through the store: nothing kept
    history = snapshots.read(learner)
    assert history == fold(store, learner)
    row = kept_row(engine, learner)
    assert row is not None and row.last_event_id == history.last_event_id
    assert History.from_json(json.loads(row.body), START) == history
    assert json.loads(row.summary) == summary_record(history)
    summary = summary_from_record(learner, json.loads(row.summary), LESSON.rows[0].key)
    assert summary.stopped_after == "gate_closed"  # every step's time was kept
    assert summary.fields["row1_variance"].slips == {"sample_variance": 1}
    assert summary.fields["row1_mean"].format_errors == 1
    assert summary.reading_choices == (WRONG_READING_ID, RIGHT_READING_ID)

    # Behind: an event appended after it was kept is read and folded on top.
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "scale, then shift"})
    later = snapshots.read(learner)
    assert later == fold(store, learner) and later.takeaway == "scale, then shift"
    assert kept_at(engine, learner) == later.last_event_id


GERMAN_NOT_A_NUMBER = "Das ist keine Zahl. Schreiben Sie eine Zahl wie 0,667, -1,5, 2/3 oder 1e-3."


def test_a_format_error_stored_as_an_older_sentence_is_drawn_in_the_pages_language(
    store: Store, snapshots: Snapshots
) -> None:
    # A history written before format errors were stored as codes holds the sentence, worded
    # in the language of the page that checked (German here). Read from the database and kept
    # in a snapshot, it is drawn in the language of the page drawn now.
    learner = working(store)
    older = {"field": "row1_mean", "raw": "zwei", "parsed": None, "verdict": "format_error"}
    older |= {"slip": None, "message": GERMAN_NOT_A_NUMBER}
    newer = {"field": "row1_variance", "raw": "drei", "parsed": None, "verdict": "format_error"}
    newer |= {"slip": None, "problem": {"code": "not_a_number", "args": {}}}
    store.append(learner, EventKind.NUMBERS_CHECKED, {"answers": [older, newer]})
    facts = RecordingFacts(problem="no rows")
    for history in (snapshots.read(learner), snapshots.read(learner)):  # folded, then kept
        for locale, said in (
            ("en", "That is not a number. Write a number such as 0.667, -1.5, 2/3 or 1e-3."),
            ("de", GERMAN_NOT_A_NUMBER),
        ):
            with activated(locale):
                fields = derive(history, LESSON, recording=facts, dev_prerequisite_done=True).fields
            assert fields["row1_mean"].message == said
            assert fields["row1_variance"].message == said
            assert fields["row1_mean"].attempts == 0  # still no attempt used


def test_a_kept_snapshot_only_moves_forwards(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    learner = working(store)
    older = snapshots.read(learner)
    store.append(learner, EventKind.HINT_OPENED, {"rung": 2})
    newer = snapshots.read(learner)
    snapshots.keep(learner, older)  # a slower request of the same learner, arriving late
    assert kept_at(engine, learner) == newer.last_event_id


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
        assert kept_at(engine, learner) == fold(store, learner).last_event_id


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
    assert kept_at(engine, other) == fold(store, other).last_event_id


def test_a_failed_keep_is_logged_and_the_durable_setting_put_back(
    store: Store, engine: Engine, snapshots: Snapshots, caplog: pytest.LogCaptureFixture
) -> None:
    learner = working(store)
    snapshots.read(learner)
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:  # the pooled connection the keep used
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == SQLITE_FULL
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE learner_snapshots"))
    store.append(learner, EventKind.HINT_OPENED, {"rung": 2})
    with caplog.at_level(logging.WARNING, logger="normdive.store.snapshots"):
        assert snapshots.read(learner) == fold(store, learner)  # read, not kept: no error
    assert "not read" in caplog.text and "not kept" in caplog.text
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == SQLITE_FULL


@pytest.mark.parametrize("part", ["fields", "rows", "outcomes"])
def test_a_shape_digest_names_fields_rows_and_outcomes(part: str) -> None:
    shape = {
        "lesson_fields": START.lesson_fields,
        "lesson_rows": START.lesson_rows,
        "lesson_outcomes": START.lesson_outcomes,
    }
    name = f"lesson_{part}"
    shape[name] = type(shape[name])(sorted(shape[name])[:-1])  # type: ignore[call-arg]
    assert History(**shape).lesson_key != START.lesson_key  # type: ignore[arg-type]
    assert History.start(LESSON).lesson_key == START.lesson_key


def test_fill_keeps_every_snapshot_missing_or_behind(
    store: Store, engine: Engine, snapshots: Snapshots
) -> None:
    current, behind, missing = working(store), working(store), working(store)
    quiet = store.create_learner()  # no events: nothing to keep
    snapshots.read(current)
    snapshots.read(behind)
    store.append(behind, EventKind.HINT_OPENED, {"rung": 2})
    assert snapshots.fill(batch_size=1) == 2
    for learner in (current, behind, missing):
        assert kept_at(engine, learner) == fold(store, learner).last_event_id
    assert kept_at(engine, quiet) is None
    assert snapshots.fill() == 0


def test_the_app_keeps_a_snapshot_every_few_events() -> None:
    def at(position: int) -> History:
        return dataclasses.replace(START, position=position)

    every = SNAPSHOT_EVERY_EVENTS
    assert [due(at(n), at(n + 1)) for n in range(2 * every)] == [
        (n + 1) % every == 0 for n in range(2 * every)
    ]
    assert due(at(every - 1), at(every + 2))  # a write of several events that crosses one
    assert not due(at(every), at(every))
