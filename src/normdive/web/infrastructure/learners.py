"""One owner for a learner's read and write: every route that reads a learner's progress or
appends to it goes through here, and none keeps the caches in step by hand.

    Learners(...).read(learner_id) -> Read        the History, the recording, the state; the
                                                  gate's closing recorded when it is due
    .write(learner_id, act, address=) -> Written  one form of the page: throttled, decided and
                                                  appended once (Store.append_decided), the
                                                  learner stored on their first accepted write
    .write_lab(learner_id, decide) -> LabWritten  one lab write, decided on the lab's runs
    .write_rerun(learner_id, decide) -> RerunWritten  one re-run write, decided on the
                                                  learner's re-runs of the ablation

What is kept, and why it never shows: each learner's latest History on this worker (Histories)
with the state it derived to, and in the database every SNAPSHOT_EVERY_EVENTS events their
snapshot (store.snapshots). Each is only a starting point that a read extends by the events
appended since, wherever they were appended.

The recording's problems are written for a course author and name the server's paths. A
learner reads the lesson's sentence for the reader's reason code instead
(Lesson.recording_problems); the author's message goes to the log, once per distinct problem.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from sqlalchemy import Engine

from normdive.config import Settings
from normdive.i18n.catalogues import current_locale
from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.progress.actions import Action, ActionRefused, Conflict, Invalid, close_gate
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import RecordingFacts, recording_facts
from normdive.progress.history import History
from normdive.progress.lab import LabRun, lab_runs
from normdive.progress.rerun import Rerun, reruns
from normdive.progress.state import LessonState, derive
from normdive.recording import reader
from normdive.recording.runs import Runs
from normdive.store.event_store import EventList, Store, storable
from normdive.store.snapshots import Snapshots, due
from normdive.web.infrastructure.admission import admitted
from normdive.web.security.ratelimit import Throttled, TooManyLearners, throttled

logger = logging.getLogger(__name__)

# The reason recording_facts gives when a readable file lacks a row (the only problem it adds
# to what the reader says).
ROWS_MISSING_REASON = "no_ablation_rows"

RecordingStatus = Runs | reader.RecordingProblem

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
    state is kept here for a History without events: every visitor without a cookie has one
    (Learners keeps the one state they all share). Thread-safe."""

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


# A form's decision on the learner's state: the event to append, or None when there is
# nothing to append and the action still succeeded (a hint already open). Raises Conflict /
# Invalid (then nothing is appended).
Act = Callable[[LessonState], Action | None]
# A lab write's decision on the learner's lab runs (progress.lab): the event to append.
LabDecide = Callable[[tuple[LabRun, ...]], Action]
# A re-run write's decision on the learner's re-runs (progress.rerun): the event to append.
RerunDecide = Callable[[tuple[Rerun, ...]], Action]
# What the writes after the gate decide on, folded from the learner's events: their lab runs
# or their re-runs.
Folded = TypeVar("Folded")
# Why a write appended nothing: what the learner sent does not fit (Conflict, 409) or cannot
# be used (Invalid, 422), the learner is past the writes a minute allows (Throttled), or their
# address started too many learners lately (TooManyLearners, a learner's first write only).
Refused = ActionRefused | Throttled | TooManyLearners


def refusal_status(refused: Refused) -> int:
    """The HTTP status of a refused write: 429 for the limits, 422 for what cannot be used,
    409 for what does not fit the learner's progress (Conflict, and any other refusal)."""
    match refused:
        case Throttled() | TooManyLearners():
            return 429
        case Invalid():
            return 422
        case _:
            return 409


def retry_headers(refused: Refused | None) -> dict[str, str]:
    """Retry-After, for a refusal by one of the limits."""
    if isinstance(refused, Throttled | TooManyLearners):
        return {"Retry-After": str(refused.retry_after_s)}
    return {}


