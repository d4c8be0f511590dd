"""Derived state: everything the page shows is a pure function of a learner's events
(and the recording). Nothing here touches the database or the web.

CONTRACT (store helper):
    progress/events.py:  EventKind, Event (re-exported by normdive.store.events, which
                         depends on this package, never the reverse)
    progress/state.py:   derive(events, lesson, *, recording: RecordingFacts,
                                dev_prerequisite_done: bool) -> LessonState
                         count_evaluated_runs(events) -> int
    progress/actions.py: one function per learner action; each takes the current LessonState,
                         the Lesson and the raw input, and returns the event (kind, payload) to
                         append, or raises Conflict (HTTP 409) / Invalid (HTTP 422) with a
                         message a learner can read:
                             commit_prediction(state, lesson, choice)
                             check_numbers(state, lesson, answers: Mapping[str, str])
                             lock_reading(state, lesson, choice)
                             save_takeaway(state, lesson, text)
"""
