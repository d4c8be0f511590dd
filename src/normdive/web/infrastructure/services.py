"""What a request handler has to hand: settings, lesson, store, signer and renderer, built
once per app by create_app, plus reading the recording and a learner's derived state.

The recording's problems are written for a course author and name the server's paths. A
learner reads the lesson's sentence for the reader's reason code instead
(Lesson.recording_problems); the author's message goes to the log, once per distinct problem.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast

from itsdangerous import Signer
from sqlalchemy import Engine
from starlette.requests import Request

from normdive.config import Settings
from normdive.lesson.content import Lesson
from normdive.lti.learners import latest_course
from normdive.progress.actions import close_gate
from normdive.progress.events import EventKind
from normdive.progress.facts import RecordingFacts, recording_facts
from normdive.progress.history import History
from normdive.progress.lab import lab_runs, run_line
from normdive.progress.state import LessonState, derive
from normdive.progress.sweep import compare_line
from normdive.recording import reader
from normdive.recording.format import Recording
from normdive.recording.sweep import sweep_path_for
from normdive.recording.sweep_reader import sweep_status
from normdive.store.event_store import EventList, Store
from normdive.store.snapshots import Snapshots, due
from normdive.web.security.csrf import form_token
from normdive.web.views.page import PageView, Refusal, build_page_view
from normdive.web.views.pool_reports import PoolReports
from normdive.web.views.rendering import Renderer

logger = logging.getLogger(__name__)

# The reason recording_facts gives when a readable file lacks a row (the only problem it adds
# to what the reader says).
ROWS_MISSING_REASON = "no_ablation_rows"

RecordingStatus = Recording | reader.RecordingProblem

_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()


def log_recording_problem(reason: str, message: str) -> None:
    """Log the author's message once per distinct problem (not once per page view)."""
    with _logged_lock:
        if (reason, message) in _logged:
            return
        _logged.add((reason, message))
    logger.warning("the recording cannot be used (%s): %s", reason, message)


# The facts of the recording last asked about, with the status object they were made from:
# the reader hands out the same object until the file changes, so most requests reuse them.
_last_facts: tuple[RecordingStatus, Lesson, RecordingFacts] | None = None


def learner_facts(status: RecordingStatus, lesson: Lesson) -> RecordingFacts:
    """RecordingFacts whose problem, if any, is the lesson's sentence for its reason code."""
    global _last_facts
    last = _last_facts
    if last is not None and last[0] is status and last[1] is lesson:
        return last[2]
    facts = _learner_facts(status, lesson)
    _last_facts = (status, lesson, facts)
    return facts


def _learner_facts(status: RecordingStatus, lesson: Lesson) -> RecordingFacts:
    facts = recording_facts(status)
    if facts.problem is None:
        return facts
    reason = status.reason if isinstance(status, reader.RecordingProblem) else ROWS_MISSING_REASON
    log_recording_problem(reason, facts.problem)
    return dataclasses.replace(facts, problem=lesson.recording_problems.sentence(reason))


# Learners whose History one worker keeps: a History is a few kilobytes at most, and the state
# kept with it about 6 KB (measured with tracemalloc), so this is about 200 MB at worst, with
# this many learners at work on one worker. A learner not kept is read whole once, then kept
# again.
HISTORIES_KEPT = 20_000


@dataclass(frozen=True)
class _Kept:
    """A kept History, and the state it derived to with one recording, once derived."""

    history: History
    status: RecordingStatus | None = None
    state: LessonState | None = None


