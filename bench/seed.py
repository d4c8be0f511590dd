"""Fill a progress store with N learners of E events each, written through normdive's Store:

    PYTHONPATH=src .venv/bin/python bench/seed.py sqlite:///var/seed.sqlite3 \\
        --learners 100000 --events 10 [--fast]

The database is migrated first (`normdive db upgrade`'s function). Seeded through the Store,
every learner's snapshot (learner_snapshots) is kept at the end, as the web app's writes keep
them; --fast keeps none (bench/instructor.py times the view that keeps them). Each learner's
history is what the page's own actions (normdive.progress.actions) decide, step by step on the
state derived from the history so far: the opening prediction, six numbers checked wrong, the
first row's three landing over two more checks (right after wrong), the first hint (its runs
reached), a wrong then the right reading, a takeaway, a prediction per ablation row and a play
of each; beyond that, more wrong checks of the second row, replays, the second hint and a
re-saved takeaway, until the learner has E events (a learner of 10 events stops partway through
the ablation's predictions). The second row never lands, so the gate stays open and POST /numbers
still grades (bench/load.py's simulated learners check it). HISTORY_VARIANTS histories per E are
built (different choices and wrong answers) and dealt round-robin.

Two ways to write, timed and printed:
- through the Store (default): per learner `Store.ensure_learner`, then one
  `Store.append_decided` whose decision is the whole history (one read of the empty history,
  one transaction of E inserts, the prediction tallies counted in it). The seeding engine
  turns off the wait for the disk on commit (SQLite synchronous=OFF, PostgreSQL
  synchronous_commit=off), on its own connections only:
  a seeded benchmark database needs no crash safety, and the server opens its own.
- --fast: bulk INSERTs into the Store's own SQLAlchemy tables (store.tables: Learner,
  EventRecord), payloads through the Store's `storable`, LEARNERS_PER_TRANSACTION learners per
  transaction. Same rows, written without the Store's per-learner read and checks.

How fast, 10 events per learner, on this 2-core machine shared with other work (load average
4-7), 2026-11-30: through the Store 92 learners/s on SQLite and 57 on PostgreSQL (so 100,000
learners take 18-30 minutes; bench/load.py --seed-dir keeps a seeded SQLite file for later
runs); --fast 2,529 learners/s on SQLite, 777 on PostgreSQL. --processes 2 was slower here on
both (32-67 learners/s: the writers wait for each other's locks). Building the histories of
1,000 events costs about 15 s (HISTORY_VARIANTS of them, each step derived).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import cycle
from typing import Any

from sqlalchemy import Engine, event, insert, select

from normdive.lesson.content import OUTCOME_IDS, load_lesson
from normdive.progress.actions import (
    Action,
    ActionRefused,
    check_numbers,
    commit_prediction,
    lock_reading,
    open_hint,
    play_row,
    predict_row,
    save_takeaway,
)
from normdive.progress.events import Event
from normdive.progress.facts import recording_facts_at
from normdive.progress.history import History
from normdive.progress.state import LessonState, derive
from normdive.store.db import make_engine, upgrade
from normdive.store.event_store import EventList, Store, new_learner_id, storable
from normdive.store.snapshots import Snapshots
from normdive.store.tables import EventRecord, Learner
from servers import SHIPPED_RECORDING

LESSON = load_lesson()
HISTORY_VARIANTS = 4
LEARNERS_PER_TRANSACTION = 1000  # --fast only
PROGRESS_EVERY_S = 10.0
# The first hand row's numbers as a learner types them, each within 0.001 of exact (rows
# [1, 2, 3]: mean 2, variance 2/3, sqrt(2/3 + eps)); the second row's are never typed right.
FIRST_ROW_RIGHT = {"row1_mean": "2", "row1_variance": "2/3", "row1_denominator": "0.8165"}
SECOND_ROW = ("row2_mean", "row2_variance", "row2_denominator")
TAKEAWAYS = (
    "The residual path carries the signal when layer norm is gone.",
    "Epsilon keeps the denominator away from zero on a flat row.",
)
ENGINE_NO_SYNC = {"sqlite": "PRAGMA synchronous=OFF", "postgresql": "SET synchronous_commit TO off"}


def _wrong(rng: random.Random) -> str:
    # 4.00 .. 9.99: wrong for all six fields (every right value is under 4).
    return f"{rng.randint(4, 9)}.{rng.randint(0, 99):02d}"


def _as_events(actions: list[Action]) -> list[Event]:
    moment = datetime.now(UTC)
    return [Event(i, "0" * 32, kind, payload, moment) for i, (kind, payload) in enumerate(actions)]


def build_history(count: int, rng: random.Random) -> list[Action]:
    """`count` events of one learner, each decided by the page's action on the state so far."""
    recording = recording_facts_at(SHIPPED_RECORDING)
    if recording.problem:
        sys.exit(f"the shipped recording cannot be used: {recording.problem}")
    actions: list[Action] = []

    def state_now() -> LessonState:
        return derive(_as_events(actions), LESSON, recording=recording, dev_prerequisite_done=True)

    def take(
        make: Callable[[LessonState], Action | None], state: LessonState | None = None
    ) -> None:
        if len(actions) >= count:
            return
        try:
            action = make(state or state_now())
        except ActionRefused:
            return  # not allowed yet (a hint before its runs), or an unchanged answer
        if action is not None:
            actions.append(action)

    choices = [choice.id for choice in LESSON.predict.choices]
    take(lambda s: commit_prediction(s, LESSON, rng.choice(choices)))
    all_wrong = {f.id: _wrong(rng) for f in LESSON.number_fields}
    take(lambda s: check_numbers(s, LESSON, all_wrong))
    two_right = {**FIRST_ROW_RIGHT, "row1_denominator": _wrong(rng)}
    take(lambda s: check_numbers(s, LESSON, two_right))
    take(lambda s: check_numbers(s, LESSON, FIRST_ROW_RIGHT))
    take(lambda s: open_hint(s, LESSON, 1))
    wrong_readings = [c.id for c in LESSON.reading.choices if not c.correct]
    right_reading = next(c.id for c in LESSON.reading.choices if c.correct)
    take(lambda s: lock_reading(s, LESSON, rng.choice(wrong_readings)))
    take(lambda s: lock_reading(s, LESSON, right_reading))
    take(lambda s: save_takeaway(s, LESSON, TAKEAWAYS[0]))
    for row in recording.row_keys:
        take(lambda s, row=row: predict_row(s, LESSON, row, rng.choice(OUTCOME_IDS)))
    for row in recording.row_keys:
        take(lambda s, row=row: play_row(s, LESSON, row))
    rows = cycle(recording.row_keys)
    while len(actions) < count:
        before = len(actions)
        # One derivation per round (deriving before every event makes a history of 1,000
        # events cost seconds): within a round the state is at most one check and one play
        # behind, which no action below depends on but the hint, and a hint the stale state
        # allows the fresh one allows too (runs only grow).
        state = state_now()
        wrong = {field: _wrong(rng) for field in rng.sample(SECOND_ROW, rng.randint(1, 3))}
        take(lambda s, wrong=wrong: check_numbers(s, LESSON, wrong), state)
        take(lambda s: play_row(s, LESSON, next(rows)), state)
        for rung in (1, 2):
            take(lambda s, rung=rung: open_hint(s, LESSON, rung), state)
        if rng.random() < 0.05:
            take(lambda s: save_takeaway(s, LESSON, rng.choice(TAKEAWAYS)), state)
        if len(actions) == before:
            raise RuntimeError("the seed history stopped growing: a lesson rule refuses it")
    final = derive(_as_events(actions), LESSON, recording=recording, dev_prerequisite_done=True)
    assert not final.gate.closed and not all(final.fields[f].landed for f in SECOND_ROW)
    return actions


