"""Derived state: everything the page shows is a pure function of a learner's events
(and the recording). Nothing here touches the database or the web.

    progress/events.py:  EventKind, Event: their one home (normdive.store depends on this
                         package, never the reverse)
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
                             save_takeaway(state, lesson, text, base) (base: the saved text
                                 the form was drawn from; a newer one is not saved over)
                             predict_row(state, lesson, row, outcome)
                             play_row(state, lesson, row)
                             open_hint(state, lesson, rung) -> Action | None (None: already
                                 open, nothing to append; answer as a success)
                         and close_gate(state, recording_digest, recording_file), the
                         gate_closed event a write (or a page view) records once the gate is
                         closed; rung_number, unknown_row_message and too_long_message are
                         the one source of those rules and messages for the web layer too

The ablation, one concept per module, all pure:
    progress/facts.py:     RecordingFacts, RowFacts (re-exported by state.py);
                           recording_facts(Runs | RecordingProblem) -> RecordingFacts,
                           recording_facts_at(path) -> RecordingFacts (never raise)
    progress/ablation.py:  row_band, band_texts, which_recovers_more -> Recovery | None,
                           best_row, fold_ablation -> AblationState (RowState, RowResult,
                           OutcomeOption)           -> LessonState.ablation
    progress/hints.py:     fold_hints -> HintsState (HintRungState), answer_text
                                                    -> LessonState.hints
    progress/compare.py:   compare -> CompareState (CompareRow), takeaway_line
                                                    -> LessonState.compare,
                                                       LessonState.takeaway_default
    progress/aggregate.py: PredictionCounts (from Store.prediction_counts()),
                           aggregate(counts, lesson) -> AggregateView (QuestionView, ShareView)
    progress/figures.py:   percent, exact_percent, loss, share (how figures read)
"""
