"""Dynamic registration invitations are used once: the invitations that registered a
platform.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0008", "0007"


def upgrade() -> None:
    op.create_table(
        "lti_used_invites",
        sa.Column("invite", sa.CHAR(64), primary_key=True),
        sa.Column(
            "registration_id",
            sa.Integer(),
            sa.ForeignKey("lti_registrations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "used_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )


def downgrade() -> None:
    op.drop_table("lti_used_invites")
