"""The progress store unreachable: every request gets a clear 503 (a page for a browser, JSON
for the page script and the API), never a stack trace; the server keeps running; and it
serves again, with nothing lost, as soon as the database is back, without a restart.

PostgreSQL: a cluster of this test's own (the shared one serves other tests) is stopped
under a running server and started again on the same port. SQLite: the server is pointed at a
file whose folder does not exist (`normdive serve` refuses to start on that, so uvicorn runs
the app factory directly, as an operator may), then the database is created there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pg_cluster import PostgresCluster

from normdive.store.db import upgrade
from ops_server import JSON, Learner, ServerProcess

pytestmark = pytest.mark.slow

UNREACHABLE = "The progress store is not reachable right now"
UVICORN_FACTORY = [
    sys.executable,
    "-m",
    "uvicorn",
    "--factory",
    "normdive.web.app:create_app",
    "--host",
    "127.0.0.1",
    "--port",
    "{port}",
]


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    with PostgresCluster() as cluster:
        upgrade(cluster.url)
        yield cluster


def _assert_unreachable_everywhere(learner: Learner) -> None:
    page = learner.get("/")
    assert page.status_code == 503
    assert page.headers["content-type"].startswith("text/html")
    assert UNREACHABLE in page.text
    assert "Traceback" not in page.text and "sqlalchemy" not in page.text.lower()
    assert page.headers.get("retry-after")

    for answer in (
        learner.get("/api/state"),
        learner.get("/", headers=JSON),
        learner.post("/takeaway", {"text": "lost?"}),
    ):
        assert answer.status_code == 503, answer.text
        body = answer.json()
        assert body["ok"] is False and UNREACHABLE in body["message"]
        assert "Traceback" not in answer.text

    health = learner.get("/healthz")
    assert health.status_code == 503


@pytest.mark.postgresql
def test_postgresql_stopped_under_a_running_server(
    own_cluster: PostgresCluster, tmp_path: Path
) -> None:
    with ServerProcess(own_cluster.url, tmp_path, workers=2) as server:
        learner = Learner(server.url)
        try:
            learner_id = learner.id
            saved = learner.post("/takeaway", {"text": "saved before the outage"})
            assert saved.status_code == 200, saved.text

            own_cluster.stop_server()
            _assert_unreachable_everywhere(learner)
            assert server.alive

            own_cluster.start_server()
            assert learner.get("/healthz").status_code == 200
            state = learner.state()
            assert state["learner_id"] == learner_id
            assert state["state"]["takeaway"] == "saved before the outage"
            after = learner.post("/takeaway", {"text": "saved after it"})
            assert after.status_code == 200, after.text
            assert learner.state()["state"]["takeaway"] == "saved after it"
        finally:
            learner.close()
        assert server.alive


def test_sqlite_at_a_path_that_cannot_be_opened_then_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'not-yet' / 'normdive.sqlite3'}"
    with ServerProcess(url, tmp_path, command=UVICORN_FACTORY) as server:
        learner = Learner(server.url)
        try:
            with pytest.raises(httpx.HTTPStatusError):
                learner.state()
            # A cookie and token as the server would have made them, so the post gets past
            # the form-token check to the store.
            _assert_unreachable_everywhere(learner.carry("0123456789abcdef" * 2))
            assert server.alive

            (tmp_path / "not-yet").mkdir()
            upgrade(url)
            assert learner.get("/healthz").status_code == 200
            saved = learner.post("/takeaway", {"text": "the store is here now"})
            assert saved.status_code == 200, saved.text
            assert learner.state()["state"]["takeaway"] == "the store is here now"
        finally:
            learner.close()
        assert server.alive
