"""Shared fixtures: settings on a real, migrated database, the app in-process (httpx
TestClient), the app served for real by uvicorn on a free 127.0.0.1 port in a background
thread, and Playwright driving Debian's Chromium against it for the browser tests; and the
sample recordings the ablation's tests write to files (never the shipped one).

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
for one) gets the `http` marker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest
import uvicorn
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool
from starlette.applications import Starlette
from starlette.testclient import TestClient

from lti_platform import KeySetServer, key_set_server, new_key
from normdive.config import Settings
from normdive.recording.format import Recording, RowKey
from normdive.store.db import make_engine, upgrade
from normdive.store.event_store import Store
from normdive.web.app import create_app
from page_client import PageClient
from sample_recordings import SAMPLE_FINALS, sample_recording

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright

SECRET_KEY = "test-secret-key-" + "0123456789abcdef" * 2
HOST_TOKEN = "host-token-for-tests-0123456789abcdef"
SERVER_START_TIMEOUT_S = 30.0
# A limit on new learners or open LTI logins that no test run reaches (all of them share one
# client address).
UNREACHED_LIMIT = 1_000_000

SettingsFactory = Callable[..., Settings]

# Property tests (Hypothesis) try 400 examples each; `make unit` loads the "unit" profile
# (--hypothesis-profile=unit), which tries 50.
hypothesis.settings.register_profile("full", max_examples=400)
hypothesis.settings.register_profile("unit", max_examples=50)
hypothesis.settings.load_profile("full")


def migrated_sqlite_url(folder: Path) -> str:
    url = f"sqlite:///{folder / 'normdive.sqlite3'}"
    upgrade(url)
    return url


def copied_sqlite_url(template: Path, folder: Path) -> str:
    """A copy of the SQLite database at `template` in `folder`, by SQLite's backup API (a
    consistent copy, whatever the journal holds)."""
    path = folder / "normdive.sqlite3"
    with (
        contextlib.closing(sqlite3.connect(template)) as source,
        contextlib.closing(sqlite3.connect(path)) as copy,
    ):
        source.backup(copy)
    return f"sqlite:///{path}"


# --- sample recordings ----------------------------------------------------------------------

# The page seed's row whose curve holds a point that is not a number (its middle held-out loss).
NON_FINITE_ROW: RowKey = "residual_only"


def _norms(key: str, step: int, depth: int) -> list[float]:
    """Per-block gradient norms shaped like the real ones: healthy with both components,
    flat with residuals only, healthy then collapsing with layer norm only, vanishing towards
    the first block with neither (its first block exactly zero)."""
    late = step > 1
    if key == "both":
        return [0.8 - 0.03 * block for block in range(depth)]
    if key == "residual_only":
        return [0.0165] * depth
    if key == "layernorm_only":
        return [10.0 ** (-10 + block) for block in range(depth)] if late else [4.0] * depth
    return [0.0] + [10.0 ** (-4 * (depth - block)) for block in range(1, depth)]


def ablation_recording(best: RowKey = "both", *, seeds: tuple[int, ...] = (0, 1, 2)) -> Recording:
    """A sample recording (made-up numbers, valid format) for the ablation's tests: `best` is
    the row that ends best at the page seed (the others keep the sample's shape), the other
    seeds spread around it, one curve point is not a number, and the gradient norms look
    like the real ones."""
    finals = dict(SAMPLE_FINALS)
    if best != "both":
        finals[best], finals["both"] = SAMPLE_FINALS["both"], SAMPLE_FINALS[best]
    data = sample_recording(finals, seeds=seeds).model_dump(mode="json")
    depth = data["config"]["depth"]
    for row in data["rows"]:
        spread = 0.1 * row["seed"]
        for point in row["curve"][1:-1]:
            point["heldout_accuracy"] = min(1.0, point["heldout_accuracy"] * (1 + spread))
        if row["key"] == NON_FINITE_ROW and row["seed"] == seeds[0]:
            row["curve"][1]["heldout_loss"] = "nan"
        for point in row["block_grad_norms"]:
            point["norms"] = _norms(row["key"], point["step"], depth)
    return Recording.model_validate(data)


def write_recording(folder: Path, recording: Recording | str) -> Path:
    """The recording (or raw text) as the file the page reads."""
    path = folder / "the-transformer-block.json"
    text = recording if isinstance(recording, str) else recording.model_dump_json()
    path.write_text(text, encoding="utf-8")
    return path


def build_settings(database_url: str, folder: Path, **overrides: Any) -> Settings:
    """Settings from explicit values only, so the test run ignores the environment."""
    values: dict[str, Any] = {
        "DATABASE_URL": database_url,
        "secret_key": SECRET_KEY,
        "host_token": HOST_TOKEN,
        "dev_prerequisite_done": True,
        # No recording file: the gate says it cannot close today.
        "recording_path": folder / "no-recording-here.json",
        "cookie_secure": False,
        # Every learner and LTI login of a test run comes from one address; the limits' own
        # tests set them.
        "new_learners_per_hour": UNREACHED_LIMIT,
        "open_lti_logins_per_address": UNREACHED_LIMIT,
    }
    values.update(overrides)
    return Settings(**values)


# --- the two databases ------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from pg_cluster import ClusterError, PostgresCluster  # noqa: E402  (scripts/ is not a package)

# The PostgreSQL server's URL (its first database), handed from the xdist controller to workers.
POSTGRES_URL_ENV = "NORMDIVE_TEST_POSTGRES_URL"
# Marks the tests whose SQL can differ between the two databases: they run on both.
BOTH_DATABASES = "both_databases"
# Given (by conftest) to every test that needs a PostgreSQL server.
NEEDS_POSTGRESQL = "postgresql"
# The two databases as parameters (of `database_url`, or of a test module's own fixture).
DATABASES = (
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgresql),
)
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


class PostgresDatabases:
    """Creates and drops databases on the test server: empty, or copies of a migrated
    template (copying a template is much faster than running the migrations per test)."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.admin: Engine = create_engine(
            server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool
        )
        self._template: str | None = None

    def url(self, name: str) -> str:
        return self.server_url.rsplit("/", 1)[0] + "/" + name

    def create(self, *, migrated: bool = True) -> str:
        """A new database's URL: migrated (a copy of the template) or empty."""
        name = f"test_{uuid.uuid4().hex[:16]}"
        template = ""
        if migrated:
            if self._template is None:
                self._template = f"template_{uuid.uuid4().hex[:16]}"
                self._execute(f'CREATE DATABASE "{self._template}"')
                upgrade(self.url(self._template))
            template = f' TEMPLATE "{self._template}"'
        self._execute(f'CREATE DATABASE "{name}"{template}')
        return self.url(name)

    def drop(self, url: str) -> None:
        # FORCE ends connections a test left open (PostgreSQL 13+).
        self._execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')

    def close(self) -> None:
        if self._template is not None:
            self.drop(self.url(self._template))
        self.admin.dispose()

    def _execute(self, statement: str) -> None:
        with self.admin.connect() as connection:
            connection.execute(text(statement))


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
    with PageClient(app, follow_redirects=False) as test_client:
        yield test_client


