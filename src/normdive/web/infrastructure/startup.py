"""What `normdive serve` serves, and what it checks before starting the workers: a server
that would answer every request with an error refuses to start instead, saying why."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from sqlalchemy import inspect
from sqlalchemy.exc import SQLAlchemyError

from normdive.config import Settings
from normdive.i18n.locales import LOCALES
from normdive.lesson.content import LessonError, load_lesson
from normdive.lesson.translations import localized
from normdive.store.db import failure_reason, make_engine
from normdive.store.tables import Base

if TYPE_CHECKING:
    from starlette.applications import Starlette

# The ASGI app factory uvicorn imports in each worker ("module:function").
APP_FACTORY = "normdive.web.infrastructure.startup:served_app"
# The progress store's tables, as the models declare them; `normdive db upgrade` creates them.
REQUIRED_TABLES = frozenset(Base.metadata.tables)


def readiness_problems(settings: Settings) -> list[str]:
    """What would stop the app from serving, one line each: a database that cannot be
    reached or has no tables yet, or lesson content that does not validate."""
    problems = []
    try:
        lesson = load_lesson()
        for locale in LOCALES:  # each language's text too (lesson.translations)
            localized(lesson, locale)
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


def served_app() -> Starlette:
    """The app one worker of `normdive serve` serves, with what it holds from start-up moved out
    of the cycle collector's sight (gc.freeze).

    The modules, the lesson and the compiled templates (about 140,000 objects) live as long as
    the worker, yet every full collection walks all of them: the worker stops for about 0.1 s,
    with every request it holds, once every thousand or two requests (bench/RESULTS.md,
    "Garbage collection"). Frozen, they are skipped. Only here, where a process serves one app
    for good: reference counting still frees a frozen object, but a frozen cycle is never
    reclaimed, and a test process builds hundreds of apps."""
    from normdive.web.app import create_app

    app = create_app()
    gc.collect()  # what start-up left as garbage goes now, not into the frozen generation
    gc.freeze()
    return app
