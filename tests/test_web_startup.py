"""web.infrastructure.startup's app factory: each worker of `normdive serve` builds its app,
collects what start-up left as garbage, then freezes what is left (gc.freeze), in that order. The
freeze itself is replaced here: a frozen cycle is never reclaimed, and this process builds many
apps. `normdive serve` runs the real one (tests/test_web_cli.py serves a page through it)."""

from __future__ import annotations

import gc

import pytest
from starlette.applications import Starlette
from uvicorn.importer import import_from_string

import normdive.web.app
from normdive.web.infrastructure.startup import APP_FACTORY, served_app


def test_serve_names_the_factory_that_freezes() -> None:
    assert import_from_string(APP_FACTORY) is served_app


def test_the_app_is_built_then_collected_then_frozen(
    app: Starlette, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []

    def build() -> Starlette:
        steps.append("build")
        return app

    def collect(generation: int = 2) -> int:
        steps.append(f"collect {generation}")
        return 0

    monkeypatch.setattr(normdive.web.app, "create_app", build)
    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(gc, "freeze", lambda: steps.append("freeze"))
    assert served_app() is app
    assert steps == ["build", "collect 2", "freeze"]
