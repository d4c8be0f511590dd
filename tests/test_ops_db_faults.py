"""The database failing under a running server: every request that needs it gets the readable
503 with Retry-After that README ("Health and outages") promises, on every kind of route
(pages, forms, the page script's JSON, LTI, the instructor view and its export, the host
API); each failure is one line in the server's log, without a traceback; nothing is half
written; and once the fault is gone the same server serves again.

Real parts throughout: `normdive serve` as its own process, driven over HTTP, on a SQLite file
or a PostgreSQL cluster of the test run, with the fault made by another real connection.

- SQLite, the write lock held: another connection holds BEGIN IMMEDIATE longer than the
  server's busy timeout (set small through DATABASE_URL's own `timeout`, pysqlite's).
- SQLite, the file read-only: the server opens a file it may not write. chmod does not stop
  root, so under root the file gets the immutable attribute (`chattr +i`), which does; either
  way SQLite opens the file read-only and refuses each write with SQLITE_READONLY ("attempt to
  write a readonly database"), as it did for the file made read-only under a running server.
  A connection SQLite opened read-only stays so after the file is writable again, so the test
  also shows that the server writes again without a restart.
- PostgreSQL, locks held past lock_timeout (set small through the URL's `options`): another
  session holds ACCESS EXCLUSIVE locks, on every table or on the tally table alone, which a
  prediction writes last, after its event: that write must roll back whole.
- PostgreSQL, the server's session ended mid-request: pg_terminate_backend of the session
  while it waits, in the middle of a prediction's transaction.

And in process, the app itself: a failure raised outside any route's handler, in a body
streamed from the database, is the same 503 before the first byte, and a cut-short answer
with one line in the log after it; any other failure stays the readable 500.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import SecretStr
from sqlalchemy import Connection, create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.testclient import TestClient

from helpers import HOST_TOKEN, SECRET_KEY, SettingsFactory
from normdive.progress.events import EventKind
from normdive.store.db import POSTGRESQL_LOCK_TIMEOUT_MS, SQLITE_BUSY_TIMEOUT_S, make_engine
from normdive.store.event_store import EventList, Store, new_learner_id
from normdive.store.tables import Learner as LearnerRow
from normdive.store.tables import PredictionTally
from normdive.web.app import create_app
from normdive.web.infrastructure.instructor_access import Pool, instructor_link
from ops_server import JSON, TOKEN_HEADER, TOKEN_KEY, Learner, ServerProcess

pytestmark = pytest.mark.slow

UNAVAILABLE = "The progress store is not reachable right now"
FAILED_LINE = "progress store failed; answered {method} {path} with 503"
# What a traceback or uvicorn's own report of an escaped exception puts in the log.
NOT_IN_LOG = ("Traceback", "Exception in ASGI application")
# The busy timeout the SQLite tests give the server, in seconds: far below the default, so
# the held lock outlasts it at once.
TEST_BUSY_TIMEOUT_S = 0.2
# lock_timeout the PostgreSQL lock tests give the server, in milliseconds.
TEST_LOCK_TIMEOUT_MS = 200
# How long the termination test waits for the server's session to block on the lock.
WAIT_FOR_BLOCKED_S = 60.0
TAKEAWAY = "written during the fault"
PREDICTION = {"choice": "residual"}


def _assert_unavailable(answer: httpx.Response, *, page: bool = False) -> None:
    assert answer.status_code == 503, (answer.request.url, answer.status_code, answer.text)
    assert answer.headers.get("retry-after", "").isdigit()
    assert "Traceback" not in answer.text
    assert "sqlalchemy" not in answer.text.lower()
    if page:
        assert answer.headers["content-type"].startswith("text/html")
        assert UNAVAILABLE in answer.text
    else:
        body = answer.json()
        assert body["ok"] is False and UNAVAILABLE in body["message"]


def _full_log(server: ServerProcess) -> str:
    return server.log_path.read_text(errors="replace")


def _assert_logged_once_each(server: ServerProcess, answers: list[httpx.Response]) -> None:
    """Each 503 is one line naming its request; nothing in the log is a traceback."""
    log = _full_log(server)
    for needle in NOT_IN_LOG:
        assert needle not in log, log[-4000:]
    for answer in answers:
        line = FAILED_LINE.format(method=answer.request.method, path=answer.request.url.path)
        assert line in log, log[-4000:]
    failures = sum(1 for row in log.splitlines() if "progress store failed" in row)
    assert failures == len(answers), log[-4000:]


def _token(learner: Learner) -> str:
    return str(learner.state()[TOKEN_KEY])


def _page_post(learner: Learner, token: str, path: str, data: dict[str, str]) -> httpx.Response:
    """A form post as a browser without the page script makes it: the answer is a page."""
    headers = {TOKEN_HEADER: token, "Accept": "text/html"}
    return learner.http.post(learner.base_url + path, data=data, headers=headers)


def _host_report(base_url: str, learner_id: str) -> httpx.Response:
    return httpx.post(
        base_url + "/api/prerequisite",
        json={"learner_id": learner_id},
        headers={"Authorization": f"Bearer {HOST_TOKEN}"},
        timeout=60,
    )


def _writes(learner: Learner, token: str, newcomer: Learner) -> list[httpx.Response]:
    """Every kind of write, each answered 503 while the database refuses writes: a single
    event on the raw-cursor path (a takeaway), a multi-statement one (the opening prediction
    and its tally), a form answered with a page, a new learner's first write (`newcomer` has
    its cookie and form token already), the host API reporting a learner not stored yet."""
    return [
        learner.post("/takeaway", {"text": TAKEAWAY}),
        learner.post("/predict", PREDICTION),
        _page_post(learner, token, "/takeaway", {"text": TAKEAWAY}),
        newcomer.post("/takeaway", {"text": TAKEAWAY}),
        _host_report(learner.base_url, new_learner_id()),
    ]


def _assert_writes_refused(writes: list[httpx.Response]) -> None:
    takeaway, predict, page, newcomer, host = writes
    for answer in (takeaway, predict, newcomer, host):
        _assert_unavailable(answer)
    _assert_unavailable(page, page=True)


def _stored(url: str, learner_id: str) -> tuple[list[EventKind], int, int]:
    """(the learner's event kinds, the prediction tallies' total, the learners stored)."""
    engine = make_engine(url)
    try:
        kinds = [event.kind for event in Store(engine).events_for(learner_id)]
        with engine.connect() as connection:
            tallied = connection.execute(select(func.sum(PredictionTally.learners))).scalar()
            learners = connection.execute(select(func.count()).select_from(LearnerRow)).scalar()
    finally:
        engine.dispose()
    return kinds, int(tallied or 0), int(learners or 0)


def _sqlite_path(url: str) -> Path:
    database = make_url(url).database
    assert database
    return Path(database)


@pytest.fixture
def sqlite_url(database_url: str) -> str:
    """The test's migrated SQLite file, as the server gets it: with a small busy timeout."""
    return f"{database_url}?timeout={TEST_BUSY_TIMEOUT_S}"


