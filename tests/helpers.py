"""What the tests share besides fixtures: the settings they build (from explicit values only),
their databases (a migrated SQLite file, throwaway PostgreSQL databases), the in-process
clients of one app, and the sample recording the ablation's tests write to a file (never the
shipped one). conftest.py turns these into fixtures; tests import them from here."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from pydantic import SecretStr
from sqlalchemy import Engine, create_engine, insert, text
from sqlalchemy.pool import NullPool
from starlette.applications import Starlette
from starlette.testclient import TestClient

from normdive.config import Settings
from normdive.recording.format import ROW_SWITCHES, RowKey
from normdive.recording.runs import Runs
from normdive.store.db import upgrade
from normdive.store.tables import LtiContextMember, LtiLearner
from normdive.web.infrastructure.instructor_access import INSTRUCTOR_COOKIE, Pool, cookie_value
from page_client import PageClient
from sample_recordings import SAMPLE_FINALS, sample_recording

# --- settings ---------------------------------------------------------------------------------

SECRET_KEY = "test-secret-key-" + "0123456789abcdef" * 2
HOST_TOKEN = "host-token-for-tests-0123456789abcdef"
# A limit on new learners or open LTI logins that no test run reaches (all of them share one
# client address).
UNREACHED_LIMIT = 1_000_000

SettingsFactory = Callable[..., Settings]


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

# The two databases as parameters (of conftest's `database_url`, or of a test module's own
# fixture); the PostgreSQL one carries the marker conftest gives every test that needs it.
DATABASES = (
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgresql),
)


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


# --- in-process clients -----------------------------------------------------------------------

# make() -> a new client on the factory's app; make(app) on another app; make(kind=TestClient)
# of another class than the factory's.
MakeClient = Callable[..., TestClient]


@contextlib.contextmanager
def client_factory(
    app: Starlette, client_class: type[TestClient] = PageClient, **options: Any
) -> Iterator[MakeClient]:
    """Makes clients on one app (or on the app a call names), each with its own cookie jar, so
    each a learner of its own; each started (the app's lifespan) and all closed at the end.
    They follow no redirect, and take `options` (base_url: an origin) unless a call says
    otherwise. The default class posts with the form token as the page does (page_client)."""
    options.setdefault("follow_redirects", False)
    with contextlib.ExitStack() as stack:

        def make(
            on: Starlette | None = None, *, kind: type[TestClient] | None = None
        ) -> TestClient:
            client = (kind or client_class)(app if on is None else on, **options)
            return stack.enter_context(client)

        yield make


# --- the ablation's sample recording ----------------------------------------------------------

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


def ablation_recording(best: RowKey = "both", *, seeds: tuple[int, ...] = (0, 1, 2)) -> Runs:
    """A sample recording (made-up numbers, valid format) for the ablation's tests: `best` is
    the row that ends best at the page seed (the others keep the sample's shape), the other
    seeds spread around it, one curve point is not a number, and the gradient norms look
    like the real ones."""
    finals = dict(SAMPLE_FINALS)
    if best != "both":
        finals[best], finals["both"] = SAMPLE_FINALS["both"], SAMPLE_FINALS[best]
    data = sample_recording(finals, seeds=seeds).model_dump(mode="json")
    depth = data["plan"]["base"]["depth"]
    for run in data["runs"]:
        config = run["config"]
        switches = (config["layernorm"], config["residual"])
        key = next(k for k, on in ROW_SWITCHES.items() if on == switches)
        spread = 0.1 * config["seed"]
        for point in run["curve"][1:-1]:
            point["heldout_accuracy"] = min(1.0, point["heldout_accuracy"] * (1 + spread))
        if key == NON_FINITE_ROW and config["seed"] == seeds[0]:
            run["curve"][1]["heldout_loss"] = "nan"
        for point in run["block_grad_norms"]:
            point["norms"] = _norms(key, point["step"], depth)
    return Runs.model_validate(data)


def write_recording(folder: Path, recording: Runs | str) -> Path:
    """The recording (or raw text) as the file the page reads: a file of runs, as record-runs
    writes it."""
    path = folder / "the-transformer-block.json"
    body = recording if isinstance(recording, str) else recording.model_dump_json()
    path.write_text(body, encoding="utf-8")
    return path


# --- reading a page, and a learner in a course -------------------------------------------------


def soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def words(tag: Tag | None) -> str:
    """A tag's text as one line, its whitespace folded (the tag must be there)."""
    assert isinstance(tag, Tag)
    return " ".join(tag.get_text().split())


def in_course(engine: Engine, learner: str, course: str) -> None:
    """`learner` as an LTI learner who launched from `course` (its context key)."""
    with engine.begin() as connection:
        connection.execute(insert(LtiLearner).values(link_key=learner * 2, learner_id=learner))
        connection.execute(
            insert(LtiContextMember).values(
                context_key=course, learner_id=learner, last_launch_at=datetime.now(UTC)
            )
        )


def as_instructor(client: TestClient, pool: Pool) -> None:
    """`client` holds the instructor view's cookie for `pool`, as a link or staff launch
    sets it."""
    client.cookies.set(
        INSTRUCTOR_COOKIE, cookie_value(pool, SecretStr(SECRET_KEY)), path="/instructor"
    )
