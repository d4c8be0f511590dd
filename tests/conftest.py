"""Shared fixtures: settings on a real, migrated database, the app in-process (the
TestClient), the app served for real by uvicorn on a free 127.0.0.1 port in a background
thread (live_server.py), and Playwright driving Debian's Chromium against it for the browser
tests (chromium.py). What they are made from, and what tests import, is in helpers.py.

Databases: `database_url` is a fresh, migrated SQLite file. A test marked `both_databases`
(the store, the aggregate, the write limit, the migrations, the ops tests: where the SQL can
differ) runs twice, once on a SQLite file and once on PostgreSQL; `pytest_generate_tests`
parametrises it. PostgreSQL is a throwaway cluster (scripts/pg_cluster.py): under xdist the
controller starts one before the workers and stops it at the end; a run without xdist starts
one on first use. Its URL reaches the workers in NORMDIVE_TEST_POSTGRES_URL (set it yourself
to use a server you run). Each worker migrates one template database once; each test gets a
copy of it, dropped afterwards. Every test that needs PostgreSQL gets the `postgresql` marker
here; `--no-postgresql` (`make unit`) deselects those, starts no cluster, and runs the
`both_databases` tests on SQLite alone. Every test that takes an app (or the settings
for one) gets the `http` marker. `ralph` is a real LRS (Ralph, scripts/ralph_lrs.py), started
once in the process that first asks for it and stopped at its end."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from chromium import (
    CHROMIUM_ARGS,
    SMOOTH_SCROLLING_OFF,
    close_in_time,
    launch_chromium,
    open_page,
)
from helpers import (
    DATABASES,
    MakeClient,
    PostgresDatabases,
    SettingsFactory,
    build_settings,
    client_factory,
    copied_sqlite_url,
    migrated_sqlite_url,
)
from live_server import LiveServer
from lti_platform import KeySetServer, key_set_server, new_key
from normdive.config import Settings
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.web.app import create_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright

# Property tests (Hypothesis) try 400 examples each; `make unit` loads the "unit" profile
# (--hypothesis-profile=unit), which tries 50.
hypothesis.settings.register_profile("full", max_examples=400)
hypothesis.settings.register_profile("unit", max_examples=50)
hypothesis.settings.load_profile("full")


# --- the two databases ------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from pg_cluster import ClusterError, PostgresCluster  # noqa: E402  (scripts/ is not a package)
from ralph_lrs import RalphServer  # noqa: E402

# The PostgreSQL server's URL (its first database), handed from the xdist controller to workers.
POSTGRES_URL_ENV = "NORMDIVE_TEST_POSTGRES_URL"
# Marks the tests whose SQL can differ between the two databases: they run on both.
BOTH_DATABASES = "both_databases"
# Given (by conftest) to every test that needs a PostgreSQL server.
NEEDS_POSTGRESQL = "postgresql"
# The fixture every PostgreSQL database of the tests comes from.
POSTGRES_FIXTURE = "postgres_server"
# Given (by conftest) to every test that takes an app or the settings one is made from: it
# sends HTTP requests through the app.
HTTP = "http"
APP_FIXTURES = frozenset({"app", "settings", "make_settings"})
NO_POSTGRESQL = "--no-postgresql"
_CLUSTER = pytest.StashKey[PostgresCluster]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        NO_POSTGRESQL,
        action="store_true",
        help="run without a PostgreSQL server: start no cluster, deselect the tests that need "
        "one, and run the both_databases tests on SQLite alone",
    )


def _without_postgresql(config: pytest.Config) -> bool:
    return bool(config.getoption(NO_POSTGRESQL))


def pytest_configure(config: pytest.Config) -> None:
    """The xdist controller starts the one cluster every worker shares, before they start."""
    config.pluginmanager.register(LongestFirst(), "normdive-longest-first")
    is_worker = hasattr(config, "workerinput")
    distributed = bool(config.getoption("numprocesses", default=None))
    if (
        is_worker
        or not distributed
        or _without_postgresql(config)
        or os.environ.get(POSTGRES_URL_ENV)
    ):
        return
    try:
        cluster = PostgresCluster().start()
    except ClusterError as error:  # no PostgreSQL: the run stops here, saying why
        raise pytest.UsageError(f"the tests need a PostgreSQL server: {error}") from None
    config.stash[_CLUSTER] = cluster
    os.environ[POSTGRES_URL_ENV] = cluster.url


def pytest_unconfigure(config: pytest.Config) -> None:
    cluster = config.stash.get(_CLUSTER, None)
    if cluster is not None:
        cluster.stop()
        os.environ.pop(POSTGRES_URL_ENV, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A `both_databases` test that takes `database_url` runs on each database."""
    if (
        "database_url" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker(BOTH_DATABASES) is not None
        and not _without_postgresql(metafunc.config)
    ):
        metafunc.parametrize("database_url", DATABASES, indirect=True)


