"""What keeping a learner's snapshot costs a write, side by side in one run: the keep as the
app does it (Snapshots.keep: a commit that does not wait for the disk) against the same upsert
committed durably (synchronous=FULL, as the events are; the JSON built the same way each time),
on a SQLite file:

    PYTHONPATH=src .venv/bin/python bench/snapshot_keep.py [--keeps 2000]

Then what it saves: a worker's first read of a learner of 1,000 events, from the snapshot
(one row, and the events after it: none) against folding every event, side by side.

The History kept is a learner's after an opening prediction, five checks of six numbers and a
300-character takeaway (about 2 KB of JSON and a 0.8 KB summary).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from lesson_answers import LESSON, RIGHT_NUMBERS  # noqa: E402
from normdive.progress.events import EventKind  # noqa: E402
from normdive.progress.history import History  # noqa: E402
from normdive.progress.report import summary_record  # noqa: E402
from normdive.store.db import make_engine, upgrade  # noqa: E402
from normdive.store.event_store import Store  # noqa: E402
from normdive.store.snapshots import _KEEP_SQL, Snapshots  # noqa: E402

# Events of the learner whose first read is timed both ways.
LONG_HISTORY = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keeps", type=int, default=2000)
    keeps = parser.parse_args().keeps
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/keep.sqlite3"
        upgrade(url)
        engine = make_engine(url)
        store, snapshots = Store(engine), Snapshots(engine, History.start(LESSON))
        learner = store.create_learner()
        store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
        answers = [
            {"field": f, "raw": v, "verdict": "wrong", "slip": "sample_variance", "message": None}
            for f, v in RIGHT_NUMBERS.items()
        ]
        for _ in range(5):
            store.append(learner, EventKind.NUMBERS_CHECKED, {"answers": answers})
        store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "x" * 300})
        history = snapshots.read(learner)
        body, summary = json.dumps(history.to_json()), json.dumps(summary_record(history))
        print(f"History {len(body)} bytes of JSON, summary {len(summary)} bytes")

        def as_app(i: int) -> None:
            snapshots.keep(learner, history.extended([], history.last_event_id + i))

        def durable(i: int) -> None:
            moved = history.extended([], 10**9 + i)
            raw = engine.raw_connection()
            try:
                cursor = raw.cursor()
                values = (
                    learner,
                    moved.lesson_key,
                    moved.last_event_id,
                    json.dumps(moved.to_json(), separators=(",", ":")),
                    json.dumps(summary_record(moved), separators=(",", ":")),
                )
                cursor.execute(_KEEP_SQL.format("?"), values)
                raw.commit()
            finally:
                raw.close()

        figures = {}
        for name, keep in (("as the app keeps it", as_app), ("committed durably", durable)):
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(1, keeps + 1):
                keep(i)
            figures[name] = (
                (time.process_time() - cpu) / keeps * 1e6,
                (time.perf_counter() - wall) / keeps * 1e6,
            )
            print(f"{name}: {figures[name][0]:.0f} us CPU, {figures[name][1]:.0f} us wall per keep")
        app, full = figures["as the app keeps it"], figures["committed durably"]
        print(f"durable / as the app: CPU {full[0] / app[0]:.2f}x, wall {full[1] / app[1]:.2f}x")

        # What it saves: a worker's first read of a learner of LONG_HISTORY events.
        long = store.create_learner()
        for _ in range(LONG_HISTORY // 2):
            store.append(long, EventKind.NUMBERS_CHECKED, {"answers": answers})
            store.append(long, EventKind.HINT_OPENED, {"rung": 1})
        assert snapshots.read(long) == History.of(store.events_for(long), LESSON)  # kept
        reads = max(1, keeps // 20)
        cold: dict[str, float] = {}
        for name, read in (
            ("from the snapshot", lambda: snapshots.read(long)),
            ("from every event", lambda: store.read(long, snapshots.start)),
        ):
            cpu = time.process_time()
            for _ in range(reads):
                read()
            cold[name] = (time.process_time() - cpu) / reads * 1e3
            print(f"first read of a {LONG_HISTORY}-event learner {name}: {cold[name]:.2f} ms CPU")
        ratio = cold["from every event"] / cold["from the snapshot"]
        print(f"every event / snapshot: {ratio:.1f}x")
        engine.dispose()


if __name__ == "__main__":
    main()