@functools.cache
def histories(count: int, seed: int) -> tuple[tuple[Action, ...], ...]:
    rng = random.Random(seed)
    return tuple(tuple(build_history(count, rng)) for _ in range(HISTORY_VARIANTS))


def seeding_engine(url: str) -> Engine:
    """normdive's engine for `url`, its connections not waiting for the disk on commit."""
    engine = make_engine(url)
    statement = ENGINE_NO_SYNC[engine.dialect.name]

    def no_sync(dbapi_connection: Any, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(statement)
        cursor.close()
        if engine.dialect.name == "postgresql":
            dbapi_connection.commit()

    event.listen(engine, "connect", no_sync)
    return engine


def _progress(done: int, total: int, began: float, last: list[float]) -> None:
    now = time.perf_counter()
    if now - last[0] >= PROGRESS_EVERY_S:
        last[0] = now
        rate = done / (now - began)
        print(f"  seeded {done:,} / {total:,} learners ({rate:,.0f}/s)", file=sys.stderr)


def seed_through_store(engine: Engine, learners: int, events: int, seed: int) -> list[str]:
    store = Store(engine)
    ids: list[str] = []
    began, last = time.perf_counter(), [time.perf_counter()]
    for learner, history in zip(range(learners), cycle(histories(events, seed)), strict=False):
        learner_id = new_learner_id()
        store.ensure_learner(learner_id)
        _, appended = store.append_decided(learner_id, lambda _read, h=history: h, EventList())
        if len(appended) != events:
            raise RuntimeError(f"learner {learner}: {len(appended)} events stored, not {events}")
        ids.append(learner_id)
        _progress(learner + 1, learners, began, last)
    return ids


def seed_fast(engine: Engine, learners: int, events: int, seed: int) -> list[str]:
    variants = [[(kind.value, storable(p)) for kind, p in h] for h in histories(events, seed)]
    ids: list[str] = []
    began, last = time.perf_counter(), [time.perf_counter()]
    for first in range(0, learners, LEARNERS_PER_TRANSACTION):
        size = min(LEARNERS_PER_TRANSACTION, learners - first)
        batch = [new_learner_id() for _ in range(size)]
        rows = [
            {"learner_id": learner_id, "kind": kind, "payload": payload}
            for index, learner_id in enumerate(batch, first)
            for kind, payload in variants[index % len(variants)]
        ]
        with engine.begin() as connection:
            connection.execute(insert(Learner), [{"id": learner_id} for learner_id in batch])
            connection.execute(insert(EventRecord), rows)
        ids += batch
        _progress(len(ids), learners, began, last)
    return ids


def _seed_part(url: str, learners: int, events: int, fast: bool, rng_seed: int) -> list[str]:
    engine = seeding_engine(url)
    try:
        write = seed_fast if fast else seed_through_store
        return write(engine, learners, events, rng_seed)
    finally:
        engine.dispose()


def seed(
    url: str,
    learners: int,
    events: int,
    *,
    fast: bool = False,
    rng_seed: int = 0,
    processes: int = 1,
) -> list[str]:
    """Migrate the database at `url` and add `learners` learners of `events` events each, in
    `processes` processes (each writes its share; SQLite lets one write at a time, but the
    Python around each write runs in parallel); their ids. Through the Store, each learner's
    snapshot is then kept too (keep_snapshots); --fast keeps none."""
    upgrade(url)
    if processes <= 1:
        ids = _seed_part(url, learners, events, fast, rng_seed)
    else:
        shares = [learners // processes + (i < learners % processes) for i in range(processes)]
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            parts = pool.starmap(_seed_part, [(url, n, events, fast, rng_seed) for n in shares])
        ids = [learner_id for part in parts for learner_id in part]
    if not fast:
        keep_snapshots(url)
    return ids


def keep_snapshots(url: str) -> int:
    """Migrate the database at `url` and keep every anonymous learner's snapshot that is missing
    or behind (learner_snapshots), as the web app's own writes would have left them; returns
    how many learners were read. A database seeded before migration 0006 is brought up so."""
    upgrade(url)
    engine = seeding_engine(url)
    try:
        snapshots = Snapshots(engine, History.start(load_lesson()))
        return sum(1 for _ in snapshots.pool(None))
    finally:
        engine.dispose()


def learner_ids(url: str) -> list[str]:
    """Every learner id in the store at `url` (of a database seeded earlier)."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(select(Learner.id).order_by(Learner.id)).scalars())
    finally:
        engine.dispose()


def seed_method(fast: bool) -> str:
    """How `seed(..., fast=fast)` writes, in words."""
    if fast:
        return "bulk INSERTs into the Store's tables (seed.py --fast)"
    return "the Store's methods (Store.ensure_learner, Store.append_decided)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database_url", help="SQLAlchemy URL (SQLite or PostgreSQL)")
    parser.add_argument("--learners", type=int, required=True)
    parser.add_argument("--events", type=int, required=True, help="events per learner")
    parser.add_argument("--fast", action="store_true", help="bulk INSERTs into the tables")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the histories")
    parser.add_argument("--processes", type=int, default=1, help="writing processes")
    args = parser.parse_args()
    began = time.perf_counter()
    histories(args.events, args.seed)
    built = time.perf_counter() - began
    began = time.perf_counter()
    seed(
        args.database_url,
        args.learners,
        args.events,
        fast=args.fast,
        rng_seed=args.seed,
        processes=args.processes,
    )
    took = time.perf_counter() - began
    how = seed_method(args.fast)
    print(
        f"seeded {args.learners:,} learners x {args.events:,} events "
        f"({args.learners * args.events:,} events) through {how}, {args.processes} "
        f"process(es), in {took:.1f} s: "
        f"{args.learners / took:,.0f} learners/s, {args.learners * args.events / took:,.0f} "
        f"events/s (histories built in {built:.1f} s)"
    )


if __name__ == "__main__":
    main()