def _needs_postgresql(item: pytest.Item) -> bool:
    return item.get_closest_marker(NEEDS_POSTGRESQL) is not None or POSTGRES_FIXTURE in getattr(
        item, "fixturenames", ()
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks what needs PostgreSQL and what goes through an app, so `-m` can select on them;
    `--no-postgresql` drops what needs PostgreSQL."""
    for item in items:
        if APP_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(HTTP)
    needing = [item for item in items if _needs_postgresql(item)]
    for item in needing:
        item.add_marker(NEEDS_POSTGRESQL)
    if _without_postgresql(config) and needing:
        dropped = set(map(id, needing))
        items[:] = [item for item in items if id(item) not in dropped]
        config.hook.pytest_deselected(items=needing)


# The files with the longest tests run first. `make test` hands each xdist worker a whole file
# at a time, in this order (--dist loadfile --no-loadscope-reorder): a long file near the end
# would keep one worker busy while the other had nothing left to do. A file moves whole, so
# its module fixtures are still set up once.
LONGEST_FIRST = (("browser", "slow"), (NEEDS_POSTGRESQL, HTTP))


def _module_rank(items: list[pytest.Item]) -> int:
    for rank, markers in enumerate(LONGEST_FIRST):
        if any(item.get_closest_marker(marker) for item in items for marker in markers):
            return rank
    return len(LONGEST_FIRST)


class LongestFirst:
    """A plugin, so that its hook can run last: after pytest has grouped the tests by their
    fixtures, and after conftest's markers (which `-m` reads) are given."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        modules: dict[str, list[pytest.Item]] = {}
        for item in items:
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
        rank = {module: _module_rank(members) for module, members in modules.items()}
        items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable within a rank


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of a running PostgreSQL server's first database (started here if none was given)."""
    given = os.environ.get(POSTGRES_URL_ENV)
    if given:
        yield given
        return
    with PostgresCluster() as cluster:
        yield cluster.url


@pytest.fixture(scope="session")
def postgres_databases(postgres_server: str) -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases(postgres_server)
    yield databases
    databases.close()


@pytest.fixture
def postgres_url(postgres_databases: PostgresDatabases) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test, dropped afterwards."""
    url = postgres_databases.create()
    yield url
    postgres_databases.drop(url)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per worker, for the tests to copy (copying is much faster
    than running the migrations per test)."""
    folder = tmp_path_factory.mktemp("sqlite-template")
    migrated_sqlite_url(folder)
    return folder / "normdive.sqlite3"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, sqlite_template: Path, tmp_path: Path) -> str:
    """A fresh, migrated database: a SQLite file (for a `both_databases` test, a SQLite file,
    then a PostgreSQL database)."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return copied_sqlite_url(sqlite_template, tmp_path)
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on the test's database (see database_url), disposed afterwards."""
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def store(engine: Engine) -> Store:
    """The progress store on the test's database."""
    return Store(engine)


@pytest.fixture
def make_settings(database_url: str, tmp_path: Path) -> SettingsFactory:
    def make(**overrides: Any) -> Settings:
        return build_settings(database_url, tmp_path, **overrides)

    return make


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings()


@pytest.fixture
def app(settings: Settings) -> Starlette:
    return create_app(settings)


@pytest.fixture
def client(app: Starlette) -> Iterator[TestClient]:
    """A learner's browser: posts carry the form token as the page's do (page_client)."""
    with client_factory(app) as make:
        yield make()


@pytest.fixture
def make_client(app: Starlette) -> Iterator[MakeClient]:
    """make_client() -> another learner on the app, posting with the form token as the page
    does; make_client(other) -> one on another app (helpers.client_factory)."""
    with client_factory(app) as make:
        yield make


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server for the browser tests; each browser context is a new learner."""
    folder = tmp_path_factory.mktemp("live")
    settings = build_settings(migrated_sqlite_url(folder), folder)
    with LiveServer(create_app(settings)) as server:
        yield server


# --- a real LRS ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def ralph() -> Iterator[RalphServer]:
    """Ralph, a real xAPI LRS (scripts/ralph_lrs.py: its file-system back end on a free port of
    127.0.0.1), started on first use in the process and stopped at its end whatever happens.
    Its statements are shared: each test tells its own apart by its learners."""
    with RalphServer() as server:
        yield server


# --- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def playwright_driver() -> Iterator[Playwright]:
    """The one Playwright of the process: its sync API runs an event loop in this thread, so
    a second one at the same time is refused. Every browser of the tests is launched from it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    chromium = launch_chromium(playwright_driver, [*CHROMIUM_ARGS, SMOOTH_SCROLLING_OFF])
    yield chromium
    close_in_time(chromium)


@pytest.fixture(scope="session")
def smooth_scrolling_browser(playwright_driver: Playwright) -> Iterator[Browser]:
    chromium = launch_chromium(playwright_driver, CHROMIUM_ARGS)
    yield chromium
    close_in_time(chromium)


@pytest.fixture
def new_page(
    request: pytest.FixtureRequest, live_server: LiveServer
) -> Iterator[Callable[..., Page]]:
    """new_page(**context_options) -> Page on the live server. Each call is a new browser
    context, so a new learner. The test fails if any page logged a JavaScript error. Scrolls
    jump, unless the test is marked `smooth_scrolling`."""
    smooth = request.node.get_closest_marker("smooth_scrolling") is not None
    browser: Browser = request.getfixturevalue("smooth_scrolling_browser" if smooth else "browser")
    contexts: list[BrowserContext] = []
    errors: list[str] = []

    def make(**options: Any) -> Page:
        context = browser.new_context(base_url=live_server.url, **options)
        contexts.append(context)
        return open_page(context, errors)

    yield make
    for context in contexts:
        close_in_time(context)
    assert errors == []


# --- an LTI platform's key and key set (tests/lti_platform.py), for the LTI tests -----------


@pytest.fixture(scope="module")
def platform_key() -> RSAKey:
    """The platform's signing key, one per test module (RSA keys take a while to make)."""
    return new_key("platform-key-1")


@pytest.fixture
def jwks(platform_key: RSAKey) -> Iterator[KeySetServer]:
    """The platform's key set, served over real HTTP on 127.0.0.1."""
    with key_set_server([platform_key]) as server:
        yield server
