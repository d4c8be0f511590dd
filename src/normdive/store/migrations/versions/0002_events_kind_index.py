"""Index events by kind, for the predictions aggregate (all learners' first predictions).

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_events_kind_learner_id_id", "events", ["kind", "learner_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_events_kind_learner_id_id", table_name="events")
