"""After a spell in which the database refuses writes, the same running server writes again by
itself within a few seconds, on every worker: README ("Health and outages") promises it.

Real parts: `normdive serve --workers 2` as its own processes, driven over HTTP by learners
writing takeaways in a loop; the spell is made by the operating system or the database
server, and undone in the middle of that burst. Every answer is a 200 or the readable 503.
Then new learners write, one after another: the first must succeed within
RECOVERY_DEADLINE_S of the spell's end, and every one of the next FOLLOWING_WRITES too,
whichever worker takes it. Each test prints when, after the spell ended, the first write
succeeded and the last was refused (pytest's -rP shows it).

- SQLite: the database file, its -wal and its -shm made immutable (`chattr +i`), so that a
  connection opened meanwhile opens them read-only; then not. Root ignores file modes, so chmod
  would not stop the server; the immutable attribute stops root too. Setting it needs
  CAP_LINUX_IMMUTABLE (root on our machines, Debian's e2fsprogs for chattr, a file system that
  keeps the attribute: ext4 here); elsewhere the test fails, saying why, and under another
  user it is skipped. The WAL index (-shm) a worker opens read-only is shared by every
  connection of the worker to the file, fresh ones included, as long as one stays open
  (store.db, _SqliteConnections). Twice: the spell begun before the server starts, and begun
  in the middle of the burst, as an operator's mistake would. Then a worker that holds a
  writable mapping of the -shm may be killed by SIGBUS at its next write to it (ext4 refuses
  a write fault on a page of an immutable file; SQLite maps the -shm): uvicorn starts another,
  and the requests that worker held get no answer. Nothing the server can do prevents it, so
  that test lets a write go unanswered while the spell lasts, never after. And once more with
  `normdive serve` as it starts by default, one worker under uvicorn's supervisor, whose
  worker the spell kills (with the kernel's signal, sent by the test where the spell did not):
  another is started and writes once the spell ends.
- PostgreSQL: in the middle of the burst, the database set read-only (ALTER DATABASE ... SET
  default_transaction_read_only) and its sessions ended, as a failover or a restart ends them,
  so that the server's new sessions begin read-only; then back. A session keeps the setting
  it began with (a database's or a role's default is read at the session's start), so sessions
  begun during the spell must not be handed out again. Only this database: other tests share
  the cluster. (ALTER SYSTEM with pg_reload_conf() would reach the sessions already open,
  which follow the server's configuration both ways.)

And in one process, step by step, what kept a SQLite worker refusing: a connection opened
after the spell, to a writable file, that shares the read-only WAL index of one opened during
it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from normdive.store.db import READ_ONLY_FILE, SQLITE_SIDE_FILES, SQLITE_VIEW_WAIT_S, make_engine
from normdive.store.event_store import Store
from ops_server import NORMDIVE, START_TIMEOUT_S, STOP_TIMEOUT_S, Learner, ServerProcess

pytestmark = pytest.mark.slow

# How soon after the spell's end a new learner's write must succeed, in seconds: generous
# (two shared cores); the writes resume at the first request that finds the database writable.
RECOVERY_DEADLINE_S = 5.0
# Writes by new learners (each a new HTTP connection, so either worker) that must all succeed
# once the first has.
FOLLOWING_WRITES = 12
# Learners writing in the background, and how long the burst runs, in seconds: first (before a
# spell that begins in its middle), then with the spell on, then after the spell's end.
WRITERS = 4
BEFORE_SPELL_S = 0.75
SPELL_S = 1.5
AFTER_SPELL_S = 0.75
PAUSE_BETWEEN_TRIES_S = 0.1
# The status a burst's write is given when no answer came.
NO_ANSWER = 0

Spell = Callable[[], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _burst(url: str) -> Iterator[list[tuple[float, int]]]:
    """WRITERS learners saving takeaways over and over until the block ends; when each answer
    came (time.monotonic()) and its status (NO_ANSWER: the connection failed)."""
    answers: list[tuple[float, int]] = []
    stop = threading.Event()
    learners = [Learner(url) for _ in range(WRITERS)]
    for learner in learners:
        learner.state()

    def write(learner: Learner) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            try:
                status = learner.post("/takeaway", {"text": f"burst {count}"}).status_code
            except httpx.TransportError:
                status = NO_ANSWER
            answers.append((time.monotonic(), status))

    threads = [threading.Thread(target=write, args=(learner,)) for learner in learners]
    for thread in threads:
        thread.start()
    try:
        yield answers
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for learner in learners:
            learner.close()


def _new_learner_writes(url: str) -> httpx.Response | None:
    """A new learner's first takeaway (None: no answer, or no form token to send it with)."""
    learner = Learner(url)
    try:
        return learner.post("/takeaway", {"text": "after the spell"})
    except httpx.HTTPError:
        return None
    finally:
        learner.close()