@dataclass(frozen=True)
class Read:
    """A learner as they are now: their History, the recording served, and the state they
    derive to with it."""

    history: History
    snapshot: reader.RecordingSnapshot
    state: LessonState

    @property
    def status(self) -> RecordingStatus:
        return self.snapshot.status


@dataclass(frozen=True)
class Written:
    """What one form's write did. `before`: the state it was decided on (the one a refusal is
    shown with); `state`: the state after it (`before` when refused or when nothing was
    appended); `outcome`: the form's own event (None: refused, or nothing to append);
    `closed_gate`: this write met the gate's last condition."""

    status: RecordingStatus
    before: LessonState
    state: LessonState
    outcome: Action | None = None
    refused: Refused | None = None
    closed_gate: bool = False


@dataclass(frozen=True)
class AfterGateWritten(Generic[Folded]):
    """What one write after the gate did (a lab run's or a re-run's): what the learner's
    events fold to after it (those decided on when it was refused), and why it was refused,
    if it was."""

    runs: Folded
    refused: Refused | None = None


LabWritten = AfterGateWritten[tuple[LabRun, ...]]
RerunWritten = AfterGateWritten[tuple[Rerun, ...]]


def _provisional(action: Action) -> Event:
    """An event as it will be stored, to derive the state after it: its payload as the store
    keeps it (event_store.storable), because the fold reads the kind, the payload and the
    order, never the id or the time."""
    kind, payload = action
    return Event(0, "", kind, storable(payload), datetime.now(UTC))


class _Decider:
    """Decides one form's write from a learner's History: the form's event, and gate_closed
    when this write closes the gate. Keeps the state before and after its last decision
    (Store.append_decided may call it again after losing a race); called again with the very
    History it last decided on (a first write, decided before the learner is stored), it
    answers the same without deciding again."""

    def __init__(
        self, learners: Learners, learner_id: str, act: Act, snapshot: reader.RecordingSnapshot
    ) -> None:
        self.learners, self.learner_id, self.act = learners, learner_id, act
        self.snapshot = snapshot
        self.before: LessonState | None = None
        self.after: LessonState | None = None
        self.outcome: Action | None = None
        self._decided: tuple[History, list[Action]] | None = None

    def __call__(self, history: History) -> list[Action]:
        if self._decided is not None and self._decided[0] is history:
            return self._decided[1]
        learners, status = self.learners, self.snapshot.status
        self._decided, self.outcome, self.after = None, None, None
        self.before = learners.state(self.learner_id, history, status)
        self.outcome = self.act(self.before)
        if self.outcome is None:
            self.after = self.before
        else:
            provisional = history.extended([_provisional(self.outcome)], history.last_event_id)
            self.after = learners.state_from(provisional, status)
        closing = close_gate(self.after, self.snapshot.digest, learners.recording_file)
        decided = [self.outcome] if self.outcome is not None else []
        events = [*decided, closing] if closing is not None else decided
        self._decided = (history, events)
        return events

    def state_after(self, history: History, appended: list[Event]) -> LessonState:
        """The state after the append: the one derived while deciding, unless a gate_closed
        event went with it (then derived again, once per learner)."""
        if self.after is not None and all(e.kind is not EventKind.GATE_CLOSED for e in appended):
            return self.after
        return self.learners.state_from(history, self.snapshot.status)

    def refused(self, refusal: Refused) -> Written:
        """The write refused after deciding: shown with the state it was decided on."""
        assert self.before is not None  # a refusal after deciding comes from deciding
        return Written(self.snapshot.status, self.before, self.before, refused=refusal)


