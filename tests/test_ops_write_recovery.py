"""After a spell in which the database refuses writes, the same running server writes again by
itself within a few seconds, on every worker: README ("Health and outages") promises it.

Real parts: `normdive serve --workers 2` as its own processes, driven over HTTP while writes
are coming in. PostgreSQL: the database is set read-only (`default_transaction_read_only`) in
the middle of the burst and its sessions ended, so that the server's new sessions are
read-only; then back. A session keeps the setting it began with, so sessions that met the
read-only database must not be handed out again. Then new learners write, one after another:
the first must succeed within RECOVERY_DEADLINE_S, and every one of the next FOLLOWING_WRITES
too, whichever worker takes it. (SQLite's read-only file is test_ops_db_faults's.)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from ops_server import Learner, ServerProcess

pytestmark = pytest.mark.slow

# How soon the first write after the spell must succeed, in seconds.
RECOVERY_DEADLINE_S = 5.0
# Writes by new learners that must all succeed once the first has.
FOLLOWING_WRITES = 12
# Learners writing in the background during the spell, and how long the spell lasts.
WRITERS = 4
SPELL_S = 1.5
PAUSE_BETWEEN_TRIES_S = 0.1


def _first_write_after(url: str) -> tuple[float, httpx.Response]:
    """Seconds until a new learner's takeaway is saved, trying until the deadline."""
    started = time.monotonic()
    while True:
        learner = Learner(url)
        try:
            answer = learner.post("/takeaway", {"text": "after the spell"})
        except httpx.HTTPError:
            answer = None
        finally:
            learner.close()
        waited = time.monotonic() - started
        if answer is not None and answer.status_code == 200:
            return waited, answer
        if waited > RECOVERY_DEADLINE_S:
            raise AssertionError(
                f"no write succeeded within {RECOVERY_DEADLINE_S} s of the database taking "
                f"writes again: last answer {answer.status_code if answer else None} "
                f"{answer.text[:200] if answer else ''}"
            )
        time.sleep(PAUSE_BETWEEN_TRIES_S)


@contextlib.contextmanager
def _burst(url: str) -> Iterator[list[int]]:
    """WRITERS learners saving takeaways over and over until the block ends; the statuses."""
    statuses: list[int] = []
    stop = threading.Event()
    learners = [Learner(url) for _ in range(WRITERS)]
    for learner in learners:
        learner.state()

    def write(learner: Learner) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            with contextlib.suppress(httpx.HTTPError):
                statuses.append(learner.post("/takeaway", {"text": f"burst {count}"}).status_code)

    threads = [threading.Thread(target=write, args=(learner,)) for learner in learners]
    for thread in threads:
        thread.start()
    try:
        yield statuses
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for learner in learners:
            learner.close()


def _assert_recovers(
    server: ServerProcess, spell: Callable[[], contextlib.AbstractContextManager[None]]
) -> None:
    with _burst(server.url) as statuses:
        time.sleep(SPELL_S / 2)  # writes flowing, on both workers' connections
        with spell():
            time.sleep(SPELL_S)
            during = len(statuses)
        time.sleep(SPELL_S / 2)
    refused = [status for status in statuses[:during] if status != 200]
    assert refused, "the spell refused no write: it did not take"
    assert set(statuses) <= {200, 503}, sorted(set(statuses))
    _first_write_after(server.url)
    for _ in range(FOLLOWING_WRITES):
        learner = Learner(server.url)
        try:
            answer = learner.post("/takeaway", {"text": "well after the spell"})
        finally:
            learner.close()
        assert answer.status_code == 200, (answer.status_code, answer.text[:200])
    assert server.alive


@contextlib.contextmanager
def _read_only_database(url: str) -> Iterator[None]:
    """The database set read-only for every new session, and the sessions open on it ended
    (as a failover or a restart ends them), so the server's next ones are read-only; then
    back. Set on this database alone: other tests share the cluster."""
    name = make_url(url).database
    engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    ended = text(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = :name AND pid <> pg_backend_pid()"
    )
    try:
        with engine.connect() as connection:
            connection.execute(
                text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
            )
            connection.execute(ended, {"name": name})
        yield
    finally:
        with engine.connect() as connection:
            # This session started read-only too.
            connection.execute(text("SET default_transaction_read_only = off"))
            connection.execute(text(f'ALTER DATABASE "{name}" RESET default_transaction_read_only'))
        engine.dispose()


def test_postgresql_writes_again_after_the_server_was_read_only(
    postgres_url: str, tmp_path: Path
) -> None:
    with ServerProcess(postgres_url, tmp_path, workers=2) as server:
        _assert_recovers(server, lambda: _read_only_database(postgres_url))