def _first_write_after(url: str, ended: float, deadline_s: float) -> float:
    """Seconds from `ended` until a new learner's takeaway is saved, trying until the deadline."""
    while True:
        answer = _new_learner_writes(url)
        waited = time.monotonic() - ended
        if answer is not None and answer.status_code == 200:
            return waited
        if waited > deadline_s:
            raise AssertionError(
                f"no write succeeded within {deadline_s} s of the database taking "
                f"writes again: last answer {answer.status_code if answer else None} "
                f"{answer.text[:200] if answer else ''}"
            )
        time.sleep(PAUSE_BETWEEN_TRIES_S)


def _assert_recovers(
    server: ServerProcess,
    spell: contextlib.ExitStack,
    begins: Spell | None = None,
    allowed_during: frozenset[int] = frozenset(),
    recovery_deadline_s: float = RECOVERY_DEADLINE_S,
) -> None:
    """A burst of writes across a spell, then the writes after it. `begins` starts the spell
    in the middle of the burst (without it, the spell began before: `spell` holds it); closing
    `spell` ends it. Answered 200 or 503 throughout, or also `allowed_during` while the spell
    lasts; the first write after it saved within `recovery_deadline_s`."""
    with _burst(server.url) as answers:
        time.sleep(BEFORE_SPELL_S)  # writes flowing
        if begins is not None:
            spell.enter_context(begins())
        time.sleep(SPELL_S)
        during = len(answers)
        spell.close()
        ended = time.monotonic()
        time.sleep(AFTER_SPELL_S)  # and still coming in as the database takes writes again
    answered_during = {status for _, status in answers[:during]} - allowed_during
    assert answered_during <= {200, 503}, sorted(answered_during)
    assert {status for _, status in answers[during:]} <= {200, 503}
    assert any(status != 200 for _, status in answers[:during]), "the spell refused no write"
    saved = [at - ended for at, status in answers if at > ended and status == 200]
    recovered_s = (
        min(saved) if saved else _first_write_after(server.url, ended, recovery_deadline_s)
    )
    assert recovered_s <= recovery_deadline_s, recovered_s
    refused = [at - ended for at, status in answers if at > ended and status != 200]
    print(
        f"after the spell: first write saved at {recovered_s:.2f} s, "
        f"{len(refused)} refused, the last at {max(refused, default=0):.2f} s"
    )
    for _ in range(FOLLOWING_WRITES):
        answer = _new_learner_writes(server.url)
        assert answer is not None and answer.status_code == 200, answer and (
            answer.status_code,
            answer.text[:200],
        )
    assert server.alive


@contextlib.contextmanager
def _immutable(database: Path) -> Iterator[None]:
    """The database file, its -wal and its -shm immutable until the block ends: nobody, root
    included, opens them for writing."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.fail("root ignores file modes, and chattr (e2fsprogs) is not installed")
    names = [str(database), *(str(database) + suffix for suffix in SQLITE_SIDE_FILES)]
    made = subprocess.run([chattr, "+i", *names], capture_output=True, text=True, check=False)
    try:
        if made.returncode != 0 or any(os.access(name, os.W_OK) for name in names):
            pytest.fail(f"the database's files could not be made immutable: {made.stderr}")
        yield
    finally:
        subprocess.run([chattr, "-i", *names], capture_output=True, check=False)


# Another process holding the database open (argv[1]), so that its -wal and -shm are there
# while this one's connections open none: it says "ready" once it has read, and ends when its
# stdin closes. It touches nothing while the files are immutable.
KEEPER = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1])
connection.execute("SELECT count(*) FROM events").fetchall()
print("ready", flush=True)
sys.stdin.read()
connection.close()
"""


@contextlib.contextmanager
def _kept_open(database: str) -> Iterator[None]:
    keeper = subprocess.Popen(
        [sys.executable, "-c", KEEPER, database],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert keeper.stdout is not None and keeper.stdout.readline().strip() == "ready"
        yield
    finally:
        keeper.communicate(timeout=STOP_TIMEOUT_S)


@pytest.mark.skipif(os.geteuid() != 0, reason="the immutable attribute needs root")
def test_sqlite_writes_again_after_the_file_was_read_only(
    database_url: str, tmp_path: Path
) -> None:
    database = make_url(database_url).database
    assert database
    with _kept_open(database), contextlib.ExitStack() as spell:
        spell.enter_context(_immutable(Path(database)))
        with ServerProcess(database_url, tmp_path, workers=2) as server:
            _assert_recovers(server, spell)


@pytest.mark.skipif(os.geteuid() != 0, reason="the immutable attribute needs root")
def test_sqlite_writes_again_after_the_file_was_read_only_mid_burst(
    database_url: str, tmp_path: Path
) -> None:
    database = make_url(database_url).database
    assert database
    with (
        _kept_open(database),
        ServerProcess(database_url, tmp_path, workers=2) as server,
        contextlib.ExitStack() as spell,
    ):
        _assert_recovers(
            server,
            spell,
            begins=lambda: _immutable(Path(database)),
            allowed_during=frozenset({NO_ANSWER}),
        )


def _serving_process(server: ServerProcess) -> int:
    """The process that answers `server`'s requests: its worker, or the server itself where it
    has none (a worker is started by multiprocessing's spawn, whose command line says so)."""
    assert server.process is not None
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            if (
                parent == server.process.pid
                and b"--multiprocessing-fork" in (entry / "cmdline").read_bytes()
            ):
                return int(entry.name)
    return server.process.pid


# How long the spell lasts before its worker is sent SIGBUS, when the spell has not killed it.
SIGBUS_AFTER_S = 0.5


@contextlib.contextmanager
def _immutable_then_sigbus(database: Path, server: ServerProcess) -> Iterator[None]:
    """The spell, and the serving process killed as the kernel kills it: the spell kills it
    only when its next write reaches the -shm it mapped writable before the -wal refuses one,
    so where it has not within SIGBUS_AFTER_S, it is sent the same signal."""
    worker = _serving_process(server)
    with _immutable(database):
        time.sleep(SIGBUS_AFTER_S)
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGBUS)
        yield


