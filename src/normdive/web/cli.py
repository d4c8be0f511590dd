"""Commands of `normdive` owned by normdive.web (registered on import by normdive.cli)."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from pydantic import ValidationError

from normdive.cli import app, db_app, prerequisite_app  # noqa: F401
from normdive.config import Settings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_WORKERS = 1
APP_FACTORY = "normdive.web.app:create_app"
# The progress store's tables (normdive.store.tables); `normdive db upgrade` creates them.
REQUIRED_TABLES = frozenset({"learners", "events"})


def _env_name(field: str) -> str:
    # Settings reads NORMDIVE_<FIELD>, except the database URL, which is plain DATABASE_URL.
    return "DATABASE_URL" if field == "database_url" else f"NORMDIVE_{field.upper()}"


def settings_problems(error: ValidationError) -> list[str]:
    """One line per invalid setting, naming the environment variable to fix."""
    lines = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"])
        message = "missing" if problem["type"] == "missing" else problem["msg"]
        lines.append(f"{_env_name(field)}: {message}")
    return lines


def readiness_problems(settings: Settings) -> list[str]:
    """What would stop the app from serving: a database URL SQLAlchemy cannot read, a database
    that cannot be reached or has no tables yet, or lesson content that does not validate."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from normdive.lesson.content import LessonError, load_lesson
    from normdive.store.db import make_engine

    problems = []
    try:
        load_lesson()
    except LessonError as error:
        problems.append(f"lesson content: {error}")
    try:
        engine = make_engine(settings.database_url)
    except ArgumentError:
        return [*problems, "DATABASE_URL: not a database URL SQLAlchemy can read"]
    try:
        tables = set(inspect(engine).get_table_names())
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        problems.append(f"DATABASE_URL: the database cannot be reached ({reason})")
    else:
        if not REQUIRED_TABLES.issubset(tables):
            problems.append(
                "DATABASE_URL: the database has no tables yet; run `normdive db upgrade`"
            )
    finally:
        engine.dispose()
    return problems


def _refuse(problems: list[str]) -> NoReturn:
    typer.echo("normdive serve: the settings are not valid, so the server did not start:", err=True)
    for line in problems:
        typer.echo(f"  {line}", err=True)
    raise typer.Exit(code=2)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = DEFAULT_PORT,
    workers: Annotated[
        int, typer.Option(min=1, help="Worker processes (each opens its own connections).")
    ] = DEFAULT_WORKERS,
    reload: Annotated[
        bool, typer.Option(help="Restart on code changes (development only; one worker).")
    ] = False,
) -> None:
    """Serve the lesson page with uvicorn. Settings come from the environment:
    NORMDIVE_SECRET_KEY (required, 32+ characters), DATABASE_URL, NORMDIVE_HOST_TOKEN,
    NORMDIVE_DEV_PREREQUISITE_DONE, NORMDIVE_RECORDING_PATH, NORMDIVE_COOKIE_SECURE."""
    try:
        settings = Settings()  # secret_key comes from the environment
    except ValidationError as error:
        _refuse(settings_problems(error))
    problems = readiness_problems(settings)
    if problems:
        _refuse(problems)

    from normdive.web.serving import run

    run(APP_FACTORY, host=host, port=port, workers=workers, reload=reload)