def test_sqlite_write_lock_held_past_the_busy_timeout(sqlite_url: str, tmp_path: Path) -> None:
    with ServerProcess(sqlite_url, tmp_path) as server:
        learner, newcomer = Learner(server.url), Learner(server.url)
        try:
            assert learner.post("/takeaway", {"text": "before"}).status_code == 200
            learner_id, token = learner.id, _token(learner)
            newcomer.state()
            before = _stored(sqlite_url, learner_id)

            holder = sqlite3.connect(_sqlite_path(sqlite_url), isolation_level=None)
            try:
                holder.execute("BEGIN IMMEDIATE")
                writes = _writes(learner, token, newcomer)
                # Reading needs no lock (WAL): pages and state are served meanwhile.
                assert learner.get("/").status_code == 200
                assert learner.get("/healthz").status_code == 200
            finally:
                holder.execute("ROLLBACK")
                holder.close()

            _assert_writes_refused(writes)
            _assert_logged_once_each(server, writes)
            assert _stored(sqlite_url, learner_id) == before
            assert learner.post("/predict", PREDICTION).status_code == 200
            kinds, tallied, _ = _stored(sqlite_url, learner_id)
            assert kinds.count(EventKind.PREDICTION_COMMITTED) == 1 and tallied == 1
        finally:
            learner.close()
            newcomer.close()
        assert server.alive


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """`path` cannot be opened for writing, even by root, until the block ends."""
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None:
            pytest.fail("root ignores file modes, and chattr (e2fsprogs) is not installed")
        made = subprocess.run([chattr, "+i", str(path)], capture_output=True, check=False)
        undo = [chattr, "-i", str(path)]
    else:
        mode = path.stat().st_mode
        path.chmod(0o444)
        made = subprocess.CompletedProcess([], 0)
        undo = []
    try:
        if os.access(path, os.W_OK):
            pytest.fail(f"this file system lets the file be written anyway ({made.stderr!r})")
        yield
    finally:
        if undo:
            subprocess.run(undo, check=False)
        else:
            path.chmod(mode)