class Histories:
    """The latest History read of each recently seen learner, least recently used dropped
    first, with the state it derived to: the next request of the learner on this worker that
    finds nothing appended since derives nothing.

    Safe across workers and machines: a kept History is only a starting point, which every
    read extends by the events appended since (Store.read), wherever they were appended. It
    only saves reading and folding again what was already read. A kept state is used only for
    the very History object it was derived from (nothing appended since) and the very
    recording object (reader.recording_snapshot keeps one per file until the file changes;
    a missing or unusable file is a new problem each time, so then nothing is reused). No
    state is kept for a History without events: every visitor without a cookie has one.
    Thread-safe."""

    def __init__(self, lesson: Lesson, capacity: int = HISTORIES_KEPT) -> None:
        self._start = History.start(lesson)
        self._capacity = capacity
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, learner_id: str) -> History:
        """The learner's kept History, or the lesson's History before any event."""
        kept = self.kept(learner_id)
        return kept if kept is not None else self._start

    def kept(self, learner_id: str) -> History | None:
        with self._lock:
            kept = self._kept.get(learner_id)
            if kept is None:
                return None
            self._kept.move_to_end(learner_id)
            return kept.history

    def keep(self, learner_id: str, history: History) -> None:
        """Keep `history` unless a newer one of the learner's is kept already."""
        with self._lock:
            kept = self._kept.get(learner_id)
            if kept is not None and (
                kept.history is history or kept.history.last_event_id >= history.last_event_id
            ):
                return
            self._kept[learner_id] = _Kept(history)
            self._kept.move_to_end(learner_id)
            while len(self._kept) > self._capacity:
                self._kept.popitem(last=False)

    def derived(
        self, learner_id: str, history: History, status: RecordingStatus
    ) -> LessonState | None:
        """The state kept for exactly this History and recording, if any."""
        with self._lock:
            kept = self._kept.get(learner_id)
        if kept is None or kept.history is not history or kept.status is not status:
            return None
        return kept.state

    def remember(
        self, learner_id: str, history: History, status: RecordingStatus, state: LessonState
    ) -> None:
        """Keep `state` as what the kept `history` derives to with `status` (nothing when
        another History of the learner's is kept now)."""
        if history.last_event_id == 0:
            return
        with self._lock:
            kept = self._kept.get(learner_id)
            if kept is not None and kept.history is history:
                self._kept[learner_id] = _Kept(history, status, state)

    def __len__(self) -> int:
        return len(self._kept)


