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
SQLAlchemy's; store.snapshots handles its own). SQLite opens a file it may not write
read-only, without a word, and such a connection refuses every write (SQLITE_READONLY) for
as long as it lives; a PostgreSQL session keeps the default_transaction_read_only it began
with. So a connection the database failed (discards_connection) is thrown away, never handed
out again, and one made while the database was read-only is replaced as soon as the file can
be written again (SQLite) or after READ_ONLY_SESSION_S (PostgreSQL): the next request
writes, without a restart.

`upgrade(url)` runs the Alembic migrations packaged in store/migrations up to head, without an
alembic.ini: the script location is this package's folder.
"""

from __future__ import annotations

import os
import select
import sqlite3
import time
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from psycopg.errors import ReadOnlySqlTransaction
from sqlalchemy import Engine, create_engine, event
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
# Where a pooled SQLite connection's record keeps the path of the file it opened read-only.
READ_ONLY_FILE = "normdive_read_only_file"
# The files SQLite keeps beside a database in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm")
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
    event.listen(engine, "checkout", _reopen_when_writable)
    event.listen(engine, "checkin", _close_read_only)
    event.listen(engine, "handle_error", _discard_failed)
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


def _reopen_when_writable(
    _dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
) -> None:
    path = record.info.get(READ_ONLY_FILE)
    if path is not None and _writable(path):
        # The pool throws this connection away and hands out a new one, which can write.
        raise DisconnectionError(f"{path} can be written again")


def _close_read_only(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    # Connections of one process to one file share SQLite's view of its -shm (the WAL
    # index): while any connection that opened it read-only stays open, a new connection to
    # the file, writable again, takes that read-only view and refuses writes too. So one
    # opened read-only is closed when it comes back, never kept in the pool.
    if record.info.get(READ_ONLY_FILE) is not None:
        record.invalidate()


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
    """After SQLite refused a write as read-only on a file that can be written now: close the
    pool's idle connections. Connections of one process to one file share SQLite's view of
    its -shm (the WAL index), taken read-only while the file was; every new connection keeps
    taking that view, and refusing writes, until no connection that holds it is open."""
    path = engine.url.database
    if is_read_only(error) and engine.dialect.name == "sqlite" and path and _writable(path):
        engine.dispose()


def _discard_failed(context: ExceptionContext) -> None:
    # As a "disconnect", the connection is invalidated; after a refusal as read-only the
    # pool's others, made before, are replaced too (they share the file or the server).
    error = context.original_exception
    if context.engine is not None:
        release_read_only_view(context.engine, error)
    if discards_connection(error):
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = is_read_only(error) or isinstance(
            error, ReadOnlySqlTransaction
        )


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