def test_sqlite_file_read_only_then_writable_again(sqlite_url: str, tmp_path: Path) -> None:
    path = _sqlite_path(sqlite_url)
    learner_id = Store(seeding := make_engine(sqlite_url)).create_learner()
    Store(seeding).append(learner_id, EventKind.TAKEAWAY_SAVED, {"text": "before"})
    before = _stored(sqlite_url, learner_id)
    # Keeps the WAL and its index in place, as a running server's other connections would.
    keeper = sqlite3.connect(path, isolation_level=None)
    keeper.execute("SELECT count(*) FROM events").fetchall()
    server = ServerProcess(sqlite_url, tmp_path)
    learner, newcomer = Learner(server.url).carry(learner_id), Learner(server.url)
    try:
        with _read_only(path):
            server.start()
            token = _token(learner)
            newcomer.state()
            writes = _writes(learner, token, newcomer)
            assert learner.get("/").status_code == 200
        _assert_writes_refused(writes)
        _assert_logged_once_each(server, writes)
        assert _stored(sqlite_url, learner_id) == before
        # The same server, the file writable again: written at once, without a restart.
        saved = learner.post("/predict", PREDICTION)
        assert saved.status_code == 200, saved.text
        kinds, tallied, _ = _stored(sqlite_url, learner_id)
        assert kinds.count(EventKind.PREDICTION_COMMITTED) == 1 and tallied == 1
        assert server.alive
    finally:
        learner.close()
        newcomer.close()
        server.stop()
        keeper.close()
        seeding.dispose()


def _lock(connection: Connection, tables: list[str]) -> None:
    connection.execute(text("BEGIN"))
    listed = ", ".join(f'"{table}"' for table in tables)
    connection.execute(text(f"LOCK TABLE {listed} IN ACCESS EXCLUSIVE MODE"))


def _all_tables(connection: Connection) -> list[str]:
    return list(
        connection.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        ).scalars()
    )


@contextlib.contextmanager
def _admin(url: str) -> Iterator[Connection]:
    engine = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def _with_lock_timeout(url: str) -> str:
    return str(
        make_url(url)
        .update_query_dict({"options": f"-c lock_timeout={TEST_LOCK_TIMEOUT_MS}"})
        .render_as_string(hide_password=False)
    )


def _instructor(base_url: str) -> httpx.Client:
    """A browser holding the instructor view's access (from an instructor link)."""
    browser = httpx.Client(timeout=60)
    link = instructor_link(base_url, Pool(context_key=None), SecretStr(SECRET_KEY))
    opened = browser.get(link)
    assert opened.status_code == 303, opened.text
    return browser


