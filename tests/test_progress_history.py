"""History: a learner's events folded once, extended by newer ones.

Properties on random event sequences (Hypothesis), kinds and payloads drawn from what the app
writes and from what it never writes (unknown fields and rows, bad verdicts, rungs as text):
- extending a History by the rest of the events, in any number of steps, gives exactly the
  History of the whole list (what a server keeps per learner and extends per request), also
  when each step's History is first kept as JSON and read back (what the database keeps);
- the state derived from it equals a naive reference written here from the rules in
  progress/state.py, progress/ablation.py and progress/hints.py, which re-reads the whole
  event list for every fact.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from lesson_answers import LESSON
from normdive.progress.events import Event, EventKind
from normdive.progress.history import History
from normdive.progress.state import RecordingFacts, count_evaluated_runs, derive

LEARNER = "0123456789abcdef0123456789abcdef"
MOMENT = datetime(2025, 1, 1, tzinfo=UTC)
FIELDS = [field.id for field in LESSON.number_fields]
ROWS = [row.key for row in LESSON.rows]
OUTCOMES = [outcome.id for outcome in LESSON.outcomes]
READINGS = [choice.id for choice in LESSON.reading.choices]
PREDICTIONS = list(LESSON.components)
FOUR_ROWS = RecordingFacts(problem=None, row_keys=tuple(ROWS), best_row=ROWS[0])
THREE_ROWS = RecordingFacts(problem=None, row_keys=tuple(ROWS[:3]), best_row=ROWS[1])
UNUSABLE = RecordingFacts(problem="The recording cannot be read.")

entries = st.fixed_dictionaries(
    {
        "field": st.sampled_from([*FIELDS, "not_a_field"]),
        "raw": st.sampled_from(["1", "2.5", "abc", "0.5"]),
        "verdict": st.sampled_from(["right", "wrong", "format_error", "guessed"]),
        "slip": st.sampled_from([None, "sample_variance", "unknown_slip"]),
        "message": st.sampled_from([None, "Type a number."]),
    }
)
payloads: dict[EventKind, st.SearchStrategy[dict[str, Any]]] = {
    EventKind.PREREQUISITE_DONE: st.just({"source": "operator"}),
    EventKind.PREDICTION_COMMITTED: st.fixed_dictionaries(
        {"choice": st.sampled_from([*PREDICTIONS, "both"])}
    ),
    EventKind.NUMBERS_CHECKED: st.fixed_dictionaries({"answers": st.lists(entries, max_size=4)}),
    EventKind.READING_LOCKED: st.builds(
        lambda choice, right: {"choice": choice, "right": right},
        st.sampled_from(READINGS),
        st.booleans(),
    ),
    EventKind.TAKEAWAY_SAVED: st.fixed_dictionaries({"text": st.sampled_from(["", "mine", "x"])}),
    EventKind.ROW_PREDICTED: st.fixed_dictionaries(
        {
            "row": st.sampled_from([*ROWS, "no_such_row"]),
            "outcome": st.sampled_from([*OUTCOMES, "wins"]),
        }
    ),
    EventKind.ROW_PLAYED: st.fixed_dictionaries({"row": st.sampled_from([*ROWS, "no_such_row"])}),
    EventKind.HINT_OPENED: st.fixed_dictionaries({"rung": st.sampled_from([1, 2, "1", 3])}),
    EventKind.GATE_CLOSED: st.fixed_dictionaries(
        {"recording_digest": st.sampled_from(["a" * 64, "b" * 64]), "recording_file": st.just("r")}
    ),
    # The lab's events count as the learner's writes and change nothing else the fold keeps.
    EventKind.LAB_COMMITTED: st.fixed_dictionaries(
        {"run": st.integers(1, 3), "config": st.just({}), "outcome": st.sampled_from(OUTCOMES)}
    ),
    EventKind.LAB_FINISHED: st.fixed_dictionaries(
        {"run": st.integers(1, 3), "outcome": st.sampled_from(OUTCOMES)}
    ),
    EventKind.RERUN_ROW_FINISHED: st.fixed_dictionaries(
        {
            "rerun": st.integers(1, 3),
            "row": st.sampled_from(ROWS),
            "outcome": st.sampled_from(OUTCOMES),
        }
    ),
}
specs = st.sampled_from(list(EventKind)).flatmap(
    lambda kind: payloads[kind].map(lambda payload: (kind, payload))
)

# The ablation's order rule and first plays turn on which row was predicted just before or
# after a play: sequences of mostly valid row predictions and plays find those edges.
ablation_specs = st.one_of(
    st.tuples(
        st.just(EventKind.ROW_PREDICTED),
        st.fixed_dictionaries({"row": st.sampled_from(ROWS), "outcome": st.sampled_from(OUTCOMES)}),
    ),
    st.tuples(st.just(EventKind.ROW_PLAYED), st.fixed_dictionaries({"row": st.sampled_from(ROWS)})),
)
histories = st.one_of(st.lists(specs, max_size=40), st.lists(ablation_specs, max_size=12))


def as_events(drawn: list[tuple[EventKind, dict[str, Any]]]) -> list[Event]:
    """Events with server times that mostly rise and sometimes step back (clocks do), to the
    microsecond."""
    return [
        Event(i, LEARNER, kind, p, MOMENT + timedelta(seconds=(i * 7919) % 13, microseconds=i))
        for i, (kind, p) in enumerate(drawn, 1)
    ]


def kept_and_read_back(history: History) -> History:
    """What the database keeps of a History (its JSON text), read back on the same lesson."""
    text = json.dumps(history.to_json())
    return History.from_json(json.loads(text), History.start(LESSON))


@given(histories, st.lists(st.integers(0, 40), max_size=4), st.booleans())
def test_extending_step_by_step_equals_folding_the_whole_list(
    drawn: list[tuple[EventKind, dict[str, Any]]], cuts: list[int], through_json: bool
) -> None:
    events = as_events(drawn)
    whole = History.of(events, LESSON)
    history = History.start(LESSON)
    bounds = sorted({0, *(min(cut, len(events)) for cut in cuts), len(events)})
    for low, high in itertools.pairwise(bounds):
        part = events[low:high]
        if through_json:
            history = kept_and_read_back(history)
        history = history.extended(part, part[-1].id if part else history.last_event_id)
    assert history == whole
    assert kept_and_read_back(whole) == whole
    assert history.last_event_id == (events[-1].id if events else 0)


def test_events_of_unknown_kinds_move_the_last_id_on() -> None:
    events = as_events([(EventKind.TAKEAWAY_SAVED, {"text": "a"})])
    history = History.of(events, LESSON).extended([], 7)
    assert history.last_event_id == 7 and history.takeaway == "a"
    assert history.extended([], 3) is history  # an older id changes nothing


# --- a naive reference: every fact re-read from the whole list --------------------------------


def reference(events: list[Event], recording: RecordingFacts) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for field_id in FIELDS:
        attempts, landed, last, last_graded = 0, False, None, None
        for event in events:
            if event.kind is not EventKind.NUMBERS_CHECKED:
                continue
            for entry in event.payload["answers"]:
                if entry["field"] != field_id or landed:
                    continue
                if entry["verdict"] not in ("right", "wrong", "format_error"):
                    continue
                graded = entry["verdict"] in ("right", "wrong")
                attempts += graded
                last = entry
                if graded:
                    last_graded = entry["raw"]
                landed = entry["verdict"] == "right"
        facts[field_id] = (attempts, landed, last and last["raw"], last_graded)
    commits = [e for e in events if e.kind is EventKind.PREDICTION_COMMITTED]
    facts["prediction"] = commits[0].payload["choice"] if commits else None
    locks: list[Event] = []
    for event in events:
        if event.kind is EventKind.READING_LOCKED and not any(e.payload["right"] for e in locks):
            locks.append(event)
    facts["reading"] = (
        locks[-1].payload["choice"] if locks else None,
        any(e.payload["right"] for e in locks),
        len(locks),
    )
    saved = [e for e in events if e.kind is EventKind.TAKEAWAY_SAVED]
    facts["takeaway"] = saved[-1].payload["text"] if saved else None
    facts["runs"] = count_evaluated_runs(events)
    facts["rungs"] = {
        e.payload["rung"]
        for e in events
        if e.kind is EventKind.HINT_OPENED and type(e.payload["rung"]) is int
    }
    usable = recording.problem is None
    keys = [k for k in ROWS if k in recording.row_keys] if usable else ROWS
    total = len(recording.row_keys) if usable else 0
    predictions: dict[str, str] = {}
    plays: dict[str, int] = {}
    order: list[str] = []
    before_play = True
    for event in events:
        row = event.payload.get("row")
        if event.kind is EventKind.ROW_PREDICTED:
            if row in keys and row not in predictions and event.payload["outcome"] in OUTCOMES:
                predictions[row] = event.payload["outcome"]
        elif event.kind is EventKind.ROW_PLAYED:
            before_play = before_play and len(predictions) >= total
            if row in keys:
                plays[row] = plays.get(row, 0) + 1
                if row not in order:
                    order.append(row)
    facts["rows"] = (predictions, plays, tuple(order), before_play)
    closings = [e for e in events if e.kind is EventKind.GATE_CLOSED]
    facts["closed_on"] = closings[0].payload["recording_digest"] if closings else None
    return facts


def derived_facts(events: list[Event], recording: RecordingFacts) -> dict[str, Any]:
    state = derive(
        History.of(events, LESSON), LESSON, recording=recording, dev_prerequisite_done=False
    )
    facts: dict[str, Any] = {
        field_id: (f.attempts, f.landed, f.last_raw, f.last_graded_raw)
        for field_id, f in state.fields.items()
    }
    facts["prediction"] = state.prediction
    facts["reading"] = (state.reading.locked_choice, state.reading.right, state.reading.locks)
    facts["takeaway"] = state.takeaway
    facts["runs"] = state.evaluated_runs
    facts["rungs"] = {rung.rung for rung in state.hints.rungs if rung.opened}
    ablation = state.ablation
    facts["rows"] = (
        {row.key: row.prediction for row in ablation.rows if row.prediction is not None},
        {row.key: row.plays for row in ablation.rows if row.plays},
        ablation.play_order,
        ablation.predictions_before_play,
    )
    closed = state.gate.closed_on
    facts["closed_on"] = closed.recording_digest if closed is not None else None
    return facts


# The order rule's edge: the last row predicted just after the first play, and just before.
PREDICTED = [(EventKind.ROW_PREDICTED, {"row": row, "outcome": OUTCOMES[0]}) for row in ROWS]
PLAYED = (EventKind.ROW_PLAYED, {"row": ROWS[0]})


@example([*PREDICTED[:3], PLAYED, PREDICTED[3], PLAYED], FOUR_ROWS)
@example([*PREDICTED, PLAYED, PLAYED], FOUR_ROWS)
@given(histories, st.sampled_from([FOUR_ROWS, THREE_ROWS, UNUSABLE]))
def test_the_derived_state_equals_the_naive_reference(
    drawn: list[tuple[EventKind, dict[str, Any]]], recording: RecordingFacts
) -> None:
    events = as_events(drawn)
    expected = reference(events, recording)
    # The lesson knows only its own rungs; the reference keeps every int it saw.
    expected["rungs"] &= set(range(1, len(LESSON.hints.rungs) + 1))
    assert derived_facts(events, recording) == expected


@given(
    histories,
    specs,
    st.sampled_from([FOUR_ROWS, THREE_ROWS, UNUSABLE]),
    st.booleans(),
)
def test_the_state_after_an_event_does_not_depend_on_its_id_or_time(
    drawn: list[tuple[EventKind, dict[str, Any]]],
    last: tuple[EventKind, dict[str, Any]],
    recording: RecordingFacts,
    prerequisite_done: bool,
) -> None:
    # The server decides a write on the state after the event as it would be appended (no id,
    # its own clock), answers with that state and keeps it with the History the stored event
    # made (web.infrastructure.services.Histories): the two must derive alike.
    events = as_events(drawn)
    before = History.of(events, LESSON)
    kind, payload = last
    stored = Event(len(events) + 5, LEARNER, kind, payload, MOMENT - timedelta(days=3))
    provisional = Event(0, "", kind, payload, datetime.now(UTC))

    def state(history: History) -> Any:
        return derive(history, LESSON, recording=recording, dev_prerequisite_done=prerequisite_done)

    assert state(before.extended([provisional], before.last_event_id)) == state(
        before.extended([stored], stored.id)
    )
