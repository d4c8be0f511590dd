"""The load benchmark's instruments measure what they say: the seeded histories are what the
page's own actions decide and keep the second row open; the seed writes them through the Store;
the write floor stores each row; the simulated learners' answers are graded wrong; the open
loop answers every arrival it schedules and counts it; the learners arithmetic is the stated
one; a burst counts every acknowledged check against what the database stored."""

from __future__ import annotations

import asyncio
import importlib
import random
import sqlite3
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from starlette.testclient import TestClient

from fresh_loop import run_in_fresh_loop
from normdive.lesson.content import load_lesson
from normdive.progress.actions import check_numbers, commit_prediction
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import recording_facts_at
from normdive.progress.state import derive
from normdive.store.db import make_engine
from normdive.store.event_store import Store, is_learner_id

BENCH = Path(__file__).resolve().parents[1] / "bench"
SHIPPED = Path(__file__).resolve().parents[1] / "recordings" / "the-transformer-block.json"
LESSON = load_lesson()
SECOND_ROW = ("row2_mean", "row2_variance", "row2_denominator")


def bench_module(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module(name)


def as_events(actions: list[tuple[EventKind, dict[str, object]]]) -> list[Event]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return [Event(i, "0" * 32, kind, dict(p), now) for i, (kind, p) in enumerate(actions, 1)]


@pytest.mark.parametrize("count", [1, 5, 10, 40])
def test_a_seeded_history_has_its_length_and_leaves_the_second_row_open(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = bench_module("seed", monkeypatch)
    history = seed.build_history(count, random.Random(count))
    assert len(history) == count
    assert history[0][0] is EventKind.PREDICTION_COMMITTED
    state = derive(
        as_events(history),
        LESSON,
        recording=recording_facts_at(SHIPPED),
        dev_prerequisite_done=True,
    )
    assert not state.gate.closed
    assert not any(state.fields[field].landed for field in SECOND_ROW)
    if count >= 40:
        kinds = Counter(kind for kind, _ in history)
        assert all(state.fields[f].landed for f in ("row1_mean", "row1_variance"))
        assert kinds[EventKind.HINT_OPENED] == 2
        assert kinds[EventKind.ROW_PREDICTED] == 4
        assert kinds[EventKind.ROW_PLAYED] > 4
        assert kinds[EventKind.NUMBERS_CHECKED] > 3


@pytest.mark.both_databases
@pytest.mark.parametrize("fast", [False, True])
def test_the_seed_stores_each_learners_history(
    database_url: str, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = bench_module("seed", monkeypatch)
    ids = seed.seed(database_url, 5, 12, fast=fast)
    assert len(set(ids)) == 5
    engine = make_engine(database_url)
    try:
        store = Store(engine)
        variants = seed.histories(12, 0)
        for index, learner_id in enumerate(ids):
            stored = [(e.kind, e.payload) for e in store.events_for(learner_id)]
            assert stored == [(k, p) for k, p in variants[index % len(variants)]]
    finally:
        engine.dispose()


def test_the_write_floor_stores_a_row_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare_app = bench_module("bare_app", monkeypatch)
    database = tmp_path / "floor.sqlite3"
    monkeypatch.setenv(bare_app.DATABASE_PATH_VARIABLE, str(database))
    with TestClient(bare_app.create_app()) as client:
        answers = [client.post("/write") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.json()["id"] for a in answers] == [1, 2, 3]
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT count(*) FROM writes").fetchone() == (3,)
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()


def test_the_simulated_learners_answers_are_wrong_and_never_repeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load = bench_module("load", monkeypatch)
    recording = recording_facts_at(SHIPPED)
    state = derive([], LESSON, recording=recording, dev_prerequisite_done=True)
    committed = as_events([commit_prediction(state, LESSON, load.PREDICTION)])
    state = derive(committed, LESSON, recording=recording, dev_prerequisite_done=True)
    _, payload = check_numbers(state, LESSON, load.wrong_numbers(7))
    assert [entry["verdict"] for entry in payload["answers"]] == ["wrong"] * 6
    assert load.wrong_numbers(7) != load.wrong_numbers(8)


def test_the_open_loop_order_and_the_learners_arithmetic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load = bench_module("load", monkeypatch)
    learner = load.OpenLearner(load.Connection("127.0.0.1", 1), {})
    kinds = [learner.next_request()[0] for _ in range(8)]
    assert kinds == ["GET /", "POST /numbers", "POST /numbers", "POST /numbers"] * 2
    assert load.learners_at(1000) == pytest.approx(1000 * 0.75 * 15)
    assert load.seeded_pairs([100, 100_000], [10, 1000]) == [(100, 10), (100, 1000), (100_000, 10)]


def test_the_open_loop_answers_and_counts_every_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    load = bench_module("load", monkeypatch)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(reply)
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    async def scenario() -> object:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        learners = [
            load.OpenLearner(load.Connection("127.0.0.1", port), {}, ceiling=True) for _ in range(5)
        ]
        t0 = asyncio.get_running_loop().time() + 0.05
        share = await load.open_cell(learners, 200.0, t0, 0.1, 0.3, seed=1)
        for learner in learners:
            await learner.connection.close()
        server.close()
        await server.wait_closed()
        return share

    share = run_in_fresh_loop(scenario)
    answered = sum(len(values) for values in share.latencies.values())
    assert share.scheduled == share.sent + share.dropped
    assert answered == share.sent > 0
    assert share.unfinished == 0 and not share.unexpected
    assert set(share.latencies) <= {"GET /", "POST /write"}


def test_a_burst_counts_each_acknowledged_check_against_what_is_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load = bench_module("load", monkeypatch)
    statuses = {"kept": 200, "lost": 200, "twice": 200, "refused": 503, "stored anyway": 0}
    stored = {"kept": 1, "twice": 2, "stored anyway": 1}
    count = load.count_burst(statuses, stored)
    assert (count.acknowledged, count.stored, count.lost) == (3, 3, 1)
    assert (count.duplicated, count.stored_unacknowledged) == (1, 1)
    assert not count.nothing_lost
    assert load.count_burst({"a": 200, "b": 503}, {"a": 1}).nothing_lost


@pytest.mark.both_databases
def test_a_tiny_burst_stores_every_acknowledged_check_once(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    load = bench_module("load", monkeypatch)
    servers = bench_module("servers", monkeypatch)
    env = {"NORMDIVE_ATTEMPTS_PER_MINUTE": load.ATTEMPTS_PER_MINUTE}
    with servers.normdive_server(database_url, **env) as (url, _process):
        learners = run_in_fresh_loop(lambda: load.prepare_burst(url, 4))
        run_in_fresh_loop(lambda: load.run_burst(url, learners, 0.2, seed=1))
    ids = [learner.learner_id for learner in learners]
    assert len(set(ids)) == 4 and all(map(is_learner_id, ids))
    stored = load.stored_checks(database_url, ids)
    count = load.count_burst({learner.learner_id: learner.status for learner in learners}, stored)
    assert [learner.status for learner in learners] == [200] * 4
    assert stored == dict.fromkeys(ids, 1)
    assert (count.acknowledged, count.stored, count.lost, count.duplicated) == (4, 4, 0, 0)
    assert count.nothing_lost
