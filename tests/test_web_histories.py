"""Services keeps each learner's History between requests, extended by what was appended since.

What is kept must never show: one learner works through two workers of one deployment (two
apps on one database, as two processes would be) in a random order of random actions, one of
the workers restarts half-way (a new app: nothing kept but the database's snapshot), and after
every request both workers answer /api/state with exactly the state derived from scratch from
the learner's events in the store; so is the snapshot their writes kept in the database. The
kept History itself is dropped least recently used first, past its capacity.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from helpers import SettingsFactory, ablation_recording, write_recording
from lesson_answers import LESSON, RIGHT_NUMBERS
from normdive.progress.history import History
from normdive.store.snapshots import SNAPSHOT_EVERY_EVENTS
from normdive.store.tables import LearnerSnapshot
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.infrastructure.learners import Histories
from normdive.web.infrastructure.services import Services
from normdive.web.routes.pages import json_safe
from page_client import PageClient

pytestmark = pytest.mark.both_databases

ROWS = [row.key for row in LESSON.rows]
OUTCOMES = [outcome.id for outcome in LESSON.outcomes]
ACTIONS_PER_RUN = 40


def random_action(rng: random.Random) -> tuple[str, dict[str, str]]:
    """One form post a learner (or a script) might send, right, wrong or refused."""
    choice = rng.randrange(8)
    if choice == 0:
        return "/predict", {"choice": rng.choice([*LESSON.components, "both"])}
    if choice == 1:
        fields = rng.sample(sorted(RIGHT_NUMBERS), rng.randint(1, 3))
        return "/numbers", {
            # "2\x005": the store keeps a NUL as U+FFFD, and the state kept after the write
            # must be the stored event's.
            f: rng.choice([RIGHT_NUMBERS[f], "2.5", "abc", "2\x005", f"1.{rng.randrange(99)}"])
            for f in fields
        }
    if choice == 2:
        return "/reading", {"choice": rng.choice([c.id for c in LESSON.reading.choices])}
    if choice == 3:
        return "/takeaway", {"text": rng.choice(["", "mine", "layer norm rescales"])}
    if choice in (4, 5):
        return f"/rows/{rng.choice(ROWS)}/predict", {"outcome": rng.choice(OUTCOMES)}
    if choice == 6:
        return f"/rows/{rng.choice(ROWS)}/play", {}
    return f"/hints/{rng.choice(['1', '2'])}", {}


def state_from_scratch(svc: Services, learner_id: str) -> Any:
    """The learner's state derived from every event in the store, by a fresh fold."""
    events = svc.store.events_for(learner_id)
    state = svc.learners.state_from(History.of(events, svc.lesson), svc.recording())
    return json_safe(dataclasses.asdict(state))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_workers_and_a_restart_always_answer_the_fresh_fold(
    make_settings: SettingsFactory, tmp_path: Path, seed: int
) -> None:
    recording = write_recording(tmp_path, ablation_recording())
    settings = make_settings(recording_path=recording, attempts_per_minute=10_000)
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        scratch_app = create_app(settings)
        stack.callback(scratch_app.state.services.engine.dispose)
        scratch: Services = scratch_app.state.services

        def worker() -> PageClient:
            return stack.enter_context(PageClient(create_app(settings)))

        workers = [worker(), worker()]
        first = workers[0].get("/api/state").json()
        learner_id = first["learner_id"]
        cookie = workers[0].cookies[COOKIE_NAME]
        workers[1].cookies.set(COOKIE_NAME, cookie)
        for step in range(ACTIONS_PER_RUN):
            if step == ACTIONS_PER_RUN // 2:  # the second worker restarts: nothing kept
                workers[1] = worker()
                workers[1].cookies.set(COOKIE_NAME, cookie)
            path, form = random_action(rng)
            answer = rng.choice(workers).post(
                path, data=form, headers={"Accept": "application/json"}
            )
            assert answer.status_code in (200, 409, 422), (path, form, answer.text)
            expected = state_from_scratch(scratch, learner_id)
            for each in workers:
                assert each.get("/api/state").json()["state"] == expected, (step, path, form)
        # The snapshot the workers' writes kept in the database (what a worker that has not
        # seen the learner starts from) is the fold of the events up to its last id, fewer
        # than SNAPSHOT_EVERY_EVENTS behind, and extended by the rest it is the whole fold.
        events = scratch.store.events_for(learner_id)
        with scratch.engine.connect() as connection:
            body = connection.execute(
                select(LearnerSnapshot.body).where(LearnerSnapshot.learner_id == learner_id)
            ).scalar_one_or_none()
        kept = History.start(LESSON)
        if body is not None:
            kept = History.from_json(json.loads(body), kept)
        after = [event for event in events if event.id > kept.last_event_id]
        assert kept == History.of(events[: len(events) - len(after)], LESSON)
        assert len(after) < SNAPSHOT_EVERY_EVENTS
        assert kept.extended(after, events[-1].id if events else 0) == History.of(events, LESSON)


def test_kept_histories_drop_the_least_recently_used_past_capacity() -> None:
    histories = Histories(LESSON, capacity=2)
    start = histories.get("a")
    one = start.extended([], 1)
    histories.keep("a", one)
    histories.keep("b", start.extended([], 2))
    assert histories.get("a") is one  # "a" is now the most recently used
    histories.keep("c", start.extended([], 3))
    assert len(histories) == 2
    assert histories.get("b") is start  # dropped: a fresh start, read whole next time
    assert histories.get("a") is one


def test_an_older_history_never_replaces_a_newer_one() -> None:
    histories = Histories(LESSON)
    start = histories.get("a")
    newer = start.extended([], 5)
    histories.keep("a", newer)
    histories.keep("a", start.extended([], 4))
    assert histories.get("a") is newer


def test_a_kept_state_is_used_only_for_its_own_history_and_recording() -> None:
    histories = Histories(LESSON)
    start = histories.get("a")
    one, two = start.extended([], 1), start.extended([], 2)
    recording, other_recording = object(), object()
    state = object()
    histories.keep("a", one)
    histories.remember("a", one, recording, state)  # type: ignore[arg-type]
    assert histories.derived("a", one, recording) is state  # type: ignore[arg-type]
    assert histories.derived("a", one, other_recording) is None  # type: ignore[arg-type]
    assert histories.derived("a", start.extended([], 1), recording) is None  # type: ignore[arg-type]
    histories.keep("a", one)  # the same History again: its state stays
    assert histories.derived("a", one, recording) is state  # type: ignore[arg-type]
    histories.keep("a", two)  # a newer one: the state was the old one's
    assert histories.derived("a", two, recording) is None  # type: ignore[arg-type]
    histories.remember("a", one, recording, state)  # type: ignore[arg-type]  # not kept now
    assert histories.derived("a", one, recording) is None  # type: ignore[arg-type]
    histories.keep("b", start)
    histories.remember("b", start, recording, state)  # type: ignore[arg-type]
    assert histories.derived("b", start, recording) is None  # none for a History without events
