"""A course's roster stored in generations: a refresh writes its members under a generation of
their own, in short transactions, then makes it the one readers see in one small update, so no
learner's write waits for a whole roster, and readers still see one roster whole.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0014", "0013"

SERVICES = "lti_roster_services"
MEMBERS = "lti_roster_members"
# The members' primary key, as the naming convention of normdive.store.tables names it.
MEMBERS_KEY = "pk_lti_roster_members"


def upgrade() -> None:
    # The members stored so far are generation 0, the one the course's services show.
    with op.batch_alter_table(SERVICES) as batch:
        batch.add_column(sa.Column("generation", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(
            sa.Column("latest_generation", sa.Integer(), server_default="0", nullable=False)
        )
    with op.batch_alter_table(MEMBERS) as batch:
        batch.add_column(sa.Column("generation", sa.Integer(), server_default="0", nullable=False))
        batch.drop_constraint(MEMBERS_KEY, type_="primary")
        batch.create_primary_key(MEMBERS_KEY, ["context_key", "generation", "link_key"])


def downgrade() -> None:
    # Only the generation each course shows is kept: the others were being stored or forgotten.
    op.execute(
        f"DELETE FROM {MEMBERS} WHERE generation <> (SELECT s.generation FROM {SERVICES} s "
        f"WHERE s.context_key = {MEMBERS}.context_key)"
    )
    with op.batch_alter_table(MEMBERS) as batch:
        batch.drop_constraint(MEMBERS_KEY, type_="primary")
        batch.drop_column("generation")
        batch.create_primary_key(MEMBERS_KEY, ["context_key", "link_key"])
    with op.batch_alter_table(SERVICES) as batch:
        batch.drop_column("latest_generation")
        batch.drop_column("generation")
