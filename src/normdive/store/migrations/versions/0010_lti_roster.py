"""A course's roster from its platform (LTI Names and Role Provisioning Services 2.0): the
service a launch named for the course, and its learners, keyed as lti_learners keys a user.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0010", "0009"

# The sizes of normdive.store.tables, written out: a migration stays as it was written.
DIGEST = 64
IDENTIFIER = 255
URL = 2048
STATUS = 10

SERVICES = "lti_roster_services"
MEMBERS = "lti_roster_members"


def upgrade() -> None:
    op.create_table(
        SERVICES,
        sa.Column("context_key", sa.CHAR(DIGEST), primary_key=True),
        sa.Column(
            "registration_id",
            sa.Integer(),
            sa.ForeignKey("lti_registrations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("deployment_id", sa.String(IDENTIFIER), nullable=False),
        sa.Column("memberships_url", sa.String(URL), nullable=False),
        sa.Column("refresh_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
    )
    op.create_table(
        MEMBERS,
        sa.Column(
            "context_key",
            sa.CHAR(DIGEST),
            sa.ForeignKey(f"{SERVICES}.context_key", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("link_key", sa.CHAR(DIGEST), nullable=False),
        sa.Column("status", sa.String(STATUS), nullable=False),
        sa.Column("roles", sa.Text(), nullable=False),
        sa.Column("name", sa.String(IDENTIFIER), nullable=True),
        sa.Column("email", sa.String(IDENTIFIER), nullable=True),
        sa.PrimaryKeyConstraint("context_key", "link_key"),
    )


def downgrade() -> None:
    op.drop_table(MEMBERS)
    op.drop_table(SERVICES)
