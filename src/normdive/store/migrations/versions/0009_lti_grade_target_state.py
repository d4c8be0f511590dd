"""Each grade target is sent, retried and reported on its own: its state (what the platform
last answered, why, when it is tried next) lives on lti_grade_targets, and the learner's row in
lti_score_outbox only says "this learner's score may have changed".
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = "0009", "0008"

# The sizes of normdive.store.tables, written out: a migration stays as it was written.
STATUS = 10
SOURCE = 10

TABLE = "lti_grade_targets"
DUE_INDEX = "ix_lti_grade_targets_due_at"
# Added columns, in order; each nullable or with a constant default, so that both databases
# add them in place (SQLite's ADD COLUMN takes no other kind).
COLUMNS = (
    "status",
    "due_at",
    "attempts",
    "score_version",
    "lineitem_source",
    "refused_score",
    "last_status",
    "last_answer",
    "reason",
    "updated_at",
)


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column(
        TABLE, sa.Column("status", sa.String(STATUS), server_default="due", nullable=False)
    )
    op.add_column(TABLE, sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        TABLE, sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.add_column(
        TABLE,
        sa.Column("score_version", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(TABLE, sa.Column("lineitem_source", sa.String(SOURCE), nullable=True))
    op.add_column(TABLE, sa.Column("refused_score", _json(), nullable=True))
    op.add_column(TABLE, sa.Column("last_status", sa.Integer(), nullable=True))
    op.add_column(TABLE, sa.Column("last_answer", sa.Text(), nullable=True))
    op.add_column(TABLE, sa.Column("reason", sa.Text(), nullable=True))
    op.add_column(TABLE, sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(DUE_INDEX, TABLE, ["due_at"])
    # Targets the platform took a score for are sent; the others are due now. A learner still
    # in the outbox is fanned out to their targets by the next round, as after any write.
    targets = sa.table(
        TABLE,
        sa.column("status", sa.String(STATUS)),
        sa.column("due_at", sa.DateTime(timezone=True)),
        sa.column("sent_score", _json()),
    )
    op.execute(targets.update().where(targets.c.sent_score.is_not(None)).values(status="sent"))
    op.execute(targets.update().where(targets.c.sent_score.is_(None)).values(due_at=sa.func.now()))


def downgrade() -> None:
    op.drop_index(DUE_INDEX, table_name=TABLE)
    # Plain DROP COLUMN (SQLite 3.35+), not a batch rebuild: the trigger on events names this
    # table, and SQLite refuses to rename a rebuilt copy into place under such a trigger.
    for name in reversed(COLUMNS):
        op.drop_column(TABLE, name)