@pytest.mark.postgresql
def test_postgresql_tables_locked_past_the_lock_timeout(postgres_url: str, tmp_path: Path) -> None:
    url = _with_lock_timeout(postgres_url)
    with ServerProcess(url, tmp_path) as server:
        learner, newcomer = Learner(server.url), Learner(server.url)
        instructor = _instructor(server.url)
        try:
            assert learner.post("/takeaway", {"text": "before"}).status_code == 200
            learner_id, token = learner.id, _token(learner)
            newcomer.state()
            before = _stored(postgres_url, learner_id)
            base = server.url
            with _admin(postgres_url) as holder:
                _lock(holder, _all_tables(holder))
                writes = _writes(learner, token, newcomer)
                pages = [learner.get("/"), instructor.get(base + "/instructor")]
                answers = [
                    learner.get("/api/state"),
                    learner.get("/", headers=JSON),
                    instructor.get(base + "/instructor/aggregate.json", headers=JSON),
                    instructor.get(base + "/instructor/export.csv", headers=JSON),
                    httpx.get(base + "/lti/jwks", headers=JSON, timeout=60),
                ]
                # The database answers; only its tables are locked.
                assert learner.get("/healthz").status_code == 200
                holder.execute(text("ROLLBACK"))
            _assert_writes_refused(writes)
            for page in pages:
                _assert_unavailable(page, page=True)
            for answer in answers:
                _assert_unavailable(answer)
            _assert_logged_once_each(server, writes + pages + answers)
            assert _stored(postgres_url, learner_id) == before
            assert learner.post("/predict", PREDICTION).status_code == 200
            assert instructor.get(base + "/instructor/export.csv").status_code == 200
        finally:
            learner.close()
            newcomer.close()
            instructor.close()
        assert server.alive


def _blocked_backend(admin: Connection, database: str) -> int:
    """The pid of the server's session once it waits for a lock."""
    deadline = time.monotonic() + WAIT_FOR_BLOCKED_S
    while time.monotonic() < deadline:
        pid = admin.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = :database "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            ),
            {"database": database},
        ).scalar()
        if pid is not None:
            return int(pid)
        time.sleep(0.05)
    raise AssertionError("the server's session never waited for the lock")


