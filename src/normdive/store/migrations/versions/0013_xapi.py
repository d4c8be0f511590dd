"""Learning records (xAPI): the LTI resource links each learner launched (the statements'
actor and context), the Learning Record Stores statements go to, and the outbox a trigger on
events fills, in the write's own transaction, while an LRS is set.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0013", "0012"

# The sizes of normdive.store.tables, written out: a migration stays as it was written.
IDENTIFIER = 255
URL = 2048
DIGEST = 64
LEARNER_ID = 32
LOCALE = 35
LRS_NAME = 64
STATUS = 10

# The event kinds a statement is made of (normdive.xapi.statements.STATEMENT_KINDS): written
# out, as a migration stays as it was written; a new such kind needs a migration of its own.
STATEMENT_KINDS = (
    "prediction_committed",
    "numbers_checked",
    "reading_locked",
    "row_predicted",
    "row_played",
    "gate_closed",
    "takeaway_saved",
    "lab_committed",
    "lab_finished",
    "rerun_row_finished",
)
OUTBOX_TRIGGER = "tr_events_xapi_outbox"
OUTBOX_FUNCTION = "xapi_enqueue_statement"


def _event_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "lti_learner_links",
        sa.Column("learner_id", sa.CHAR(LEARNER_ID), nullable=False),
        sa.Column("link_key", sa.CHAR(DIGEST), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(IDENTIFIER), nullable=False),
        sa.Column("resource_link_id", sa.String(IDENTIFIER), nullable=False),
        sa.Column("resource_link_title", sa.Text(), nullable=True),
        sa.Column("context_key", sa.CHAR(DIGEST), nullable=True),
        sa.Column("context_id", sa.String(IDENTIFIER), nullable=True),
        sa.Column("context_title", sa.Text(), nullable=True),
        sa.Column("platform", sa.String(IDENTIFIER), nullable=True),
        sa.Column("locale", sa.String(LOCALE), nullable=True),
        sa.Column("last_launch_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name="fk_lti_learner_links_learner_id_learners",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["registration_id"],
            ["lti_registrations.id"],
            name="fk_lti_learner_links_registration_id_lti_registrations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("learner_id", "link_key", name="pk_lti_learner_links"),
    )
    op.create_index(
        "ix_lti_learner_links_learner_id_last_launch_at",
        "lti_learner_links",
        ["learner_id", "last_launch_at"],
    )
    op.create_table(
        "xapi_lrs",
        sa.Column("id", sa.Integer(), sa.Identity(), nullable=False),
        sa.Column("name", sa.String(LRS_NAME), nullable=False),
        sa.Column("endpoint", sa.String(URL), nullable=False),
        sa.Column("key", sa.String(IDENTIFIER), nullable=False),
        sa.Column("secret", sa.String(IDENTIFIER), nullable=False),
        sa.Column("context_key", sa.CHAR(DIGEST), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_xapi_lrs"),
        sa.UniqueConstraint("name", name="uq_xapi_lrs_name"),
    )
    op.create_table(
        "xapi_outbox",
        sa.Column("event_id", _event_id(), nullable=False),
        sa.Column("learner_id", sa.CHAR(LEARNER_ID), nullable=False),
        sa.Column("link_key", sa.CHAR(DIGEST), nullable=True),
        sa.Column("status", sa.String(STATUS), server_default="due", nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("claim", sa.CHAR(DIGEST), nullable=True),
        sa.Column("lrs_id", sa.Integer(), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name="fk_xapi_outbox_event_id_events", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name="fk_xapi_outbox_learner_id_learners",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("event_id", name="pk_xapi_outbox"),
    )
    op.create_index("ix_xapi_outbox_due_at", "xapi_outbox", ["due_at"])
    op.create_index("ix_xapi_outbox_learner_id", "xapi_outbox", ["learner_id"])
    op.create_index("ix_xapi_outbox_claim", "xapi_outbox", ["claim"])
    _create_outbox_trigger()


def _create_outbox_trigger() -> None:
    """After an event a statement is made of, while an LRS is set, the event goes in the
    outbox with the learner's latest LTI link, by the database, inside the write's own
    transaction: no write path can forget it, and a crash between the two is impossible."""
    kinds = ", ".join(f"'{kind}'" for kind in STATEMENT_KINDS)
    latest_link = (
        "SELECT link_key FROM lti_learner_links WHERE learner_id = NEW.learner_id "
        "ORDER BY last_launch_at DESC LIMIT 1"
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"""
            CREATE TRIGGER {OUTBOX_TRIGGER} AFTER INSERT ON events
            FOR EACH ROW WHEN NEW.kind IN ({kinds}) AND EXISTS (SELECT 1 FROM xapi_lrs)
            BEGIN
                INSERT INTO xapi_outbox (event_id, learner_id, link_key, status, due_at, attempts)
                VALUES (NEW.id, NEW.learner_id, ({latest_link}), 'due', CURRENT_TIMESTAMP, 0);
            END
            """
        )
        return
    op.execute(
        f"""
        CREATE FUNCTION {OUTBOX_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM xapi_lrs) THEN
                INSERT INTO xapi_outbox (event_id, learner_id, link_key, status, due_at, attempts)
                VALUES (NEW.id, NEW.learner_id, ({latest_link}), 'due', now(), 0);
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
    op.drop_index("ix_xapi_outbox_claim", table_name="xapi_outbox")
    op.drop_index("ix_xapi_outbox_learner_id", table_name="xapi_outbox")
    op.drop_index("ix_xapi_outbox_due_at", table_name="xapi_outbox")
    op.drop_table("xapi_outbox")
    op.drop_table("xapi_lrs")
    op.drop_index("ix_lti_learner_links_learner_id_last_launch_at", table_name="lti_learner_links")
    op.drop_table("lti_learner_links")
