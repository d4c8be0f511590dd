"""Index events by kind, for the predictions aggregate (all learners' first predictions)."""

from alembic import op

revision, down_revision = "0002", "0001"


def upgrade() -> None:
    op.create_index("ix_events_kind_learner_id_id", "events", ["kind", "learner_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_kind_learner_id_id", table_name="events")
