"""LTI 1.3: registered platforms and their deployments, logins in flight (states, nonces),
the platforms' key sets, the tool's own keys, and the learners and courses launches stand for.
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = "0005", "0004"

# The sizes of normdive.store.tables, written out: a migration stays as it was written.
IDENTIFIER = 255
URL = 2048
SECRET = 64
DIGEST = 64
MODE = 20
LEARNER_ID = 32


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _registration_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["registration_id"],
        ["lti_registrations.id"],
        name=f"fk_{table}_registration_id_lti_registrations",
        ondelete="CASCADE",
    )


def _learner_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["learner_id"],
        ["learners.id"],
        name=f"fk_{table}_learner_id_learners",
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "lti_registrations",
        sa.Column("id", sa.Integer(), sa.Identity(), nullable=False),
        sa.Column("issuer", sa.String(IDENTIFIER), nullable=False),
        sa.Column("client_id", sa.String(IDENTIFIER), nullable=False),
        sa.Column("auth_login_url", sa.String(URL), nullable=False),
        sa.Column("token_url", sa.String(URL), nullable=False),
        sa.Column("jwks_url", sa.String(URL), nullable=False),
        sa.Column("frame_origins", _json(), nullable=False),
        sa.Column("prerequisite_mode", sa.String(MODE), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_lti_registrations"),
        sa.UniqueConstraint("issuer", "client_id", name="uq_lti_registrations_issuer_client_id"),
    )
    op.create_table(
        "lti_deployments",
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.String(IDENTIFIER), nullable=False),
        _registration_fk("lti_deployments"),
        sa.PrimaryKeyConstraint("registration_id", "deployment_id", name="pk_lti_deployments"),
    )
    op.create_table(
        "lti_states",
        sa.Column("state", sa.String(SECRET), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("nonce", sa.String(SECRET), nullable=False),
        sa.Column("target_link_uri", sa.String(URL), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("storage_key", sa.CHAR(DIGEST), nullable=True),
        sa.Column("relaunch_query", sa.Text(), nullable=True),
        _registration_fk("lti_states"),
        sa.PrimaryKeyConstraint("state", name="pk_lti_states"),
    )
    op.create_index("ix_lti_states_expires_at", "lti_states", ["expires_at"])
    op.create_table(
        "lti_nonces",
        sa.Column("nonce", sa.String(SECRET), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        _registration_fk("lti_nonces"),
        sa.PrimaryKeyConstraint("nonce", name="pk_lti_nonces"),
    )
    op.create_index("ix_lti_nonces_expires_at", "lti_nonces", ["expires_at"])
    op.create_table(
        "lti_platform_key_sets",
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("key_set", _json(), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        _registration_fk("lti_platform_key_sets"),
        sa.PrimaryKeyConstraint("registration_id", name="pk_lti_platform_key_sets"),
    )
    op.create_table(
        "lti_tool_keys",
        sa.Column("kid", sa.String(SECRET), nullable=False),
        sa.Column("private_jwk", _json(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("kid", name="pk_lti_tool_keys"),
    )
    op.create_table(
        "lti_learners",
        sa.Column("link_key", sa.CHAR(DIGEST), nullable=False),
        sa.Column("learner_id", sa.CHAR(LEARNER_ID), nullable=False),
        _learner_fk("lti_learners"),
        sa.PrimaryKeyConstraint("link_key", name="pk_lti_learners"),
        sa.UniqueConstraint("learner_id", name="uq_lti_learners_learner_id"),
    )
    op.create_table(
        "lti_context_members",
        sa.Column("context_key", sa.CHAR(DIGEST), nullable=False),
        sa.Column("learner_id", sa.CHAR(LEARNER_ID), nullable=False),
        sa.Column("last_launch_at", sa.DateTime(timezone=True), nullable=False),
        _learner_fk("lti_context_members"),
        sa.PrimaryKeyConstraint("context_key", "learner_id", name="pk_lti_context_members"),
    )
    op.create_index(
        "ix_lti_context_members_learner_id_last_launch_at",
        "lti_context_members",
        ["learner_id", "last_launch_at"],
    )
    op.create_table(
        "lti_grade_targets",
        sa.Column("learner_id", sa.CHAR(LEARNER_ID), nullable=False),
        sa.Column("target_key", sa.CHAR(DIGEST), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(IDENTIFIER), nullable=False),
        sa.Column("resource_link_id", sa.String(IDENTIFIER), nullable=False),
        sa.Column("lineitem_url", sa.String(URL), nullable=True),
        sa.Column("lineitems_url", sa.String(URL), nullable=True),
        sa.Column("sent_score", _json(), nullable=True),
        sa.Column("sent_timestamp", sa.DateTime(timezone=True), nullable=True),
        _learner_fk("lti_grade_targets"),
        _registration_fk("lti_grade_targets"),
        sa.PrimaryKeyConstraint("learner_id", "target_key", name="pk_lti_grade_targets"),
    )
    op.create_table(
        "lti_score_outbox",
        sa.Column("learner_id", sa.CHAR(LEARNER_ID), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        _learner_fk("lti_score_outbox"),
        sa.PrimaryKeyConstraint("learner_id", name="pk_lti_score_outbox"),
    )
    op.create_index("ix_lti_score_outbox_due_at", "lti_score_outbox", ["due_at"])
    _create_outbox_trigger()


# The event kinds a write may change the gate with (normdive.progress.events): written out,
# as a migration stays as it was written; a new such kind needs a migration of its own.
GATE_EVENT_KINDS = (
    "numbers_checked",
    "reading_locked",
    "row_predicted",
    "row_played",
    "gate_closed",
)
OUTBOX_TRIGGER = "tr_events_lti_score_outbox"
OUTBOX_FUNCTION = "lti_enqueue_score"


def _create_outbox_trigger() -> None:
    """After an event that may change the gate, a learner with a grade target is put in the
    score outbox, by the database, inside the write's own transaction: so no write path can
    forget it, and a crash between the two is impossible."""
    kinds = ", ".join(f"'{kind}'" for kind in GATE_EVENT_KINDS)
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"""
            CREATE TRIGGER {OUTBOX_TRIGGER} AFTER INSERT ON events
            FOR EACH ROW WHEN NEW.kind IN ({kinds})
            BEGIN
                INSERT INTO lti_score_outbox (learner_id, version, due_at, attempts)
                SELECT NEW.learner_id, 1, CURRENT_TIMESTAMP, 0
                WHERE EXISTS (
                    SELECT 1 FROM lti_grade_targets WHERE learner_id = NEW.learner_id
                )
                ON CONFLICT (learner_id) DO UPDATE SET
                    version = version + 1, due_at = CURRENT_TIMESTAMP, attempts = 0;
            END
            """
        )
        return
    op.execute(
        f"""
        CREATE FUNCTION {OUTBOX_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM lti_grade_targets WHERE learner_id = NEW.learner_id) THEN
                INSERT INTO lti_score_outbox (learner_id, version, due_at, attempts)
                VALUES (NEW.learner_id, 1, now(), 0)
                ON CONFLICT (learner_id) DO UPDATE SET
                    version = lti_score_outbox.version + 1, due_at = now(), attempts = 0;
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER {OUTBOX_TRIGGER} AFTER INSERT ON events
        FOR EACH ROW WHEN (NEW.kind IN ({kinds}))
        EXECUTE FUNCTION {OUTBOX_FUNCTION}()
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER {OUTBOX_TRIGGER}")
    else:
        op.execute(f"DROP TRIGGER {OUTBOX_TRIGGER} ON events")
        op.execute(f"DROP FUNCTION {OUTBOX_FUNCTION}()")
    op.drop_index("ix_lti_score_outbox_due_at", table_name="lti_score_outbox")
    op.drop_table("lti_score_outbox")
    op.drop_table("lti_grade_targets")
    op.drop_index(
        "ix_lti_context_members_learner_id_last_launch_at", table_name="lti_context_members"
    )
    op.drop_table("lti_context_members")
    op.drop_table("lti_learners")
    op.drop_table("lti_tool_keys")
    op.drop_table("lti_platform_key_sets")
    op.drop_index("ix_lti_nonces_expires_at", table_name="lti_nonces")
    op.drop_table("lti_nonces")
    op.drop_index("ix_lti_states_expires_at", table_name="lti_states")
    op.drop_table("lti_states")
    op.drop_table("lti_deployments")
    op.drop_table("lti_registrations")
