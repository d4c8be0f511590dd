"""Learners remember a keyed hash of the address that started them, for the new-learner limit."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0003", "0002"


def upgrade() -> None:
    # A nullable column: SQLite adds it with ALTER TABLE, without rebuilding the table.
    op.add_column("learners", sa.Column("created_by", sa.CHAR(64), nullable=True))
    op.create_index("ix_learners_created_by_created_at", "learners", ["created_by", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_learners_created_by_created_at", table_name="learners")
    with op.batch_alter_table("learners") as batch:
        batch.drop_column("created_by")
