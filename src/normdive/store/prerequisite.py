"""Recording that a learner finished lesson 8.5, which opens D9 to them.

The host platform reports it over HTTP (`POST /api/prerequisite`) and an operator records it
with `normdive prerequisite done`; both go through `record_prerequisite_done`, which appends
the event only when the learner's history does not hold one yet.
"""

from __future__ import annotations

from enum import StrEnum

from normdive.progress.events import EventKind
from normdive.store.event_store import Decision, EventList, Store


class PrerequisiteSource(StrEnum):
    """Who reported it: the prerequisite_done event's `source`."""

    HOST = "host"
    OPERATOR = "operator"
    # An LTI launch (normdive.lti.learners): the platform gates the lesson itself, or a staff
    # role passed the lock, or the launch's custom parameter said 8.5 is done.
    LTI_PLATFORM = "lti_platform"
    LTI_STAFF = "lti_staff"
    LTI_CUSTOM = "lti_custom"


def record_prerequisite_done(store: Store, learner_id: str, source: PrerequisiteSource) -> bool:
    """Append prerequisite_done for the learner unless their history already has one.
    Returns True when it was already recorded (nothing appended). A learner not stored yet is
    stored. Raises UnknownLearner for text that is not a learner id."""
    # A learner is stored by their first write, and the locked page a learner waits on takes
    # none: the report stores them (only a holder of the host token or an operator gets here).
    store.ensure_learner(learner_id)

    def decide(history: EventList) -> Decision:
        if any(event.kind is EventKind.PREREQUISITE_DONE for event in history.events):
            return []
        return [(EventKind.PREREQUISITE_DONE, {"source": source.value})]

    # Once under any concurrency, as every once-only fact: appended only on the history it was
    # decided on (Store.append_decided).
    _, appended = store.append_decided(learner_id, decide, EventList())
    return not appended