@pytest.mark.skipif(os.geteuid() != 0, reason="the immutable attribute needs root")
def test_the_default_serve_outlives_its_worker_killed_mid_burst(
    database_url: str, tmp_path: Path
) -> None:
    """`normdive serve` as it starts by default (no --workers): a supervisor and one worker.
    The spell kills the worker (SIGBUS), and the supervisor starts another, which writes again
    once the spell ends."""
    database = make_url(database_url).database
    assert database
    default = [NORMDIVE, "serve", "--port", "{port}"]
    with (
        _kept_open(database),
        ServerProcess(database_url, tmp_path, command=default) as server,
        contextlib.ExitStack() as spell,
    ):
        _assert_recovers(
            server,
            spell,
            begins=lambda: _immutable_then_sigbus(Path(database), server),
            allowed_during=frozenset({NO_ANSWER}),
            # The worker started in place of the one killed must import the app first.
            recovery_deadline_s=START_TIMEOUT_S,
        )
        log = server.log_path.read_text(errors="replace")
    assert "died" in log, server.log()


@pytest.mark.skipif(os.geteuid() != 0, reason="the immutable attribute needs root")
def test_sqlite_a_new_connection_waits_for_the_read_only_view_to_close(database_url: str) -> None:
    """In one process, step by step: a connection opened while the file was immutable opens the
    WAL index read-only and is still open, in use, when the file is writable again. A write on a
    new connection would share that index and be refused; it waits instead until the old
    connection has closed, then writes at the first try."""
    database = make_url(database_url).database
    assert database
    engine = make_engine(database_url)
    written: list[str] = []
    try:
        with _kept_open(database):
            with _immutable(Path(database)):
                during = engine.connect()
                during.execute(text("SELECT count(*) FROM events")).all()
                assert during.info[READ_ONLY_FILE] == database  # opened read-only
            writer = threading.Thread(target=lambda: written.append(Store(engine).create_learner()))
            writer.start()
            writer.join(timeout=SQLITE_VIEW_WAIT_S / 4)
            assert writer.is_alive() and not written  # waiting for `during` to close
            during.close()
            writer.join()
        assert len(written) == 1
    finally:
        engine.dispose()


@pytest.mark.skipif(os.geteuid() != 0, reason="the immutable attribute needs root")
def test_sqlite_a_thread_holding_the_read_only_view_is_refused_at_once(database_url: str) -> None:
    """A request that still holds a connection opened while the file was immutable, and asks for
    a second once it is writable, is refused at once (a 503 for its request, which then lets go)
    rather than waiting for itself; its next request writes."""
    database = make_url(database_url).database
    assert database
    engine = make_engine(database_url)
    try:
        with _kept_open(database):
            with _immutable(Path(database)):
                held = engine.connect()
                held.execute(text("SELECT count(*) FROM events")).all()
            with pytest.raises(OperationalError, match="read-only view"):
                engine.connect()
            held.close()
            Store(engine).create_learner()
    finally:
        engine.dispose()


@contextlib.contextmanager
def _read_only_database(url: str) -> Iterator[None]:
    """The database set read-only for every new session, and the sessions open on it ended,
    so the server's next ones are read-only; then back."""
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
            # This session began read-only too.
            connection.execute(text("SET default_transaction_read_only = off"))
            connection.execute(text(f'ALTER DATABASE "{name}" RESET default_transaction_read_only'))
        engine.dispose()


def test_postgresql_writes_again_after_the_database_was_read_only(
    postgres_url: str, tmp_path: Path
) -> None:
    with (
        ServerProcess(postgres_url, tmp_path, workers=2) as server,
        contextlib.ExitStack() as spell,
    ):
        _assert_recovers(server, spell, begins=lambda: _read_only_database(postgres_url))
