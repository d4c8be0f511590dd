"""Time the instructor view and its CSV export over a seeded pool (goal: the view in <= 300 ms
at 10,000 learners x 50 events, on SQLite and PostgreSQL; the CSV streamed without loading
everything):

    PYTHONPATH=src .venv/bin/python bench/instructor.py [--learners 10000] [--events 50]
        [--repeats 5] [--no-postgres]

Seeding uses bench/seed.py's --fast path (bulk INSERTs into the Store's tables, the same rows
the Store writes, without its per-learner read), which is the only way to seed 500,000 events in
minutes on this machine. Between the timed views and the CSV, MOVING learners write one more
event each through the Store alone (their snapshots left behind, the view's worst case) and one
more view is timed ("after N learners moved"). Unlike learners working through the web app, the
seed keeps no snapshot (learner_snapshots): the first view reads and folds every learner's events
once and keeps their snapshots (timed apart, as "first view"); the views after it read one row
per learner. Every
seeded learner is anonymous; the run times the anonymous pool, then puts every learner into one
course (lti_learners and lti_context_members rows, as launches leave them) and times that
course's view. Each figure is the median of --repeats requests through the app in-process
(Starlette's TestClient: no network, the same code a worker runs), with the instructor cookie.
The CSV is read to its end; its peak Python memory is measured in one more run of the response's
generator under tracemalloc (which slows it, so it is timed apart; TestClient keeps the whole
body it receives, so it is left out of that run). PostgreSQL comes from scripts/pg_cluster.py (a
throwaway cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import insert, select
from starlette.testclient import TestClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))

from normdive.config import Settings  # noqa: E402
from normdive.progress.events import EventKind  # noqa: E402
from normdive.store.db import make_engine  # noqa: E402
from normdive.store.tables import Learner, LtiContextMember, LtiLearner  # noqa: E402
from normdive.web.app import create_app  # noqa: E402
from normdive.web.infrastructure.instructor_access import (  # noqa: E402
    INSTRUCTOR_COOKIE,
    Pool,
    cookie_value,
)
from normdive.web.views.instructor_report import (  # noqa: E402
    csv_chunks,
    learner_summaries,
    pool_recording,
)
from seed import seed  # noqa: E402  (bench/ is not a package)

GOAL_MS = 300
COURSE = "f" * 64
MEMBERS_PER_INSERT = 1000
# Learners who write once more between two timed views (1 % of the default pool).
MOVING = 100
RECORDING = REPO / "recordings" / "the-transformer-block.json"


def timed(action: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """The wall time of `action`'s first run in ms, and the median over `repeats` more."""
    began = time.perf_counter()
    result = action()
    first = (time.perf_counter() - began) * 1000
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        result = action()
        times.append((time.perf_counter() - began) * 1000)
    return first, statistics.median(times), result


def enrol_everyone(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            ids = list(connection.execute(select(Learner.id)).scalars())
            now = datetime.now(UTC)
            for start in range(0, len(ids), MEMBERS_PER_INSERT):
                part = ids[start : start + MEMBERS_PER_INSERT]
                connection.execute(
                    insert(LtiLearner), [{"link_key": i * 2, "learner_id": i} for i in part]
                )
                connection.execute(
                    insert(LtiContextMember),
                    [{"context_key": COURSE, "learner_id": i, "last_launch_at": now} for i in part],
                )
    finally:
        engine.dispose()


def measure(url: str, folder: Path, pool: Pool, repeats: int) -> dict[str, float]:
    secret = secrets.token_hex(32)
    settings = Settings(
        DATABASE_URL=url,
        secret_key=SecretStr(secret),
        recording_path=RECORDING,
        dev_prerequisite_done=True,
    )
    with TestClient(create_app(settings)) as client:
        client.cookies.set(
            INSTRUCTOR_COOKIE, cookie_value(pool, SecretStr(secret)), path="/instructor"
        )

        def view() -> int:
            answer = client.get("/instructor")
            assert answer.status_code == 200, answer.text[:300]
            return len(answer.content)

        def export() -> int:
            size = 0
            with client.stream("GET", "/instructor/export.csv") as answer:
                assert answer.status_code == 200
                for chunk in answer.iter_bytes():
                    size += len(chunk)
            return size

        first_ms, view_ms, page_bytes = timed(view, repeats)
        svc = client.app.state.services  # type: ignore[attr-defined]
        # A class at work between two views: MOVING learners each write one more event,
        # through the Store alone, so each one's snapshot is left behind: the worst case for
        # the view (the app keeps a snapshot every SNAPSHOT_EVERY_EVENTS events).
        moving = random.Random(0).sample(
            [mark.learner_id for mark in svc.snapshots.pool_marks(pool.context_key)], MOVING
        )
        for learner_id in moving:
            svc.store.append(learner_id, EventKind.HINT_OPENED, {"rung": 2})
        began = time.perf_counter()
        view()
        moved_ms = (time.perf_counter() - began) * 1000
        _, csv_ms, csv_bytes = timed(export, max(1, repeats // 2))
        # The response's own generator, consumed here: TestClient keeps the whole body it
        # receives, which would be counted too.
        recording = pool_recording(svc)
        tracemalloc.start()
        for _chunk in csv_chunks(
            learner_summaries(svc.snapshots, recording, pool.context_key), svc.lesson
        ):
            pass
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return {
        "first_ms": first_ms,
        "view_ms": view_ms,
        "moved_ms": moved_ms,
        "page_kb": page_bytes / 1024,
        "csv_ms": csv_ms,
        "csv_mb": csv_bytes / 1024 / 1024,
        "csv_peak_mb": peak / 1024 / 1024,
    }


def line(backend: str, what: str, figures: dict[str, float]) -> str:
    met = "met" if max(figures["view_ms"], figures["moved_ms"]) <= GOAL_MS else "NOT met"
    return (
        f"{backend} {what}: first view {figures['first_ms']:,.0f} ms (snapshots kept), then "
        f"view {figures['view_ms']:,.0f} ms ({met}, goal <= {GOAL_MS} ms; "
        f"after {MOVING} learners moved {figures['moved_ms']:,.0f} ms; "
        f"{figures['page_kb']:.0f} KB) | CSV {figures['csv_ms']:,.0f} ms for "
        f"{figures['csv_mb']:.1f} MB, peak Python memory while streaming "
        f"{figures['csv_peak_mb']:.1f} MB"
    )


@contextlib.contextmanager
def databases(folder: Path, postgres: bool) -> Iterator[list[tuple[str, str]]]:
    urls = [("sqlite", f"sqlite:///{folder / 'instructor.sqlite3'}")]
    if not postgres:
        yield urls
        return
    from pg_cluster import PostgresCluster

    with PostgresCluster() as cluster:
        yield [*urls, ("postgresql", cluster.create_database("instructor_bench"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    what = f"{args.learners:,} learners x {args.events} events"
    with tempfile.TemporaryDirectory() as name, databases(Path(name), not args.no_postgres) as urls:
        for backend, url in urls:
            began = time.perf_counter()
            seed(url, args.learners, args.events, fast=True)
            print(f"{backend}: seeded {what} in {time.perf_counter() - began:.0f} s (--fast)")
            figures = measure(url, Path(name), Pool(None), args.repeats)
            print(line(backend, f"{what}, the anonymous pool", figures), flush=True)
            enrol_everyone(url)
            figures = measure(url, Path(name), Pool(COURSE), args.repeats)
            print(line(backend, f"{what}, one course", figures), flush=True)


if __name__ == "__main__":
    main()
