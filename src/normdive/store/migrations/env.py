"""Alembic environment for the progress store, driven by normdive.store.db.upgrade.

The engine arrives in `config.attributes["engine"]`; there is no alembic.ini and no URL here.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from normdive.store.tables import Base

config = context.config
engine = config.attributes.get("engine")
if not isinstance(engine, Engine):
    raise RuntimeError("run migrations through normdive.store.db.upgrade (no engine was given)")

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds tables when a later migration must.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