@dataclass(frozen=True)
class Services:
    settings: Settings
    lesson: Lesson
    engine: Engine
    store: Store
    signer: Signer
    renderer: Renderer
    histories: Histories
    snapshots: Snapshots
    pool_reports: PoolReports

    def history(self, learner_id: str) -> History:
        """The learner's History as it is now in the store: the one this worker kept, extended
        by what was appended since (one indexed query, which returns nothing when nothing
        was); for a learner this worker has not kept, the database's snapshot extended so."""
        kept = self.histories.kept(learner_id)
        if kept is None:
            history = self.snapshots.read(learner_id)
        else:
            history = self.store.read(learner_id, kept)
        self.histories.keep(learner_id, history)
        return history

    def appended(self, learner_id: str, before: History, after: History) -> None:
        """Keep the History an append of this worker made (`before` it, `after` it) here, and
        in the database when it is due there (store.snapshots.due)."""
        self.histories.keep(learner_id, after)
        if due(before, after):
            self.snapshots.keep(learner_id, after)

    def recording(self) -> RecordingStatus:
        """The recording, or why it cannot be used (reader.recording_snapshot: cached per
        path, a change noticed by stat and by content)."""
        return self.recording_snapshot().status

    def recording_snapshot(self) -> reader.RecordingSnapshot:
        """The recording with the digest of the bytes it was read from (what a gate_closed
        event records)."""
        return reader.recording_snapshot(self.settings.recording_path)

    def record_closing(
        self, learner_id: str, state: LessonState, snapshot: reader.RecordingSnapshot
    ) -> LessonState:
        """`state`, with the gate's closing recorded if the gate is closed and no gate_closed
        event holds it yet: a gate that closed before closings were recorded, or one that a
        new recording closed without a write of the learner's. Once recorded, the credit
        survives the next recording change. Decided on the learner's history like every
        once-only fact (Store.append_decided), so two pages loaded at once record it once.
        Costs nothing (no query) unless the gate is closed and unrecorded."""
        if not state.gate.closed or state.gate.closed_on is not None or snapshot.digest is None:
            return state
        digest, name = snapshot.digest, self.settings.recording_path.name

        def decide(history: History) -> list[tuple[EventKind, dict[str, Any]]]:
            closing = close_gate(self.state_from(history, snapshot.status), digest, name)
            return [closing] if closing is not None else []

        kept = self.histories.kept(learner_id)
        history, appended = self.store.append_decided(
            learner_id, decide, kept if kept is not None else self.snapshots.read(learner_id)
        )
        decided_on = history
        history = history.extended(appended, appended[-1].id if appended else 0)
        if appended:
            self.appended(learner_id, decided_on, history)
        else:
            self.histories.keep(learner_id, history)
        return self.kept_state(learner_id, history, snapshot.status)

    def state_of(self, learner_id: str, status: RecordingStatus | None = None) -> LessonState:
        """The learner's state, derived from their History and the recording."""
        return self.kept_state(learner_id, self.history(learner_id), status)

    def kept_state(
        self, learner_id: str, history: History, status: RecordingStatus | None = None
    ) -> LessonState:
        """The state `history` (the learner's kept one) derives to: the one kept with it when
        it was derived before with the same recording, else derived now and kept."""
        status = status if status is not None else self.recording()
        state = self.histories.derived(learner_id, history, status)
        if state is None:
            state = self.state_from(history, status)
            self.histories.remember(learner_id, history, status, state)
        return state

    def state_from(self, history: History, status: RecordingStatus | None = None) -> LessonState:
        """The state a History derives to, with the recording as it is now (or `status`)."""
        return derive(
            history,
            self.lesson,
            recording=learner_facts(
                status if status is not None else self.recording(), self.lesson
            ),
            dev_prerequisite_done=self.settings.dev_prerequisite_done,
        )

    def page_view(
        self,
        learner_id: str,
        state: LessonState,
        status: RecordingStatus,
        *,
        eps_on: bool = True,
        own_row_text: str | None = None,
        player_row: str | None = None,
        refusal: Refusal | None = None,
        aggregate: bool = True,
    ) -> PageView:
        """Everything one render of the page needs, the recording's views and (once the
        learner has committed) how the learners of their pool predicted included (their course's,
        or outside an LMS everyone's who came outside one). `aggregate=False` leaves
        that out, for answers that re-render no region showing it: it reads every learner's
        predictions, the one query here whose cost grows with the course."""
        view = build_page_view(
            self.lesson,
            state,
            learner_id,
            eps_on=eps_on,
            own_row_text=own_row_text,
            refusal=refusal,
            player_row=player_row,
            recording=status if isinstance(status, Recording) else None,
            recording_file=self.settings.recording_path.name,
            counts=(
                # The learner's course, when an LMS launched them from one, is their pool.
                self.store.prediction_counts(latest_course(self.engine, learner_id))
                if aggregate and state.prediction is not None
                else None
            ),
            csrf_token=form_token(self.settings.secret_key, learner_id),
            sweep_line=self.sweep_line(state, status),
        )
        if not state.gate.closed:
            return view
        # The lab's panel lists the runs the learner kept (one query, once the gate closed).
        runs = lab_runs(self.store.read(learner_id, EventList()).events)
        return dataclasses.replace(view, lab_lines=tuple(run_line(self.lesson, r) for r in runs))

    def sweep_line(self, state: LessonState, status: RecordingStatus) -> str | None:
        """The compare section's line about other depths, once the gate has closed and both
        single-component rows have played (before then, "at other depths your prediction is
        what happens" would tell the depth's own answer unseen), and when the sweep beside the
        recording bears the learner's prediction out elsewhere (the sweep is read then, cached
        by its stat; never before the gate closes)."""
        if not (state.gate.closed and state.compare.revealed) or not isinstance(status, Recording):
            return None
        sweep = sweep_status(sweep_path_for(self.settings.recording_path))
        if isinstance(sweep, reader.RecordingProblem):
            return None
        return compare_line(
            sweep,
            self.lesson,
            state.prediction,
            depth=status.config.depth,
            init=status.config.init,
            agrees=state.compare.opening_verdict == "agrees",
        )


def services(request: Request) -> Services:
    return cast(Services, request.app.state.services)
