"""The instructor view's report per pool, kept by each worker between views (PoolReports).

A view reads where every member's snapshot stands (Snapshots.pool_marks: one query of small
rows) and only the summaries that moved since the last view (Snapshots.records); the kept
PoolReportBuilder takes each moved learner's old summary back and adds the new one. So a view
of a pool where few learners moved costs little more than that one query, whatever the pool's
size; the first view of a pool in a worker reads every summary once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from normdive.lesson.content import Lesson
from normdive.progress.facts import RecordingFacts
from normdive.progress.report import (
    LearnerSummary,
    PoolReport,
    PoolReportBuilder,
    summary_from_record,
)
from normdive.store.snapshots import Snapshots

# Pools whose added-up summaries one worker keeps (each is one summary per learner).
POOLS_KEPT = 8


@dataclass
class _KeptPool:
    builder: PoolReportBuilder
    # learner id -> (their snapshot's last_event_id, their launch, the summary added)
    members: dict[str, tuple[int, datetime | None, LearnerSummary]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class PoolReports:
    """The instructor view's report per pool, kept between views and brought up to date by
    reading only the members whose snapshot moved (Snapshots.pool_marks, then .records):
    a view then costs one query of small rows plus the summaries that changed, instead of
    every member's. Whatever is kept, the report equals adding up every member's summary
    as it is now (tests/test_instructor_view.py). Thread-safe; per worker, least recently
    used pool dropped first."""

    def __init__(self, lesson: Lesson, capacity: int = POOLS_KEPT) -> None:
        self._lesson = lesson
        self._capacity = capacity
        self._kept: OrderedDict[tuple[str | None, RecordingFacts], _KeptPool] = OrderedDict()
        self._lock = threading.Lock()

    def _pool(self, key: tuple[str | None, RecordingFacts]) -> _KeptPool:
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                kept = _KeptPool(PoolReportBuilder(self._lesson, key[1]))
                self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > self._capacity:
                self._kept.popitem(last=False)
            return kept

    def report(
        self, snapshots: Snapshots, recording: RecordingFacts, context_key: str | None
    ) -> PoolReport:
        kept = self._pool((context_key, recording))
        with kept.lock:
            marks = snapshots.pool_marks(context_key)
            moved = [
                mark
                for mark in marks
                if mark.stale
                or (held := kept.members.get(mark.learner_id)) is None
                or held[0] != (mark.last_event_id or 0)
                or held[1] != mark.launched_at
            ]
            present = {mark.learner_id for mark in marks}
            for gone in [learner for learner in kept.members if learner not in present]:
                kept.builder.remove(kept.members.pop(gone)[2])
            records = snapshots.records(moved)
            for mark in moved:
                last_event_id, record = records[mark.learner_id]
                summary = summary_from_record(
                    mark.learner_id, record, recording.best_row, mark.launched_at
                )
                held = kept.members.get(mark.learner_id)
                if held is not None:
                    kept.builder.remove(held[2])
                kept.builder.add(summary)
                kept.members[mark.learner_id] = (last_event_id, mark.launched_at, summary)
            return kept.builder.report()
