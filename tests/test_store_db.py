"""Engines and migrations on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, make_url, text

from normdive.store.db import (
    POSTGRESQL_CONNECT_TIMEOUT_S,
    POSTGRESQL_ISOLATION,
    READ_ONLY_SESSION_S,
    SQLITE_BUSY_TIMEOUT_S,
    SQLITE_VIEW_WAIT_S,
    alembic_config,
    make_engine,
    upgrade,
)
from normdive.store.tables import Base


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'progress.sqlite3'}"


def test_sqlite_connections_get_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(_url(tmp_path))
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
        busy_ms = connection.execute(text("PRAGMA busy_timeout")).scalar()
        assert busy_ms == SQLITE_BUSY_TIMEOUT_S * 1000
    engine.dispose()


def test_a_sqlite_url_may_set_its_own_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(_url(tmp_path) + "?timeout=0.25")
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 250
    engine.dispose()


def test_a_bare_postgresql_url_gets_the_installed_driver() -> None:
    # Creating an engine does not connect, so no server is needed to check the URL.
    engine = make_engine("postgresql://normdive@db.invalid/normdive")
    assert engine.url.drivername == "postgresql+psycopg"
    assert engine.dialect.name == "postgresql"


def test_a_postgresql_url_gets_a_connect_timeout_unless_it_sets_one() -> None:
    # An unreachable host must give a prompt 503, not hold the request for the TCP timeout.
    default = make_engine("postgresql://normdive@db.invalid/normdive")
    assert default.url.query["connect_timeout"] == str(POSTGRESQL_CONNECT_TIMEOUT_S)
    own = make_engine("postgresql+psycopg://normdive@db.invalid/normdive?connect_timeout=17")
    assert own.url.query["connect_timeout"] == "17"
    assert "connect_timeout" not in make_engine("sqlite://").url.query


def test_upgrade_creates_both_tables_on_an_empty_database(tmp_path: Path) -> None:
    url = _url(tmp_path)
    upgrade(url)
    engine = make_engine(url)
    inspector = inspect(engine)
    assert {"learners", "events", "alembic_version"} <= set(inspector.get_table_names())
    assert [c["name"] for c in inspector.get_columns("events")] == [
        "id",
        "learner_id",
        "kind",
        "payload",
        "created_at",
    ]
    (foreign_key,) = inspector.get_foreign_keys("events")
    assert foreign_key["referred_table"] == "learners"
    assert foreign_key["options"].get("ondelete") == "CASCADE"
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("events")}
    assert indexes["ix_events_learner_id_id"] == ["learner_id", "id"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()


def test_upgrade_twice_changes_nothing(tmp_path: Path) -> None:
    url = _url(tmp_path)
    upgrade(url)
    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
    engine.dispose()


def test_the_migrations_build_exactly_the_models_schema(tmp_path: Path) -> None:
    # If a model changes without a migration (or the reverse), autogenerate sees a difference.
    url = _url(tmp_path)
    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_migration_0002_indexes_events_by_kind_for_the_aggregate(tmp_path: Path) -> None:
    url = _url(tmp_path)
    upgrade(url)
    engine = make_engine(url)
    indexes = {i["name"]: i["column_names"] for i in inspect(engine).get_indexes("events")}
    assert indexes["ix_events_kind_learner_id_id"] == ["kind", "learner_id", "id"]
    with engine.connect() as connection:
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert version == ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    engine.dispose()


def test_postgresql_transactions_are_read_committed_whatever_the_server_default(
    postgres_url: str,
) -> None:
    # The compare-and-append sees a concurrent append only under READ COMMITTED: a server (or
    # role, or database) whose default is stricter must not change the store's isolation.
    strict = (
        make_url(postgres_url)
        .update_query_dict({"options": "-c default_transaction_isolation=serializable"})
        .render_as_string(hide_password=False)
    )
    engine = make_engine(strict)
    try:
        with engine.begin() as connection:
            level = connection.execute(text("SHOW transaction_isolation")).scalar_one()
        assert level == POSTGRESQL_ISOLATION
    finally:
        engine.dispose()


def test_readme_says_how_long_recovery_after_a_read_only_spell_takes() -> None:
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert f"sessions that began read-only are replaced after {READ_ONLY_SESSION_S:g} s" in readme
    assert f"new ones wait for that (at most {SQLITE_VIEW_WAIT_S:g} s)" in readme
