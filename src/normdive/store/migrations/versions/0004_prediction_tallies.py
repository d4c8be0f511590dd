"""Learners per first prediction, counted on write: reading the aggregate no longer scans
every learner's events.

The table is filled here from the events already stored: each learner counted once, by their
first prediction_committed, and by their first row_predicted of each row.
"""

import sqlalchemy as sa
from alembic import op

revision, down_revision = "0004", "0003"

# Each learner's first event of a kind (per row, for row predictions): the answers counted.
# Portable SQL: JSON access differs (json_extract on SQLite, ->> on PostgreSQL), so the
# payload values are read per backend.
FIRST_ANSWERS = """
INSERT INTO prediction_tallies (question, answer, learners)
SELECT question, answer, COUNT(*) FROM (
    SELECT {question} AS question, COALESCE({answer}, '') AS answer
    FROM events
    WHERE id IN (
        SELECT MIN(id) FROM events WHERE kind = '{kind}' GROUP BY learner_id{per}
    )
) AS firsts
WHERE question IS NOT NULL
GROUP BY question, answer
"""


def _json_text(dialect: str, key: str) -> str:
    if dialect == "postgresql":
        return f"(payload ->> '{key}')"
    return f"json_extract(payload, '$.{key}')"


def upgrade() -> None:
    op.create_table(
        "prediction_tallies",
        sa.Column("question", sa.String(40), nullable=False),
        sa.Column("answer", sa.String(40), nullable=False),
        sa.Column("learners", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("question", "answer", name="pk_prediction_tallies"),
    )
    dialect = op.get_bind().dialect.name
    opening = FIRST_ANSWERS.format(
        question="''",
        answer=_json_text(dialect, "choice"),
        kind="prediction_committed",
        per="",
    )
    rows = FIRST_ANSWERS.format(
        question=_json_text(dialect, "row"),
        answer=_json_text(dialect, "outcome"),
        kind="row_predicted",
        per=", " + _json_text(dialect, "row"),
    )
    op.execute(opening)
    op.execute(rows)


def downgrade() -> None:
    op.drop_table("prediction_tallies")