def _in_background(call: Callable[[], httpx.Response]) -> Callable[[], httpx.Response]:
    """Runs `call` in a thread at once; the function returned waits for its answer."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(call()))
    thread.start()

    def answer() -> httpx.Response:
        thread.join(timeout=WAIT_FOR_BLOCKED_S)
        assert answers, "no answer came"
        result: httpx.Response = answers[0]
        return result

    return answer


@pytest.mark.postgresql
@pytest.mark.parametrize("ended_by", ["lock_timeout", "pg_terminate_backend"])
def test_postgresql_prediction_cut_after_its_event_rolls_back_whole(
    postgres_url: str, tmp_path: Path, ended_by: str
) -> None:
    """The tally is written after the event, in the same transaction: with the tally table
    locked, the event is written and the transaction then waits, until lock_timeout ends it
    or its session is terminated (the server going away under the request). Neither the
    event nor a tally is left."""
    url = _with_lock_timeout(postgres_url) if ended_by == "lock_timeout" else postgres_url
    database = make_url(postgres_url).database
    assert database
    with ServerProcess(url, tmp_path) as server:
        learner = Learner(server.url)
        try:
            assert learner.post("/takeaway", {"text": "before"}).status_code == 200
            learner_id = learner.id
            before = _stored(postgres_url, learner_id)
            with _admin(postgres_url) as holder, _admin(postgres_url) as admin:
                _lock(holder, [PredictionTally.__tablename__])
                answer = _in_background(lambda: learner.post("/predict", PREDICTION))
                if ended_by == "pg_terminate_backend":
                    pid = _blocked_backend(admin, database)
                    admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                refused = answer()
                holder.execute(text("ROLLBACK"))
            _assert_unavailable(refused)
            _assert_logged_once_each(server, [refused])
            assert _stored(postgres_url, learner_id) == before
            # The same server serves again at once: the ended session was replaced.
            assert learner.post("/predict", PREDICTION).status_code == 200
            kinds, tallied, _ = _stored(postgres_url, learner_id)
            assert kinds.count(EventKind.PREDICTION_COMMITTED) == 1 and tallied == 1
        finally:
            learner.close()
        assert server.alive


def _locked_rows() -> Iterator[bytes]:
    raise sqlite3.OperationalError("database is locked")
    yield b""  # a generator, as a streamed export's rows are


def _rows_then_gone() -> Iterator[bytes]:
    yield b"learner,parts\n"
    raise psycopg.OperationalError("terminating connection due to administrator command")


def _rows_then_a_bug() -> Iterator[bytes]:
    raise ValueError("a bug, not the database")
    yield b""


def _streaming(rows: Callable[[], Iterator[bytes]]) -> Callable[[Request], StreamingResponse]:
    def route(_request: Request) -> StreamingResponse:
        return StreamingResponse(rows())

    return route


def test_a_streamed_body_failing_on_the_database_is_a_503_or_cut_short(
    make_settings: SettingsFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The streamed export's shape (a route returns, the body's rows are read as it is sent),
    raising the drivers' own errors where Starlette's route handlers can no longer answer."""
    app = create_app(make_settings())
    for path, rows in (
        ("/locked", _locked_rows),
        ("/gone", _rows_then_gone),
        ("/bug", _rows_then_a_bug),
    ):
        app.add_route(path, _streaming(rows))
    with TestClient(app, raise_server_exceptions=False) as client:
        locked = client.get("/locked", headers=JSON)
        gone = client.get("/gone")
        bug = client.get("/bug")
    _assert_unavailable(locked)
    # The first bytes went out: the answer ends there, never passed off as whole.
    assert gone.status_code == 200 and gone.text == "learner,parts\n"
    # Not the database: Starlette's readable 500, as for any other bug.
    assert bug.status_code == 500 and "Something went wrong on our side" in bug.text
    failures = [r for r in caplog.records if "progress store failed" in r.getMessage()]
    assert [r.exc_info for r in failures] == [None, None]
    assert "answered GET /locked with 503: database is locked" in failures[0].getMessage()
    assert "GET /gone was being answered; the response is cut short" in failures[1].getMessage()


def test_the_raw_cursor_path_raises_what_sqlalchemy_raises(sqlite_url: str) -> None:
    """The hot path's own cursor (a single event appended) fails as SQLAlchemy's statements
    do, so that its callers and the app's 503 meet one family of errors."""
    engine = make_engine(sqlite_url)
    store = Store(engine)
    learner_id = store.create_learner()
    holder = sqlite3.connect(_sqlite_path(sqlite_url), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(OperationalError, match="database is locked"):
            store.append_decided(
                learner_id, lambda _: [(EventKind.TAKEAWAY_SAVED, {"text": TAKEAWAY})], EventList()
            )
        holder.execute("ROLLBACK")
        assert store.events_for(learner_id) == []
    finally:
        holder.close()
        engine.dispose()


@pytest.mark.postgresql
def test_postgresql_waits_for_a_lock_as_long_as_a_sqlite_writer(postgres_url: str) -> None:
    def lock_timeout(url: str) -> str:
        engine = make_engine(url)
        try:
            with engine.connect() as connection:
                return str(connection.execute(text("SHOW lock_timeout")).scalar())
        finally:
            engine.dispose()

    assert POSTGRESQL_LOCK_TIMEOUT_MS == SQLITE_BUSY_TIMEOUT_S * 1000
    assert lock_timeout(postgres_url) == f"{POSTGRESQL_LOCK_TIMEOUT_MS // 1000}s"
    # The URL's own (or the server's, the database's, the role's) stands.
    assert lock_timeout(_with_lock_timeout(postgres_url)) == f"{TEST_LOCK_TIMEOUT_MS}ms"
