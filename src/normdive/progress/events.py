"""The kinds of event a learner's history holds, and one event as read back from the store.

Defined here, with the functions that derive state from them, so that the store depends on
progress and not the other way round (numeric <- lesson <- progress <- store <- web). This is
the one home of both names: import them from here.

Payloads, by kind (what normdive.progress.actions builds and derive reads):
    prerequisite_done     {"source": "host" | "operator" | "lti_platform" | "lti_staff" |
                           "lti_custom"}
    prediction_committed  {"choice": <predict choice id>}
    numbers_checked       {"answers": [{"field", "raw", "parsed" (canonical text or null),
                            "verdict" ("right" | "wrong" | "format_error"), "slip" (or null),
                            and for a format error "problem": {"code" (a FormatCode of
                            numeric.answers), "args" (its arguments)}}]}
                          (an older history holds "message", the format error worded in the
                          language of the page that checked, instead of "problem": read as
                          progress.state._format_message says)
    reading_locked        {"choice": <reading choice id>, "right": bool}
    takeaway_saved        {"text": str}
    row_predicted         {"row": <recording row key>, "outcome": "learns" | "partial" | "chance"}
    row_played            {"row": <recording row key>}   (a row's first play is a run)
    hint_opened           {"rung": 1 | 2}                (free: never a run)
    gate_closed           {"recording_digest": <sha256 of the recording file's bytes, hex>,
                           "recording_file": <its file name>}
                          appended once, with the write that first closes the gate. Once
                          there, the gate is closed for good, whatever recording is served
                          afterwards (one where another row is best, or none): the credit stays,
                          and the page says which recording it was earned on.
    lab_committed         {"run": <1-based number of the learner's lab run>,
                           "config": {"depth", "layernorm", "residual", "eps" (number or
                           null when layer norm is off), "init", "seed"},
                           "outcome": "learns" | "partial" | "chance"}
                          (progress.lab: once per run, before it trains; never changed)
    lab_finished          {"run", "final": {"step", "heldout_loss", "heldout_accuracy"},
                           "curve": [{"step", "train_loss", "heldout_loss",
                           "heldout_accuracy"}], "outcome": <the band the final accuracy
                           is in>}   (figures: numbers, or "nan" / "inf" / "-inf" / null)
    rerun_row_finished    {"rerun": <1-based number of the learner's re-run of the ablation>,
                           "row": <recording row key>, "config": as lab_committed's,
                           "final", "curve", "outcome": as lab_finished's}
                          (progress.rerun: once per row of a re-run, in the lesson's row order)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    PREREQUISITE_DONE = "prerequisite_done"
    PREDICTION_COMMITTED = "prediction_committed"
    NUMBERS_CHECKED = "numbers_checked"
    READING_LOCKED = "reading_locked"
    TAKEAWAY_SAVED = "takeaway_saved"
    ROW_PREDICTED = "row_predicted"
    ROW_PLAYED = "row_played"
    HINT_OPENED = "hint_opened"
    GATE_CLOSED = "gate_closed"
    LAB_COMMITTED = "lab_committed"
    LAB_FINISHED = "lab_finished"
    RERUN_ROW_FINISHED = "rerun_row_finished"


@dataclass(frozen=True)
class Event:
    id: int
    learner_id: str
    kind: EventKind
    payload: dict[str, Any]
    created_at: datetime  # server time, UTC
