"""Each course member's role in that course as their latest launch showed it (staff, learner
or other: normdive.lti.roles), so that a course's counts, lists and grades are its learners';
each platform user's name as their launch gave it; and a grade target whose line item a
platform sent as an empty string has none.
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0012", "0011"

ROLE = 10
IDENTIFIER = 255


def upgrade() -> None:
    with op.batch_alter_table("lti_context_members") as batch:
        batch.add_column(
            sa.Column("course_role", sa.String(ROLE), server_default="learner", nullable=False)
        )
    with op.batch_alter_table("lti_learners") as batch:
        batch.add_column(sa.Column("name", sa.String(IDENTIFIER), nullable=True))
    # An empty lineitem claim was kept as a line item URL on no host: the target is "due"
    # again, to its link's line item in the container.
    targets = sa.table(
        "lti_grade_targets",
        sa.column("lineitem_url", sa.String()),
        sa.column("status", sa.String()),
        sa.column("due_at", sa.DateTime(timezone=True)),
        sa.column("attempts", sa.Integer()),
        sa.column("reason", sa.Text()),
    )
    op.execute(
        targets.update()
        .where(targets.c.lineitem_url == "")
        .values(lineitem_url=None, status="due", due_at=datetime.now(UTC), attempts=0, reason=None)
    )


def downgrade() -> None:
    with op.batch_alter_table("lti_learners") as batch:
        batch.drop_column("name")
    with op.batch_alter_table("lti_context_members") as batch:
        batch.drop_column("course_role")
