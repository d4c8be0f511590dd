"""Engines and migrations for the progress store.

`make_engine(url)` takes a SQLite or PostgreSQL URL (normdive.config's settings refuse any
other database, whose driver normdive does not install). SQLite connections get WAL (readers
never block the writer), foreign keys (SQLite leaves them off by default, and ON DELETE CASCADE
needs them), set on each new connection, and a busy timeout: a writer waits this long for
another's lock, then fails (a 503 in the web app) instead of waiting for ever; the URL's own
`timeout` (pysqlite's, in seconds) replaces the default. A bare `postgresql://` URL is given
the psycopg 3 driver, the one normdive installs, and a connect timeout unless the URL sets
one. Every PostgreSQL session waits at most as long for a lock as SQLite's writer does
(lock_timeout), unless the server, the database, the role or the URL's `options` set one.
A pooled PostgreSQL connection is checked before use without a round trip: an idle
connection's server sends nothing unless it is ending the session (a shutdown, a restart, a
terminated backend: a FATAL message, then the end of the stream), so one whose socket has
anything to read, or that psycopg already knows is broken, is replaced by a new one. After the
server restarts (or comes back from an outage, during which requests get a 503) the next
request is served again. SQLAlchemy's pool_pre_ping would do the same with a message exchange
(psycopg's dialect sends an empty statement) at every checkout: a round trip more for every
read (bench/RESULTS.md, "Load").

Database failures. `DATABASE_ERRORS` are what a failing database raises: SQLAlchemy's errors
and the drivers' own, which a raw cursor raises (store.event_store wraps its hot path's in
SQLAlchemy's; store.snapshots handles its own). A connection the database failed
(discards_connection: it refused a write as read-only, its lock wait timed out, its session or
file failed) is thrown away, never handed out again; the next request opens a fresh one. A
PostgreSQL session keeps the default_transaction_read_only it began with, so one that began
read-only is replaced after READ_ONLY_SESSION_S too. SQLite needs more (_SqliteConnections):
a process's connections to one file share one WAL index (the -shm, mapped into memory), opened
by the first of them and closed with the last; opened while the file could not be written, it
is read-only, and every connection sharing it refuses writes, fresh ones to a file writable
again included. So once the file can be written again, the connections of that view are
closed (idle ones at once, ones in use as their requests end, within milliseconds), and a new
connection waits until they have. The next request writes, without a restart (within 0.1 s in
tests/test_ops_write_recovery.py; bench/RESULTS.md, "Write recovery").

`upgrade(url)` runs the Alembic migrations packaged in store/migrations up to head, without an
alembic.ini: the script location is this package's folder.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import sqlite3
import threading
import time
import weakref
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from psycopg.errors import ReadOnlySqlTransaction
from sqlalchemy import Dialect, Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DisconnectionError, SQLAlchemyError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from normdive.config import POSTGRESQL_DRIVER

# How long a SQLite writer waits for another's lock before giving up, in seconds (pysqlite's
# `timeout`, which sets SQLite's busy timeout), unless the URL's `timeout` says otherwise.
SQLITE_BUSY_TIMEOUT_S = 10.0
# How long a PostgreSQL statement waits for a lock (a row, a table, a learner's advisory lock)
# before it fails, in milliseconds: as long as a SQLite writer waits. Without it, a session
# holding a lock (a forgotten transaction, a manual LOCK TABLE) would hold every request that
# needs it, and with them the request threads, /healthz included.
POSTGRESQL_LOCK_TIMEOUT_MS = int(SQLITE_BUSY_TIMEOUT_S * 1000)
# PostgreSQL's "no limit" for lock_timeout, as SHOW prints it.
POSTGRESQL_NO_TIMEOUT = "0"
# The isolation every PostgreSQL transaction of the store runs at (_configure_postgresql).
POSTGRESQL_ISOLATION = "read committed"
# SQLite's primary result code for a write refused on a read-only database; the extended
# codes (SQLITE_READONLY_DBMOVED, ...) carry it in their low byte.
SQLITE_READONLY = 8
SQLITE_PRIMARY_CODE_MASK = 0xFF
# Where a SQLite connection's record keeps the path of the file it opened read-only.
READ_ONLY_FILE = "normdive_read_only_file"
# The files SQLite keeps beside a database in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm")
# How long opening a SQLite connection waits, at most, for the connections that share a
# read-only view of the file to close, in seconds. Requests close theirs within milliseconds;
# past this (a request holding two connections, a slow streamed export), the new connection
# opens anyway, and the wait begins again if it too is refused a write.
SQLITE_VIEW_WAIT_S = 2.0
# Where a pooled PostgreSQL connection's record keeps when its session began read-only
# (default_transaction_read_only on: the server, the database or the role set it).
READ_ONLY_SINCE = "normdive_read_only_since"
# How long a PostgreSQL session that began read-only is handed out, in seconds: a session
# keeps the default it began with, so once the database takes writes again, sessions made
# meanwhile are replaced within this.
READ_ONLY_SESSION_S = 1.0
# What a failing database raises: SQLAlchemy's errors, and the drivers' own from raw cursors.
DATABASE_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, sqlite3.Error, psycopg.Error)
# How long opening a PostgreSQL connection may take, in seconds, unless the URL says otherwise
# (libpq's connect_timeout). Without it, a database host that drops packets would hold each
# request for the operating system's TCP timeout (minutes) instead of answering 503.
POSTGRESQL_CONNECT_TIMEOUT_S = 5


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite connections are set up for concurrent use."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername=POSTGRESQL_DRIVER)
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        parsed = parsed.update_query_dict({"connect_timeout": str(POSTGRESQL_CONNECT_TIMEOUT_S)})
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(parsed)
        event.listen(engine, "connect", _configure_postgresql)
        # A worker survives the database restarting under it.
        event.listen(engine, "checkout", _replace_when_ended)
        event.listen(engine, "handle_error", _discard_failed)
        return engine
    # The URL's own timeout (pysqlite's parameter) stands; the dialect reads it from there.
    busy = {} if "timeout" in parsed.query else {"timeout": SQLITE_BUSY_TIMEOUT_S}
    engine = create_engine(parsed, connect_args=busy)
    event.listen(engine, "connect", _configure_sqlite)
    event.listen(engine, "handle_error", _discard_failed)
    if parsed.database not in (None, "", ":memory:"):
        connections = _SqliteConnections(parsed.database)
        _SQLITE_CONNECTIONS[engine] = connections
        event.listen(engine, "do_connect", connections.before_connect)
        event.listen(engine, "connect", connections.opened)
        event.listen(engine, "checkout", connections.checkout)
        event.listen(engine, "checkin", connections.checkin)
        event.listen(engine, "close", connections.closed)
    return engine


def _configure_sqlite(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # (seq, name, file) per attached database; "" for one in memory.
        path = next(row[2] for row in cursor.execute("PRAGMA database_list") if row[1] == "main")
    finally:
        cursor.close()
    # SQLite opens a file it may not write read-only, without a word, and the connection
    # stays so; its record remembers the file, so checkout can tell when that changes.
    record.info[READ_ONLY_FILE] = path if path and not _writable(path) else None


def _writable(path: str) -> bool:
    """Whether this process may open `path`, and its -wal and -shm where they exist, for
    writing now, as SQLite tries first (file modes, the immutable attribute, a read-only
    mount): a connection that opened any of them read-only refuses writes for as long as it
    lives. access(2) opens nothing: closing a descriptor of the database file would drop
    every lock SQLite holds on it in this process (POSIX advisory locks belong to the process
    and the file, not the descriptor)."""
    return all(
        os.access(name, os.W_OK)
        for name in (path, *(path + suffix for suffix in SQLITE_SIDE_FILES))
        if name == path or os.path.exists(name)
    )


class _SqliteConnections:
    """One SQLite engine's open connections, numbered by the view of the file they share.

    SQLite's unix VFS keeps one WAL index (the -shm, mapped into memory) per database file per
    process, shared by every connection of the process to the file: the first connection that
    needs it opens it, and the last to close closes it. Opened while the -shm could not be
    written, it is read-only, and every connection sharing it refuses writes (SQLITE_READONLY),
    fresh ones to a file writable again included, for as long as any of them stays open.

    So once the file can be written again, after a connection opened read-only is seen open or
    a write is refused as read-only, the view is renewed (`_renew`): the connections open then
    belong to the old view; the idle ones are closed at once, the ones in use when their request
    gives them back (or, should the pool hand one out first, at checkout, where the pool opens
    another in its place). A new connection waits (at most SQLITE_VIEW_WAIT_S) until no
    connection of an old view is open, so it opens the WAL index afresh; a thread that holds one
    itself is refused at once (its request answers 503 and lets go), since the new connection
    would share its view. Connections opened read-only are never pooled. One engine per file
    per process: normdive opens one per database."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._changed = threading.Condition()
        self._view = 0
        # id(record) -> the record, its view, and the thread holding it (None: idle).
        self._open: dict[int, tuple[ConnectionPoolEntry, int, int | None]] = {}
        self._collected_view = 0

    def _old_view_open(self) -> bool:
        return any(view != self._view for _, view, _ in self._open.values())

    def _read_only_open(self) -> bool:
        return any(record.info.get(READ_ONLY_FILE) for record, _, _ in self._open.values())

    def _renew(self) -> None:
        """Under the lock: a new view; the idle connections of the old one are closed now."""
        self._view += 1
        for key, (record, _, holder) in list(self._open.items()):
            if holder is None:
                with contextlib.suppress(sqlite3.Error):
                    record.dbapi_connection.close()  # type: ignore[union-attr]
                del self._open[key]
        self._changed.notify_all()

    def before_connect(
        self, _dialect: Dialect, _record: ConnectionPoolEntry, _cargs: Any, _cparams: Any
    ) -> None:
        """do_connect: once the file can be written, no new connection shares an old view."""
        with self._changed:
            if not _writable(self._path):
                return
            if self._read_only_open() and not self._old_view_open():
                self._renew()
            if not self._old_view_open():
                return
            me = threading.get_ident()
            if any(holder == me for _, _, holder in self._open.values()):
                raise sqlite3.OperationalError(
                    "this request holds a connection to a read-only view of the database file"
                )
            self._changed.wait_for(lambda: not self._old_view_open(), timeout=SQLITE_VIEW_WAIT_S)
            if self._collected_view != self._view:
                self._collected_view = self._view
                # A closed connection whose statements are still referenced (a cursor in a
                # reference cycle) stays open inside SQLite, with its view, until they are freed.
                gc.collect()

    def opened(self, _dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        with self._changed:
            self._open[id(record)] = (record, self._view, threading.get_ident())

    def checkout(
        self, _dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
    ) -> None:
        with self._changed:
            key = id(record)
            # Not open: _renew closed it while it was idle in the pool.
            if key not in self._open:
                raise DisconnectionError("closed with an old view of the SQLite file")
            _, view, _ = self._open[key]
            self._open[key] = (record, view, threading.get_ident())
            if view != self._view:
                raise DisconnectionError("opened with an old view of the SQLite file")

    def checkin(self, dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # None: the pool has thrown the connection away already.
        if dbapi_connection is None:
            return
        with self._changed:
            entry = self._open.get(id(record))
            if entry is not None:
                self._open[id(record)] = (record, entry[1], None)
            old = entry is None or entry[1] != self._view
        if old or record.info.get(READ_ONLY_FILE) is not None:
            record.invalidate()

    def closed(self, dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # The pool says "close" before it closes the connection: closed here first (closing
        # again is harmless), so that a connection waiting in before_connect never opens while
        # this one still holds the view.
        with contextlib.suppress(sqlite3.Error):
            dbapi_connection.close()
        with self._changed:
            self._open.pop(id(record), None)
            self._changed.notify_all()

    def refused(self) -> None:
        """A write was refused as read-only: if the file can be written now, the connections
        open share a read-only view of it, and it is renewed."""
        if _writable(self._path):
            with self._changed:
                self._renew()


# Each SQLite engine's connections (make_engine), for the failures met outside SQLAlchemy's
# own execution (store.event_store's raw cursors).
_SQLITE_CONNECTIONS: weakref.WeakKeyDictionary[Engine, _SqliteConnections] = (
    weakref.WeakKeyDictionary()
)


def _configure_postgresql(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    with dbapi_connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('lock_timeout'), "
            "current_setting('default_transaction_read_only')"
        )
        lock_timeout, read_only = cursor.fetchone()
        if lock_timeout == POSTGRESQL_NO_TIMEOUT:
            cursor.execute(f"SET lock_timeout = {POSTGRESQL_LOCK_TIMEOUT_MS}")
        record.info[READ_ONLY_SINCE] = time.monotonic() if read_only == "on" else None
        # The compare-and-append (event_store) sees a row a concurrent append committed while
        # it waited for the learner's lock only under READ COMMITTED, PostgreSQL's default: a
        # server or role set to a stricter default would refuse or miss it. Once per connection.
        cursor.execute(f"SET default_transaction_isolation = '{POSTGRESQL_ISOLATION}'")
    # SET outlives the transaction it opened once that commits.
    dbapi_connection.commit()


def _replace_when_ended(
    dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
) -> None:
    since = record.info.get(READ_ONLY_SINCE)
    if since is not None and time.monotonic() - since > READ_ONLY_SESSION_S:
        raise DisconnectionError("the PostgreSQL session began read-only")
    # Between requests nothing is owed by either side: anything the server sent since (its
    # FATAL "terminating connection", or the end of the stream) means the session is over.
    # (A LISTENing session's NOTIFY would read so too; nothing here LISTENs, and a needless
    # replacement costs one connect.)
    if dbapi_connection.closed:
        raise DisconnectionError("the PostgreSQL connection is closed")
    # poll, not select: select cannot watch a descriptor numbered FD_SETSIZE (1024) or more.
    waiting = select.poll()
    waiting.register(dbapi_connection.fileno(), select.POLLIN)
    if waiting.poll(0):
        raise DisconnectionError("the PostgreSQL server ended the session")


def is_read_only(error: BaseException) -> bool:
    """Whether `error` is SQLite refusing a write on a read-only database."""
    code = getattr(error, "sqlite_errorcode", None)
    return (
        isinstance(error, sqlite3.Error)
        and isinstance(code, int)
        and code & SQLITE_PRIMARY_CODE_MASK == SQLITE_READONLY
    )


def discards_connection(error: BaseException) -> bool:
    """Whether a connection that raised the driver's `error` is thrown away rather than
    handed out again: the database failed it (it refused a write as read-only, its lock wait
    timed out, its session or file failed), not the statement. A fresh connection costs a
    connect; a kept one may refuse every write for as long as it lives (SQLite's read-only
    connections, PostgreSQL's read-only sessions)."""
    return is_read_only(error) or isinstance(
        error, sqlite3.OperationalError | psycopg.OperationalError | ReadOnlySqlTransaction
    )


def release_read_only_view(engine: Engine, error: BaseException) -> None:
    """After SQLite refused a write as read-only: if the file can be written now, the
    connections that share the read-only view of it are replaced (_SqliteConnections)."""
    connections = _SQLITE_CONNECTIONS.get(engine)
    if connections is not None and is_read_only(error):
        connections.refused()


def _discard_failed(context: ExceptionContext) -> None:
    # As a "disconnect", the connection is invalidated. After a PostgreSQL session refused a
    # write as read-only, the pool's others made before are replaced too: they began under the
    # same setting. SQLite's share the view of the file, renewed by release_read_only_view.
    error = context.original_exception
    if context.engine is not None:
        release_read_only_view(context.engine, error)
    if discards_connection(error):
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = isinstance(error, ReadOnlySqlTransaction)


def alembic_config(engine: Engine) -> Config:
    """An Alembic Config pointing at the packaged migrations, bound to `engine`."""
    config = Config()
    config.set_main_option(
        "script_location", str(resources.files("normdive.store").joinpath("migrations"))
    )
    # env.py takes the engine from here rather than from a URL in an ini file.
    config.attributes["engine"] = engine
    return config


def upgrade(url: str) -> None:
    """Bring the database at `url` to the newest schema (alembic upgrade head)."""
    engine = make_engine(url)
    try:
        command.upgrade(alembic_config(engine), "head")
    finally:
        engine.dispose()


def create_sqlite_folder(url: str) -> None:
    """For a SQLite file URL, create the folder the file goes in (SQLite creates the file but
    not its folder); any other URL is left alone."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)


def shown_url(url: str) -> str:
    """`url` as messages show it: the password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def is_database_failure(error: BaseException) -> bool:
    """Whether `error` is the database failing (DATABASE_ERRORS), alone or as every one of
    an exception group's."""
    if isinstance(error, BaseExceptionGroup):
        _, rest = error.split(DATABASE_ERRORS)
        return rest is None
    return isinstance(error, DATABASE_ERRORS)


def failure_reason(error: BaseException) -> str:
    """The driver's own message in one line, without SQLAlchemy's statement dump and
    documentation link."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(failure_reason(one) for one in error.exceptions)
    lines = str(getattr(error, "orig", None) or error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
