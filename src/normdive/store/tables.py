"""The progress store's two tables, as typed SQLAlchemy 2 declarative models.

`learners` holds anonymous ids; `events` is each learner's append-only history;
`prediction_tallies` counts learners per first prediction, kept with the events that add to
it. The Alembic migrations under store/migrations/ create exactly these (a test compares the two).
Portable types only: the same models run on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    CHAR,
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    String,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# A learner id is 128 random bits written as 32 lowercase hex characters.
LEARNER_ID_LENGTH = 32
# A keyed hash of the address that started a learner: HMAC-SHA256, 64 hex characters.
ADDRESS_KEY_LENGTH = 64
# Longest event kind name; EventKind values stay well under it.
EVENT_KIND_LENGTH = 40

# Named constraints, so migrations on any backend refer to the same names.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# PostgreSQL stores payloads as JSONB; elsewhere the generic JSON type (text on SQLite).
PAYLOAD_TYPE = JSON().with_variant(JSONB(), "postgresql")
# SQLite only auto-numbers an INTEGER PRIMARY KEY, so BIGINT becomes INTEGER there.
EVENT_ID_TYPE = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Learner(Base):
    __tablename__ = "learners"
    __table_args__ = (
        # Learners one address started lately, newest first (the new-learner limit), 0003.
        Index("ix_learners_created_by_created_at", "created_by", "created_at"),
    )

    id: Mapped[str] = mapped_column(CHAR(LEARNER_ID_LENGTH), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )
    # HMAC of the client address whose first write stored this learner (never the address
    # itself); None for learners stored by the host platform, an operator, or before 0003.
    created_by: Mapped[str | None] = mapped_column(CHAR(ADDRESS_KEY_LENGTH), nullable=True)


class EventRecord(Base):
    __tablename__ = "events"
    __table_args__ = (
        # One learner's history, in order (every page view).
        Index("ix_events_learner_id_id", "learner_id", "id"),
        # Every learner's first event of a kind (the predictions aggregate), migration 0002.
        Index("ix_events_kind_learner_id_id", "kind", "learner_id", "id"),
    )

    id: Mapped[int] = mapped_column(EVENT_ID_TYPE, Identity(), primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        CHAR(LEARNER_ID_LENGTH),
        ForeignKey("learners.id", ondelete="CASCADE"),
        nullable=False,
    )
    kind: Mapped[str] = mapped_column(String(EVENT_KIND_LENGTH), nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(PAYLOAD_TYPE, nullable=False)
    # Server time: the database's clock, never the app's.
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), nullable=False
    )


# Longest question or answer a tally names: a row key, a choice id or an outcome id.
TALLY_KEY_LENGTH = 40


class PredictionTally(Base):
    """How many learners made each first prediction, counted as the prediction is appended, in
    the same transaction (Store.append_decided), so reading "how everyone predicted" is one
    small table, whatever the number of learners (migration 0004 counted what came before).

    question "" is the opening prediction (answer: the choice id, "" if the payload had none);
    otherwise the row key, and the answer its outcome id."""

    __tablename__ = "prediction_tallies"

    question: Mapped[str] = mapped_column(String(TALLY_KEY_LENGTH), primary_key=True)
    answer: Mapped[str] = mapped_column(String(TALLY_KEY_LENGTH), primary_key=True)
    learners: Mapped[int] = mapped_column(Integer, nullable=False)
