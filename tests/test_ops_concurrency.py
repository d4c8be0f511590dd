"""A hundred checks of one field by one learner, all at once, through a real server, are a
hundred attempts: none lost to a race, none counted twice. On a SQLite file and on PostgreSQL.

The answers are wrong and all different, so the field never lands and every check is graded
(a landed field would refuse later checks, and a resubmitted wrong answer is another rule).
Each check reads the learner's events and appends one; concurrent requests interleave freely,
and the count must still come out exact.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from fresh_loop import run_in_fresh_loop
from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from ops_server import JSON, TOKEN_HEADER, Learner, ServerProcess

pytestmark = [pytest.mark.both_databases, pytest.mark.slow]

CHECKS = 100
FIELD = "row1_mean"
# The mean of [1, 2, 3] is 2: a hundred different wrong answers.
WRONG = [str(10 + i) for i in range(CHECKS)]
REQUEST_TIMEOUT_S = 120.0


async def _check_all_at_once(url: str, cookies: httpx.Cookies, token: str | None) -> list[int]:
    headers = {**JSON, **({TOKEN_HEADER: token} if token else {})}
    limits = httpx.Limits(max_connections=CHECKS, max_keepalive_connections=CHECKS)
    async with httpx.AsyncClient(
        base_url=url, cookies=cookies, headers=headers, limits=limits, timeout=REQUEST_TIMEOUT_S
    ) as client:
        answers = await asyncio.gather(
            *(client.post("/numbers", data={FIELD: wrong}) for wrong in WRONG)
        )
    return [answer.status_code for answer in answers]


def test_a_hundred_concurrent_checks_are_a_hundred_attempts(
    database_url: str, tmp_path: Path
) -> None:
    with ServerProcess(database_url, tmp_path) as server:
        learner = Learner(server.url)
        try:
            learner_id = learner.id
            committed = learner.post("/predict", {"choice": "residual"})
            assert committed.status_code == 200, committed.text
            token = learner.state().get("csrf_token")
            statuses = run_in_fresh_loop(
                lambda: _check_all_at_once(server.url, learner.http.cookies, token)
            )
            assert statuses == [200] * CHECKS

            field_state = learner.state()["state"]["fields"][FIELD]
            assert field_state["attempts"] == CHECKS
            assert field_state["landed"] is False
        finally:
            learner.close()

    engine = make_engine(database_url)
    try:
        checks = [
            event
            for event in Store(engine).events_for(learner_id)
            if event.kind is EventKind.NUMBERS_CHECKED
        ]
    finally:
        engine.dispose()
    assert len(checks) == CHECKS
    assert len({event.id for event in checks}) == CHECKS
    assert all(event.payload["answers"][0]["verdict"] == "wrong" for event in checks)
    assert sorted(event.payload["answers"][0]["raw"] for event in checks) == sorted(WRONG)
