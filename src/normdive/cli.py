"""The `normdive` command. Each command delegates to the module that owns its concept and
imports it lazily, so `normdive serve` never loads torch and `--help` stays fast."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="normdive: deep dive D9 'Layer norm and residuals'.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The progress store's database.", no_args_is_help=True)
prerequisite_app = typer.Typer(help="Lesson 8.5, which D9 waits for.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(prerequisite_app, name="prerequisite")

# Commands are registered by their owning modules (see the functions named below):
#   normdive serve              -> normdive.web.cli
#   normdive db upgrade         -> normdive.store.cli
#   normdive prerequisite done  -> normdive.store.cli
#   normdive record-runs        -> normdive.training.cli  (imports torch inside the command)
#   normdive check-recording    -> normdive.recording.cli


def _register_commands() -> None:
    # Each owning module decorates `app` (or a sub-app above) with its commands on import.
    # None of these imports torch at import time; record-runs imports it when it runs.
    from normdive.recording import cli as _recording_cli  # noqa: F401
    from normdive.store import cli as _store_cli  # noqa: F401
    from normdive.training import cli as _training_cli  # noqa: F401
    from normdive.web import cli as _web_cli  # noqa: F401


_register_commands()
