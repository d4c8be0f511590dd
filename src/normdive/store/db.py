"""Engines and migrations for the progress store.

`make_engine(url)` takes a SQLite or PostgreSQL URL (normdive.config's settings refuse any
other database, whose driver normdive does not install). SQLite connections get WAL (readers
never block the writer), foreign keys (SQLite leaves them off by default, and ON DELETE CASCADE
needs them) and a busy timeout (a writer waits for the lock instead of failing at once), all
set on each new connection. PostgreSQL is used as it is; a bare `postgresql://` URL is given
the psycopg 3 driver, the one normdive installs, and a connect timeout unless the URL sets
one. Every pooled PostgreSQL connection is pinged before use, so after the server restarts (or
comes back from an outage, during which requests get a 503) the next request is served again.

`upgrade(url)` runs the Alembic migrations packaged in store/migrations up to head, without an
alembic.ini: the script location is this package's folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from normdive.config import POSTGRESQL_DRIVER

# How long a SQLite writer waits for another's lock before giving up, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 10_000
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
        # pre_ping: a worker survives the database restarting under it.
        return create_engine(parsed, pool_pre_ping=True)
    engine = create_engine(parsed)
    event.listen(engine, "connect", _configure_sqlite)
    return engine


def _configure_sqlite(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()


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


def failure_reason(error: SQLAlchemyError) -> str:
    """The driver's own message, without SQLAlchemy's statement dump and documentation link."""
    return str(getattr(error, "orig", None) or error).strip().splitlines()[0]
