"""The kinds of event a learner's history holds, and one event as read back from the store.
Their one home: the store imports them from progress, never the reverse."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    """Payloads above each kind; a figure is a number or "nan" / "inf" / "-inf" / null."""

    # {"source": "host" | "operator" | "lti_platform" | "lti_staff" | "lti_custom"}
    PREREQUISITE_DONE = "prerequisite_done"
    # {"choice": predict choice id}
    PREDICTION_COMMITTED = "prediction_committed"
    # {"answers": [{field, raw, parsed, verdict (state.Verdict), slip, problem: {code, args}}]}
    NUMBERS_CHECKED = "numbers_checked"
    # {"choice": reading choice id, "right": bool}
    READING_LOCKED = "reading_locked"
    # {"text": str}
    TAKEAWAY_SAVED = "takeaway_saved"
    # {"row": row key, "outcome": "learns" | "partial" | "chance"}
    ROW_PREDICTED = "row_predicted"
    # {"row": row key}; a row's first play is a run
    ROW_PLAYED = "row_played"
    # {"rung": 1 | 2}; free, never a run
    HINT_OPENED = "hint_opened"
    # {"recording_digest": sha256 hex of its bytes, "recording_file": name}; once, for good
    GATE_CLOSED = "gate_closed"
    # {"run": 1-based, "config": lab.LabChoice.to_json(), "outcome": predicted}; once, untrained
    LAB_COMMITTED = "lab_committed"
    # {"run", "final": {lab.FINAL_FIELDS}, "curve": [{lab.CURVE_FIELDS}], "outcome": its band}
    LAB_FINISHED = "lab_finished"
    # {"rerun": 1-based, "row", "config", "final", "curve", "outcome"}; once per row, in order
    RERUN_ROW_FINISHED = "rerun_row_finished"


@dataclass(frozen=True)
class Event:
    id: int
    learner_id: str
    kind: EventKind
    payload: dict[str, Any]
    created_at: datetime  # server time, UTC
