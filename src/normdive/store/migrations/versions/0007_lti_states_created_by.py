"""LTI logins in flight remember a keyed hash of the address that began them, for the limit on
logins begun and not finished.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0007", "0006"


def upgrade() -> None:
    # A nullable column: SQLite adds it with ALTER TABLE, without rebuilding the table. Logins
    # begun before the upgrade count for no address, and expire within ten minutes.
    op.add_column("lti_states", sa.Column("created_by", sa.CHAR(64), nullable=True))
    op.create_index(
        "ix_lti_states_created_by_expires_at", "lti_states", ["created_by", "expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_lti_states_created_by_expires_at", table_name="lti_states")
    with op.batch_alter_table("lti_states") as batch:
        batch.drop_column("created_by")