@dataclass(frozen=True)
class Learners:
    """The read and write protocol over the store, this worker's Histories and the database's
    snapshots. Thread-safe: one instance serves every request of an app."""

    settings: Settings
    lesson: Lesson
    engine: Engine
    store: Store
    histories: Histories
    snapshots: Snapshots
    # The state every History without events derives to, with the recording it was derived
    # with: one per worker, not one per visitor (it names no learner).
    _start: list[tuple[RecordingStatus, LessonState]] = dataclasses.field(
        default_factory=list, compare=False, repr=False
    )

    @property
    def recording_file(self) -> str:
        return self.settings.recording_path.name

    def recording_snapshot(self) -> reader.RecordingSnapshot:
        """The recording with the digest of the bytes it was read from (what a gate_closed
        event records); reader.recording_snapshot caches it per path, a change noticed by
        stat and by content."""
        return reader.recording_snapshot(self.settings.recording_path)

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

    def state(self, learner_id: str, history: History, status: RecordingStatus) -> LessonState:
        """The state `history` (the learner's kept one) derives to: the one kept with it when
        it was derived before with the same recording, else derived now and kept."""
        if history.last_event_id == 0:
            return self._start_state(history, status)
        state = self.histories.derived(learner_id, history, status)
        # A state speaks one locale: one kept in another is derived again (and kept).
        if state is None or state.locale != current_locale():
            state = self.state_from(history, status)
            self.histories.remember(learner_id, history, status, state)
        return state

    def _start_state(self, history: History, status: RecordingStatus) -> LessonState:
        """The state of a History without events: the same for every such learner."""
        kept = self._start[-1] if self._start else None
        if kept is not None and kept[0] is status and kept[1].locale == current_locale():
            return kept[1]
        state = self.state_from(history, status)
        self._start[:] = [(status, state)]  # one item, replaced whole: safe across threads
        return state

    def state_from(self, history: History, status: RecordingStatus) -> LessonState:
        """The state a History derives to with the recording `status`."""
        return derive(
            history,
            self.lesson,
            recording=learner_facts(status, self.lesson),
            dev_prerequisite_done=self.settings.dev_prerequisite_done,
        )

    def read(self, learner_id: str) -> Read:
        """The learner now, with the gate's closing recorded if the gate is closed and no
        gate_closed event holds it yet: a gate that closed before closings were recorded, or
        one that a new recording closed without a write of the learner's. Once recorded, the
        credit survives the next recording change. Decided on the learner's history like
        every once-only fact (Store.append_decided), so two pages loaded at once record it
        once. Costs nothing (no query) unless the gate is closed and unrecorded."""
        snapshot = self.recording_snapshot()
        history = self.history(learner_id)
        state = self.state(learner_id, history, snapshot.status)
        if not state.gate.closed or state.gate.closed_on is not None or snapshot.digest is None:
            return Read(history, snapshot, state)
        digest = snapshot.digest

        def decide(current: History) -> list[Action]:
            state = self.state(learner_id, current, snapshot.status)
            closing = close_gate(state, digest, self.recording_file)
            return [closing] if closing is not None else []

        _, history, _ = self._append(learner_id, decide, history)
        return Read(history, snapshot, self.state(learner_id, history, snapshot.status))

    def write(self, learner_id: str, act: Act, *, address: str) -> Written:
        """Decide and append one form's write (`address`: the client's, for the new-learner
        limit). Read, decided and appended as one compare-and-append (Store.append_decided):
        a once-only fact is stored once however many requests race, and the state after is
        derived from the history the winning append extended."""
        history, snapshot = self.history(learner_id), self.recording_snapshot()
        decider = _Decider(self, learner_id, act, snapshot)
        held = self._held(learner_id, history, decider, address)
        if held is not None:
            return held
        try:
            _, after, appended = self._append(learner_id, decider, history)
        except ActionRefused as refusal:
            return decider.refused(refusal)
        state = decider.state_after(after, appended)
        # Kept with the History it belongs to: the learner's next request on this worker
        # derives nothing when nothing was appended in between.
        self.histories.remember(learner_id, after, snapshot.status, state)
        assert decider.before is not None  # set by the decision the append made
        closed = not decider.before.gate.closed and state.gate.closed
        return Written(snapshot.status, decider.before, state, decider.outcome, None, closed)

    def _held(
        self, learner_id: str, history: History, decider: _Decider, address: str
    ) -> Written | None:
        """The write refused before its append, or None when it may go on. A learner with no
        event yet (maybe not stored yet either) is decided first and stored only if the write
        is accepted: a refused one stores nothing, not even the learner, nor takes one of
        their address's new-learner places. Anyone else is held to the attempts limit."""
        if history.last_event_id == 0:
            try:
                decider(history)
            except ActionRefused as refusal:
                return decider.refused(refusal)
            limited = admitted(self.store, self.engine, self.settings, learner_id, address)
            return decider.refused(limited) if limited is not None else None
        throttle = self._throttled(learner_id, history)
        if throttle is None:
            return None
        state = self.state(learner_id, history, decider.snapshot.status)
        return Written(decider.snapshot.status, state, state, refused=throttle)

    def _throttled(self, learner_id: str, history: History) -> Throttled | None:
        limit = self.settings.attempts_per_minute
        if history.learner_writes < limit:
            return None  # fewer writes than the limit in all, so fewer within any minute
        return throttled(self.engine, learner_id, limit)

    def _append(
        self,
        learner_id: str,
        decide: Callable[[History], list[Action]],
        start: History,
    ) -> tuple[History, History, list[Event]]:
        """Store.append_decided from `start`, keeping what it read and wrote: this worker's
        History, and the database's snapshot when due (store.snapshots.due). Returns (the
        History decided on, the one after the append, the events appended)."""
        decided_on, appended = self.store.append_decided(learner_id, decide, start, just_read=True)
        after = decided_on.extended(appended, appended[-1].id) if appended else decided_on
        self.histories.keep(learner_id, after)
        if due(decided_on, after):
            self.snapshots.keep(learner_id, after)
        return decided_on, after, appended

    def write_lab(self, learner_id: str, decide: LabDecide) -> LabWritten:
        """Decide and append one lab write, once the learner's gate has closed, on their lab
        runs (the lab's events, which a History does not fold: read whole, as rare as lab
        writes are). Refused with the lesson's locked sentence (Conflict) before the gate
        closes, Throttled past the attempts limit, or with what `decide` raises. A learner
        whose gate closed has events, so is stored: no admission here."""
        return self._write_after_gate(learner_id, lab_runs, decide, lambda text: text.lab.locked)

    def write_rerun(self, learner_id: str, decide: RerunDecide) -> RerunWritten:
        """Decide and append one re-run write as write_lab does, on the learner's re-runs;
        refused (Conflict) until the gate has closed and every recorded row has played."""
        return self._write_after_gate(
            learner_id, reruns, decide, lambda text: text.rerun.locked, all_played=True
        )

    def _write_after_gate(
        self,
        learner_id: str,
        fold: Callable[[Iterable[Event]], Folded],
        decide: Callable[[Folded], Action],
        locked: Callable[[Lesson], str],
        all_played: bool = False,
    ) -> AfterGateWritten[Folded]:
        history = self.history(learner_id)
        status = self.recording_snapshot().status
        state = self.state(learner_id, history, status)
        refusal: Refused | None = None
        if not state.gate.closed:
            refusal = Conflict(locked(localized(self.lesson)))
        elif all_played and not state.ablation.all_played:
            refusal = Conflict(localized(self.lesson).rerun.not_played)
        else:
            refusal = self._throttled(learner_id, history)
        if refusal is not None:
            return AfterGateWritten(fold(self.store.read(learner_id, EventList()).events), refusal)
        seen: list[Folded] = []

        def decided(events: EventList) -> list[Action]:
            seen[:] = [fold(events.events)]
            return [decide(seen[0])]

        try:
            decided_on, appended = self.store.append_decided(learner_id, decided, EventList())
        except ActionRefused as refused:
            return AfterGateWritten(seen[0] if seen else fold(()), refused)
        return AfterGateWritten(fold((*decided_on.events, *appended)))