@contextlib.contextmanager
def client_factory(
    app: Starlette, client_class: type[TestClient] = PageClient
) -> Iterator[Callable[[], TestClient]]:
    """Makes learners on one app, each client with its own cookie jar; all closed at the end."""
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(client_class(app, follow_redirects=False))


@pytest.fixture
def make_client(app: Starlette) -> Iterator[Callable[[], TestClient]]:
    """More learners on the same app, posting with the form token as the page does."""
    with client_factory(app) as make:
        yield make


class LiveServer:
    """uvicorn serving one app on 127.0.0.1 in a daemon thread."""

    def __init__(self, app: Starlette) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))  # the kernel picks a free port
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
            name="normdive-live-server",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=SERVER_START_TIMEOUT_S)
        self._sock.close()


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server for the browser tests; each browser context is a new learner."""
    folder = tmp_path_factory.mktemp("live")
    settings = build_settings(migrated_sqlite_url(folder), folder)
    server = LiveServer(create_app(settings))
    server.start()
    yield server
    server.stop()


# --- the browser ---------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The page asks for smooth scrolling (page.css), and Playwright waits after every scroll into
# view until the element stops moving: with scrolls that glide, two browser files took 69.6 s
# instead of 36.7 s (bench/RESULTS.md, "Set-up"). A test of where a smooth scroll lands is
# marked `smooth_scrolling` and gets a Chromium that glides, as a learner's does.
SMOOTH_SCROLLING_OFF = "--disable-smooth-scrolling"
# Generous: two CPU cores are shared by the whole test run.
ACTION_TIMEOUT_MS = 20_000
# Chromium logs every 4xx answer to fetch as a console error; 409 and 422 are the page's
# refusals, which the tests provoke on purpose.
EXPECTED_CONSOLE = ("status of 409", "status of 422")


@pytest.fixture(scope="session")
def playwright_driver() -> Iterator[Playwright]:
    """The one Playwright of the process: its sync API runs an event loop in this thread, so
    a second one at the same time is refused. Every browser of the tests is launched from it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


# Each launched Chromium's browser process, to kill if closing it or one of its contexts hangs.
_CHROMIUM_PIDS: weakref.WeakKeyDictionary[Browser, int] = weakref.WeakKeyDictionary()
# How long closing a browser or a context may take before its Chromium is killed. Playwright's
# close has no timeout of its own: a Chromium that stops answering would hold the whole run.
CLOSE_TIMEOUT_S = 30.0


def launch_chromium(playwright: Playwright, args: list[str]) -> Browser:
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
    # CDP's SystemInfo.getProcessInfo: [{"type": "browser", "id": pid, ...}, ...].
    session = chromium.new_browser_cdp_session()
    processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
    session.detach()
    _CHROMIUM_PIDS[chromium] = next(p["id"] for p in processes if p["type"] == "browser")
    return chromium


def chromium_pid(browser: Browser) -> int:
    """The browser process of a Chromium launched by `launch_chromium`."""
    return _CHROMIUM_PIDS[browser]


@contextlib.contextmanager
def killed_after(browser: Browser, timeout_s: float) -> Iterator[threading.Event]:
    """Kills a Chromium launched by `launch_chromium` if the block runs past timeout_s, which
    ends whatever Playwright call was waiting on it; the event yielded says whether it did."""
    pid = chromium_pid(browser)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    watchdog = threading.Timer(timeout_s, kill)
    watchdog.start()
    try:
        yield killed
    finally:
        watchdog.cancel()


def close_in_time(closing: Browser | BrowserContext, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Closes a browser, or a context of one launched by `launch_chromium`, within timeout_s;
    past it, kills that Chromium (which ends the pending close) and fails."""
    from playwright.sync_api import BrowserContext

    browser = closing.browser if isinstance(closing, BrowserContext) else closing
    assert browser is not None, "a persistent context: no browser of its own to kill"
    with killed_after(browser, timeout_s) as killed:
        try:
            closing.close()
        finally:
            if killed.is_set():
                pytest.fail(f"Chromium did not close within {timeout_s} s: it was killed")


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


def open_page(context: BrowserContext, errors: list[str]) -> Page:
    page = context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            errors.append(f"console: {message.text}")
            if message.type == "error" and not any(e in message.text for e in EXPECTED_CONSOLE)
            else None
        ),
    )
    return page


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
