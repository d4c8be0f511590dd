"""Each learner's folded history, kept as a starting point: a server that has not seen a
learner, and the instructor view, read one row per learner instead of every event.

Created empty: a snapshot is only ever a cache of the fold of the events, so readers fold
the events of a learner who has none and keep the result.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0006", "0005"


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
