"""The browser journey on PostgreSQL: the same learner walk through the lesson as
tests/browser/test_browser_lesson.py (commit, flip the switch, land six numbers, lock the
reading, save a takeaway, reload and find it all), with the live server on PostgreSQL.

One journey only: the rest of the browser tests run on SQLite, and the store and web tests
already run on both databases; this one shows the page works end to end on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page
from sqlalchemy import text

from browser.lesson_page import work_through_the_lesson
from helpers import PostgresDatabases, build_settings
from live_server import LiveServer
from normdive.store.db import make_engine
from normdive.web.app import create_app

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def journey_database(postgres_databases: PostgresDatabases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.drop(url)


@pytest.fixture(scope="module")
def live_server(
    journey_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """Overrides conftest's session-wide SQLite server for this module's tests."""
    folder: Path = tmp_path_factory.mktemp("live-postgresql")
    server = LiveServer(create_app(build_settings(journey_database, folder)))
    server.start()
    yield server
    server.stop()


def test_a_learner_works_through_the_lesson_on_postgresql(
    new_page: Callable[..., Page], journey_database: str
) -> None:
    work_through_the_lesson(new_page())
    # The journey's events are in PostgreSQL: a prediction, checks, locks and the takeaway.
    engine = make_engine(journey_database)
    try:
        with engine.connect() as connection:
            kinds = set(connection.execute(text("SELECT kind FROM events")).scalars())
    finally:
        engine.dispose()
    assert {"prediction_committed", "numbers_checked", "reading_locked", "takeaway_saved"} <= kinds
