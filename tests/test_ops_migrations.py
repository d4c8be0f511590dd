"""The Alembic migrations on both databases: from empty to head they build exactly the models'
schema (JSONB payloads and BIGINT identity ids on PostgreSQL), run again they change nothing,
down to nothing and up again they still hold, and `normdive db upgrade` does it from a bare
`postgresql://` URL as an operator would write it. The tallies migration counts the
predictions stored before it exactly as the store counts them after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import insert, inspect, text
from typer.testing import CliRunner

from helpers import DATABASES, PostgresDatabases
from normdive.cli import app
from normdive.progress.aggregate import PredictionCounts
from normdive.progress.events import EventKind
from normdive.store.db import alembic_config, make_engine, upgrade
from normdive.store.event_store import Store
from normdive.store.tables import Base, EventRecord

pytestmark = pytest.mark.both_databases

TABLES = {
    "learners",
    "events",
    "alembic_version",
    "prediction_tallies",
    "learner_snapshots",
    "lti_registrations",
    "lti_deployments",
    "lti_states",
    "lti_nonces",
    "lti_platform_key_sets",
    "lti_tool_keys",
    "lti_learners",
    "lti_context_members",
    "lti_grade_targets",
    "lti_score_outbox",
    "lti_used_invites",
    "lti_roster_services",
    "lti_roster_members",
    "lti_link_lineitems",
    "lti_learner_links",
    "xapi_lrs",
    "xapi_outbox",
}


@pytest.fixture(params=DATABASES)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (no tables at all): a new SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        return
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    url = databases.create(migrated=False)
    yield url
    databases.drop(url)


def _head() -> str:
    engine = make_engine("sqlite://")
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    engine.dispose()
    assert head is not None
    return head


def _version(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return list(
                connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
            )
    finally:
        engine.dispose()


def _schema_differences(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_from_empty_to_head_builds_exactly_the_models(empty_url: str) -> None:
    upgrade(empty_url)
    engine = make_engine(empty_url)
    try:
        assert set(inspect(engine).get_table_names()) == TABLES
        if engine.dialect.name == "postgresql":
            columns = {c["name"]: c["type"] for c in inspect(engine).get_columns("events")}
            assert type(columns["payload"]).__name__ == "JSONB"
            assert type(columns["id"]).__name__ == "BIGINT"
    finally:
        engine.dispose()
    assert _version(empty_url) == [_head()]
    assert _schema_differences(empty_url) == []


def test_upgrading_again_changes_nothing(empty_url: str) -> None:
    upgrade(empty_url)
    upgrade(empty_url)
    assert _version(empty_url) == [_head()]
    assert _schema_differences(empty_url) == []


def test_down_to_nothing_and_up_again(empty_url: str) -> None:
    upgrade(empty_url)
    engine = make_engine(empty_url)
    try:
        command.downgrade(alembic_config(engine), "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    upgrade(empty_url)
    assert _version(empty_url) == [_head()]
    assert _schema_differences(empty_url) == []


def test_db_upgrade_takes_a_bare_postgresql_url(postgres_databases: PostgresDatabases) -> None:
    url = postgres_databases.create(migrated=False)
    try:
        bare = url.replace("postgresql+psycopg://", "postgresql://", 1)
        result = CliRunner().invoke(
            app, ["db", "upgrade"], env={"DATABASE_URL": bare, "NORMDIVE_SECRET_KEY": None}
        )
        assert result.exit_code == 0, result.output
        assert "is up to date" in result.output
        assert _version(url) == [_head()]
    finally:
        postgres_databases.drop(url)


def test_the_tallies_migration_counts_what_was_stored_before_it(empty_url: str) -> None:
    engine = make_engine(empty_url)
    try:
        command.upgrade(alembic_config(engine), "0003")
        store = Store(engine)
        learners = [store.create_learner() for _ in range(4)]
        stored = [
            (0, EventKind.PREDICTION_COMMITTED, {"choice": "residual"}),
            (0, EventKind.PREDICTION_COMMITTED, {"choice": "layer_norm"}),  # not the first
            (1, EventKind.PREDICTION_COMMITTED, {"choice": "residual"}),
            (2, EventKind.PREDICTION_COMMITTED, {"choice": "layer_norm"}),
            (3, EventKind.PREDICTION_COMMITTED, {}),  # committed, naming no choice
            (0, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"}),
            (0, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "chance"}),  # not the first
            (0, EventKind.ROW_PREDICTED, {"row": "neither", "outcome": "chance"}),
            (1, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "partial"}),
            (1, EventKind.ROW_PREDICTED, {"outcome": "partial"}),  # no row: counted nowhere
            (2, EventKind.TAKEAWAY_SAVED, {"text": "not a prediction"}),
        ]
        for learner, kind, payload in stored:
            with engine.begin() as connection:  # as 0003's code stored them: plain inserts
                connection.execute(
                    insert(EventRecord).values(
                        learner_id=learners[learner], kind=kind.value, payload=payload
                    )
                )
        command.upgrade(alembic_config(engine), "head")
        migrated = store.prediction_counts()
        assert migrated == PredictionCounts(
            committed=4,
            opening={"residual": 2, "layer_norm": 1},
            rows={"both": {"learns": 1, "partial": 1}, "neither": {"chance": 1}},
        )
        # After it, the store keeps counting from there.
        store.append(learners[3], EventKind.ROW_PREDICTED, {"row": "neither", "outcome": "learns"})
        store.append(learners[3], EventKind.ROW_PREDICTED, {"row": "neither", "outcome": "chance"})
        after = store.prediction_counts()
        assert after.rows["neither"] == {"chance": 1, "learns": 1}
    finally:
        engine.dispose()


def test_the_grade_target_migration_gives_each_stored_target_its_state(empty_url: str) -> None:
    """0009: a target the platform took a score for is sent; one it has none for is due now,
    so the worker sends it on its next round."""
    engine = make_engine(empty_url)
    try:
        command.upgrade(alembic_config(engine), "0008")
        learner = Store(engine).create_learner()
        with engine.begin() as connection:
            registration = connection.execute(
                text(
                    "INSERT INTO lti_registrations (issuer, client_id, auth_login_url, token_url,"
                    " jwks_url, frame_origins, prerequisite_mode) VALUES ('https://lms.example',"
                    " 'c', 'https://lms.example/a', 'https://lms.example/t',"
                    " 'https://lms.example/k', '[]', 'platform') RETURNING id"
                )
            ).scalar_one()
            for key, sent in (("s" * 64, '{"scoreGiven": 1}'), ("d" * 64, None)):
                connection.execute(
                    text(
                        "INSERT INTO lti_grade_targets (learner_id, target_key, registration_id,"
                        " user_id, resource_link_id, lineitem_url, sent_score) VALUES"
                        " (:learner, :key, :registration, 'u', 'l', 'https://lms.example/li',"
                        " :sent)"
                    ),
                    {"learner": learner, "key": key, "registration": registration, "sent": sent},
                )
        command.upgrade(alembic_config(engine), "head")
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT target_key, status, due_at IS NOT NULL, attempts, score_version"
                    " FROM lti_grade_targets ORDER BY target_key"
                )
            ).all()
        assert [tuple(row) for row in rows] == [
            ("d" * 64, "due", True, 0, 0),
            ("s" * 64, "sent", False, 0, 0),
        ]
    finally:
        engine.dispose()


def test_the_roster_migration_keeps_what_was_stored_before_it(empty_url: str) -> None:
    """0010 adds the roster beside the courses stored before it: their launches stay, and a
    roster stored after it goes when it is undone."""
    engine = make_engine(empty_url)
    try:
        command.upgrade(alembic_config(engine), "0009")
        learner = Store(engine).create_learner()
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO lti_context_members (context_key, learner_id, last_launch_at)"
                    " VALUES (:course, :learner, CURRENT_TIMESTAMP)"
                ),
                {"course": "c" * 64, "learner": learner},
            )
        command.upgrade(alembic_config(engine), "0010")
        with engine.begin() as connection:
            registration = connection.execute(
                text(
                    "INSERT INTO lti_registrations (issuer, client_id, auth_login_url, token_url,"
                    " jwks_url, frame_origins, prerequisite_mode) VALUES ('https://lms.example',"
                    " 'c', 'https://lms.example/a', 'https://lms.example/t',"
                    " 'https://lms.example/k', '[]', 'platform') RETURNING id"
                )
            ).scalar_one()
            connection.execute(
                text(
                    "INSERT INTO lti_roster_services (context_key, registration_id, deployment_id,"
                    " memberships_url) VALUES (:course, :registration, 'd',"
                    " 'https://lms.example/m')"
                ),
                {"course": "c" * 64, "registration": registration},
            )
            connection.execute(
                text(
                    "INSERT INTO lti_roster_members (context_key, link_key, status, roles)"
                    " VALUES (:course, :member, 'Active', 'Learner')"
                ),
                {"course": "c" * 64, "member": "m" * 64},
            )
        with engine.connect() as connection:
            members = connection.execute(
                text("SELECT link_key, status, name FROM lti_roster_members")
            ).all()
        assert [tuple(row) for row in members] == [("m" * 64, "Active", None)]
        command.downgrade(alembic_config(engine), "0009")
        assert not {"lti_roster_services", "lti_roster_members"} & set(
            inspect(engine).get_table_names()
        )
        with engine.connect() as connection:
            kept = connection.execute(text("SELECT learner_id FROM lti_context_members")).all()
        assert [row[0] for row in kept] == [learner]
    finally:
        engine.dispose()
