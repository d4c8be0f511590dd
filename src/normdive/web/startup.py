"""What `normdive serve` serves, and what it checks before starting the workers: a server
that would answer every request with an error refuses to start instead, saying why."""

from __future__ import annotations

from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError

from normdive.config import Settings
from normdive.lesson.content import LessonError, load_lesson
from normdive.store.db import failure_reason, make_engine
from normdive.store.tables import Base

# The ASGI app factory uvicorn imports in each worker ("module:function").
APP_FACTORY = "normdive.web.app:create_app"
# The progress store's tables, as the models declare them; `normdive db upgrade` creates them.
REQUIRED_TABLES = frozenset(Base.metadata.tables)


def readiness_problems(settings: Settings) -> list[str]:
    """What would stop the app from serving, one line each: a database that cannot be
    reached or has no tables yet, or lesson content that does not validate."""
    problems = []
    try:
        load_lesson()
    except LessonError as error:
        problems.append(f"lesson content: {error}")
    engine = make_engine(settings.database_url)
    try:
        tables = set(inspect(engine).get_table_names())
    except SQLAlchemyError as error:
        reason = failure_reason(error)
        problems.append(f"DATABASE_URL: the database cannot be reached ({reason})")
    else:
        if not REQUIRED_TABLES.issubset(tables):
            problems.append(
                "DATABASE_URL: the database has no tables yet; run `normdive db upgrade`"
            )
    finally:
        engine.dispose()
    return problems
