"""Commands of `normdive` owned by normdive.training (registered on import by normdive.cli)."""

from __future__ import annotations

from normdive.cli import app, db_app, prerequisite_app  # noqa: F401
