"""Derived state: everything the page shows is a pure function of a learner's events and the
recording; nothing here touches the database or the web. events.py holds the event kinds,
history.py folds events, state.py derives the page's LessonState from the fold, and actions.py
(lab.py, rerun.py) turns a learner's action into the event to append or a refusal."""
