"""Commands of `normdive` owned by normdive.store (registered on import by normdive.cli):

    normdive db upgrade                     apply the migrations to DATABASE_URL
    normdive prerequisite done --learner ID record that the learner finished lesson 8.5

Neither command signs cookies, so neither needs NORMDIVE_SECRET_KEY: the database URL is read
the way normdive.config.Settings reads it, without the rest of the settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from normdive.cli import db_app, prerequisite_app
from normdive.config import DEFAULT_DATABASE_URL, Settings
from normdive.store.db import make_engine, upgrade
from normdive.store.events import EventKind, Store, UnknownLearner, is_learner_id

# The prerequisite_done event's source when an operator records it from this command.
OPERATOR_SOURCE = "operator"


class _DatabaseSettings(BaseSettings):
    """Only the database URL, read from the same variable as Settings.database_url."""

    model_config = SettingsConfigDict(env_prefix=Settings.model_config.get("env_prefix", ""))

    database_url: str = Field(default=DEFAULT_DATABASE_URL, validation_alias="DATABASE_URL")


def database_url() -> str:
    """DATABASE_URL from the environment, or the default SQLite file."""
    return _DatabaseSettings().database_url


def _fail(message: str) -> typer.Exit:
    typer.secho(message, err=True, fg=typer.colors.RED)
    return typer.Exit(code=1)


def _checked_url() -> str:
    url = database_url()
    try:
        make_url(url)
    except ArgumentError:
        raise _fail(f"DATABASE_URL is not a database URL: {url!r}") from None
    return url


def _shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _reason(exc: SQLAlchemyError) -> str:
    # The driver's own message, without SQLAlchemy's statement dump and documentation link.
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


@db_app.command(
    "upgrade",
    help="Create or update the progress store's tables (alembic upgrade head).\n\n"
    "Reads DATABASE_URL (default: a SQLite file under var/, whose folder is created). "
    "Safe to run again: it applies only the migrations the database does not have yet.",
)
def db_upgrade() -> None:
    url = _checked_url()
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    try:
        upgrade(url)
    except SQLAlchemyError as exc:
        raise _fail(f"Could not upgrade the database at {_shown(url)}: {_reason(exc)}") from None
    typer.echo(f"The database at {_shown(url)} is up to date.")


@prerequisite_app.command(
    "done",
    help="Record that a learner has finished lesson 8.5 The transformer block, which opens D9 "
    "to them.\n\n"
    "Reads DATABASE_URL. A learner who has not written anything yet (the locked page is all "
    "they could open) is stored by this; a learner already recorded as done is left as they "
    "are (exit 0).",
)
def prerequisite_done(
    learner: Annotated[
        str,
        typer.Option(
            "--learner",
            help="The learner's id: 32 hex characters, shown on their locked lesson page.",
        ),
    ],
) -> None:
    learner_id = learner.strip().lower()
    if not is_learner_id(learner_id):
        raise _fail(f"{learner!r} is not a learner id: expected 32 hexadecimal characters.")
    url = _checked_url()
    engine = make_engine(url)
    try:
        store = Store(engine)
        # A learner is stored by their first write, and a locked page takes none.
        store.ensure_learner(learner_id)
        events = store.events_for(learner_id)
        if any(event.kind is EventKind.PREREQUISITE_DONE for event in events):
            typer.echo(f"Lesson 8.5 was already recorded as done for {learner_id}.")
            return
        store.append(learner_id, EventKind.PREREQUISITE_DONE, {"source": OPERATOR_SOURCE})
    except UnknownLearner:
        raise _fail(f"No learner with id {learner_id} in {_shown(url)}.") from None
    except SQLAlchemyError as exc:
        raise _fail(
            f"Could not use the store at {_shown(url)}: {_reason(exc)}. "
            "Has `normdive db upgrade` run on it?"
        ) from None
    finally:
        engine.dispose()
    typer.echo(f"Lesson 8.5 is now recorded as done for {learner_id}; D9 is open to them.")
