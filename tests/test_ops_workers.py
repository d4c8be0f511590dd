"""Several server processes on one PostgreSQL database: a learner (one cookie) moves between
two `normdive serve` processes mid-lesson and loses nothing, and `normdive serve --workers 2`
serves a whole lesson over fresh connections (so its requests spread over both workers). And
workers that are slow to start, as on a busy machine, are waited for, not killed as hung.

Nothing a request needs lives in one process's memory: the cookie is signed with the shared
secret key, the form token is derived from it and the learner id, the state is derived from
the events in the database on every request, and the rate limit counts those events. The
recording cache is per process and read-only (each process reads the same file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import migrated_sqlite_url
from lesson_answers import RIGHT_NUMBERS
from lesson_answers import RIGHT_READING_ID as RIGHT_READING
from lesson_answers import WRONG_READING_ID as WRONG_READING
from normdive.web.infrastructure.serving import WORKER_HEALTHCHECK_TIMEOUT_S
from ops_server import Learner, ServerProcess

TAKEAWAY = "Epsilon keeps the constant row finite; written on one server, read on the other."


def _ok(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert body["ok"] is True, body
    return body


def _lesson_state(learner: Learner) -> dict[str, Any]:
    state: dict[str, Any] = learner.state()["state"]
    return state


def test_one_learner_moves_between_two_servers_mid_lesson(
    postgres_url: str, tmp_path: Path
) -> None:
    with (
        ServerProcess(postgres_url, tmp_path) as first,
        ServerProcess(postgres_url, tmp_path) as second,
    ):
        learner = Learner(first.url)
        try:
            # On the first server: a new learner commits and checks two numbers (one wrong).
            learner_id = learner.id
            _ok(learner.post("/predict", {"choice": "residual"}))
            _ok(learner.post("/numbers", {"row1_mean": "2", "row1_variance": "1"}))
            _ok(learner.post("/reading", {"choice": WRONG_READING}))

            # The same cookie on the second server: the same learner, with all of it.
            learner.at(second.url)
            assert learner.id == learner_id
            state = _lesson_state(learner)
            assert state["prediction"] == "residual"
            assert state["fields"]["row1_mean"]["landed"] is True
            assert state["fields"]["row1_variance"]["attempts"] == 1
            assert state["reading"]["locks"] == 1 and state["reading"]["right"] is False
            # ...and carries on there.
            rest = {key: value for key, value in RIGHT_NUMBERS.items() if key != "row1_mean"}
            _ok(learner.post("/numbers", rest))
            _ok(learner.post("/reading", {"choice": RIGHT_READING}))

            # Back on the first server: everything the second one recorded is there.
            learner.at(first.url)
            state = _lesson_state(learner)
            assert state["gate"]["numbers_landed"] == 6
            assert state["fields"]["row1_variance"]["attempts"] == 2
            assert state["reading"]["right"] is True and state["reading"]["locks"] == 2
            _ok(learner.post("/takeaway", {"text": TAKEAWAY}))

            # Both servers draw the same page from the same events.
            on_first = _lesson_state(learner)
            on_second = _lesson_state(learner.at(second.url))
            assert on_first == on_second
            assert on_second["takeaway"] == TAKEAWAY
            page = learner.get("/")
            assert page.status_code == 200 and "finite; written on one server" in page.text
            # Neither server ever started a new learner for this cookie.
            assert learner.id == learner_id
        finally:
            learner.close()
        assert first.alive and second.alive


def test_serve_with_two_workers_serves_a_whole_lesson(postgres_url: str, tmp_path: Path) -> None:
    # A new connection per request, so the kernel hands requests to either worker.
    with ServerProcess(postgres_url, tmp_path, workers=2) as server:
        learner = Learner(server.url, limits=httpx.Limits(max_keepalive_connections=0))
        try:
            learner_id = learner.id
            _ok(learner.post("/predict", {"choice": "layer_norm"}))
            for key, value in RIGHT_NUMBERS.items():
                _ok(learner.post("/numbers", {key: value}))
            _ok(learner.post("/reading", {"choice": RIGHT_READING}))
            _ok(learner.post("/takeaway", {"text": TAKEAWAY}))
            for _ in range(10):  # every read agrees, whichever worker answers it
                state = _lesson_state(learner)
                assert state["gate"]["numbers_landed"] == 6
                assert state["reading"]["right"] is True
                assert state["takeaway"] == TAKEAWAY
            assert learner.id == learner_id
        finally:
            learner.close()
        assert server.alive


# Longer than uvicorn's default health check (5 s), well inside ours.
SLOW_START_S = 6.0
SLOW_START = f"""
import sys, time
if "--multiprocessing-fork" in sys.argv:  # a worker process of `serve --workers`
    time.sleep({SLOW_START_S})
"""


@pytest.mark.slow
def test_workers_slow_to_start_are_waited_for(tmp_path: Path) -> None:
    # Each worker process pauses before it can answer the supervisor, as one starting on a
    # busy machine does (Python reads sitecustomize at start-up, from PYTHONPATH).
    assert SLOW_START_S < WORKER_HEALTHCHECK_TIMEOUT_S
    (tmp_path / "sitecustomize.py").write_text(SLOW_START, encoding="utf-8")
    url = migrated_sqlite_url(tmp_path)
    with ServerProcess(url, tmp_path, workers=2, PYTHONPATH=str(tmp_path)) as server:
        assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
        assert server.alive
        log = server.log()
    assert "died" not in log and "Waiting for application startup." in log
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"waits up to {WORKER_HEALTHCHECK_TIMEOUT_S} s for a" in readme
