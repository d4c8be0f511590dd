"""Grade passback: how fast the score outbox drains, and what the outbox's trigger costs a
write of a learner no LMS launched.

    PYTHONPATH=src .venv/bin/python bench/lti_passback.py [--learners 500]

Drain: LEARNERS learners with a grade target each write once (the trigger queues each), then
one `Sender` (what `normdive lti passback` runs) sends rounds until the outbox is empty, to
the test suite's grade book (tests/lti_platform.py: a real HTTP server on 127.0.0.1, whose
token endpoint verifies the tool's client assertion), on a SQLite file. Scores per second,
and the token requests it took.

Trigger cost: Store.append of anonymous learners' row predictions (a kind the trigger looks
at), on the same file with the trigger and with it dropped, alternating in ABBA rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lti_platform import GradeBook, grade_book_server, register_platform
from normdive.lesson.content import load_lesson
from normdive.lti import tool_keys
from normdive.lti.passback import Sender
from normdive.progress.events import EventKind
from normdive.store.db import make_engine, upgrade
from normdive.store.event_store import Store
from normdive.store.tables import LtiGradeTarget

TRIGGER_SQL = """
CREATE TRIGGER tr_events_lti_score_outbox AFTER INSERT ON events
FOR EACH ROW WHEN NEW.kind IN ('numbers_checked', 'reading_locked', 'row_predicted',
                               'row_played', 'gate_closed')
BEGIN
    INSERT INTO lti_score_outbox (learner_id, version, due_at, attempts)
    SELECT NEW.learner_id, 1, CURRENT_TIMESTAMP, 0
    WHERE EXISTS (SELECT 1 FROM lti_grade_targets WHERE learner_id = NEW.learner_id)
    ON CONFLICT (learner_id) DO UPDATE SET
        version = version + 1, due_at = CURRENT_TIMESTAMP, attempts = 0;
END
"""
WRITES_PER_ROUND = 300
ROUNDS = 12  # ABBA: with, without, without, with, ...


def drain(folder: Path, learners: int) -> None:
    url = f"sqlite:///{folder / 'drain.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    store = Store(engine)
    with grade_book_server(GradeBook()) as book:
        register_platform(engine, "https://platform.example.edu/jwks", token_url=book.token_url)
        book.tool_key_set = dict(tool_keys.public_key_set(engine))
        ids = [store.create_learner() for _ in range(learners)]
        with engine.begin() as connection:
            connection.execute(
                insert(LtiGradeTarget),
                [
                    {
                        "learner_id": learner,
                        "target_key": learner * 2,
                        "registration_id": 1,
                        "user_id": f"user-{index}",
                        "resource_link_id": "link",
                        "lineitem_url": f"{book.base}/lineitems/d9",
                    }
                    for index, learner in enumerate(ids)
                ],
            )
        for learner in ids:
            store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
        sender = Sender(engine, load_lesson(), folder / "no-recording.json")
        started = time.perf_counter()
        rounds = 0
        while True:
            report = sender.send_due()
            rounds += 1
            if report.sent == 0 and report.failed == 0:
                break
        elapsed = time.perf_counter() - started
        assert len(book.scores) == learners, len(book.scores)
        print(
            f"drain: {learners} scores in {elapsed:.2f} s = {learners / elapsed:.0f} scores/s "
            f"({rounds} rounds, {book.tokens_issued} token request(s), refused: {book.refused})"
        )
    engine.dispose()


def trigger_cost(folder: Path) -> None:
    url = f"sqlite:///{folder / 'writes.sqlite3'}"
    upgrade(url)
    engine = make_engine(url)
    store = Store(engine)
    timings: dict[bool, list[float]] = {True: [], False: []}
    order = [True, False, False, True] * (ROUNDS // 4) + [True, False][: ROUNDS % 4]
    for with_trigger in order:
        with engine.begin() as connection:
            connection.execute(text("DROP TRIGGER IF EXISTS tr_events_lti_score_outbox"))
            if with_trigger:
                connection.execute(text(TRIGGER_SQL))
        learners = [store.create_learner() for _ in range(WRITES_PER_ROUND)]
        started = time.perf_counter()
        for learner in learners:
            store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
        timings[with_trigger].append((time.perf_counter() - started) / WRITES_PER_ROUND * 1e6)
    with_t, without = statistics.median(timings[True]), statistics.median(timings[False])
    print(
        f"append, median of {len(timings[True])} rounds of {WRITES_PER_ROUND}: with the trigger "
        f"{with_t:.0f} us, without {without:.0f} us ({(with_t / without - 1) * 100:+.1f} %); "
        f"rounds with: {[round(t) for t in timings[True]]}, "
        f"without: {[round(t) for t in timings[False]]}"
    )
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=500)
    arguments = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        drain(Path(folder), arguments.learners)
        trigger_cost(Path(folder))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
