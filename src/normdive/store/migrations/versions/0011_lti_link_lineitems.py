"""One line item per resource link: the line item the tool made (or found) in a launch's line
items container, shared by the link's learners, and the claim that keeps two senders from
both creating it.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0011", "0010"

# The sizes of normdive.store.tables, written out: a migration stays as it was written.
DIGEST = 64
URL = 2048


def upgrade() -> None:
    op.create_table(
        "lti_link_lineitems",
        sa.Column("link_key", sa.CHAR(DIGEST), primary_key=True),
        sa.Column(
            "registration_id",
            sa.Integer(),
            sa.ForeignKey("lti_registrations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("lineitem_url", sa.String(URL), nullable=True),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lti_link_lineitems")
