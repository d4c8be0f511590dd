"""Each learner's folded history, kept as a starting point: a server that has not seen a
learner, and the instructor view, read one row per learner instead of every event.

Created empty: a snapshot is only ever a cache of the fold of the events, so readers fold
the events of a learner who has none and keep the result.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "learner_snapshots",
        sa.Column("learner_id", sa.CHAR(32), nullable=False),
        sa.Column("lesson_key", sa.String(16), nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"],
            ["learners.id"],
            name="fk_learner_snapshots_learner_id_learners",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("learner_id", name="pk_learner_snapshots"),
    )


def downgrade() -> None:
    op.drop_table("learner_snapshots")
