"""Commands of `normdive` owned by normdive.web (registered on import by normdive.cli)."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from normdive.cli import app, db_app, prerequisite_app  # noqa: F401

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_WORKERS = 1
APP_FACTORY = "normdive.web.app:create_app"


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
    from normdive.config import Settings

    try:
        Settings()  # secret_key comes from the environment
    except ValidationError as error:
        typer.echo(
            "normdive serve: the settings are not valid, so the server did not start:", err=True
        )
        for line in settings_problems(error):
            typer.echo(f"  {line}", err=True)
        raise typer.Exit(code=2) from None

    import uvicorn

    uvicorn.run(
        APP_FACTORY,
        factory=True,
        host=host,
        port=port,
        workers=None if reload else workers,
        reload=reload,
        proxy_headers=True,
    )
