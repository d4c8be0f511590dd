"""No score is lost when the passback worker is killed while the platform is down.

Learners with a grade target each write once (the database queues each score). A real
`normdive lti passback` process starts while the platform's grade book answers 503 to
everything; once it has failed on every target (each one failing, with its own backoff), its
process group gets SIGKILL. The platform
comes back, a new worker starts on the same database, and every learner's score arrives: lost
0. On a SQLite file and on PostgreSQL. Bounded: a deadline for each step."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select, update

from lti_platform import GradeBook, grade_book_server, register_platform
from normdive.lti import tool_keys
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LtiGradeTarget, LtiScoreOutbox
from ops_server import NORMDIVE, die_with_parent, server_environment

pytestmark = [pytest.mark.both_databases, pytest.mark.slow]

LEARNERS = 20
# Generous: two shared cores, and the worker's first retry waits FIRST_RETRY_S (5 s).
STEP_DEADLINE_S = 60.0


def _worker(database_url: str, folder: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [NORMDIVE, "lti", "passback"],
        env=server_environment(database_url, folder),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=STEP_DEADLINE_S)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STEP_DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def book(engine: Engine) -> Iterator[GradeBook]:
    with grade_book_server(GradeBook()) as served:
        register_platform(engine, "https://platform.example.edu/jwks", token_url=served.token_url)
        served.tool_key_set = dict(tool_keys.public_key_set(engine))
        yield served


def test_no_score_is_lost_to_a_kill_while_the_platform_is_down(
    database_url: str, engine: Engine, store: Store, book: GradeBook, tmp_path: Path
) -> None:
    from normdive.lti.registrations import all_registrations

    registration = all_registrations(engine)[0]
    learners = [store.create_learner() for _ in range(LEARNERS)]
    with engine.begin() as connection:
        connection.execute(
            insert(LtiGradeTarget),
            [
                {
                    "learner_id": learner,
                    "target_key": learner * 2,
                    "registration_id": registration.id,
                    "user_id": f"user-{index}",
                    "resource_link_id": "link",
                    "lineitem_url": f"{book.base}/lineitems/d9",
                }
                for index, learner in enumerate(learners)
            ],
        )
    for learner in learners:
        store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})

    def failed_everywhere() -> bool:
        with engine.connect() as connection:
            tried = connection.execute(
                select(func.count()).select_from(LtiGradeTarget).where(LtiGradeTarget.attempts >= 1)
            ).scalar_one()
        return int(tried) == LEARNERS

    def outbox_empty() -> bool:
        with engine.connect() as connection:
            queued = connection.execute(select(func.count()).select_from(LtiScoreOutbox))
            due = connection.execute(
                select(func.count())
                .select_from(LtiGradeTarget)
                .where(LtiGradeTarget.due_at.is_not(None))
            )
            return int(queued.scalar_one()) == int(due.scalar_one()) == 0

    book.down = True
    first = _worker(database_url, tmp_path)
    try:
        _wait_for(failed_everywhere, "the worker to fail on every score")
    finally:
        _kill(first)
    assert book.scores == []

    book.down = False
    second = _worker(database_url, tmp_path)
    try:
        _wait_for(outbox_empty, "the outbox to drain")
    finally:
        _kill(second)
    received = {score["userId"] for _, score in book.scores}
    lost = LEARNERS - len(received)
    assert lost == 0
    assert len(book.scores) == LEARNERS  # and none twice
    assert book.refused == []


def test_a_score_the_platform_took_before_a_kill_is_sent_once_more_stamped_later(
    database_url: str, engine: Engine, store: Store, book: GradeBook, tmp_path: Path
) -> None:
    """The platform takes the score, the worker is killed before the answer comes; the next
    worker sends it again stamped later, which a platform refusing a repeated timestamp (Open
    edX) takes, and the target is sent, not refused."""
    from normdive.lti.registrations import all_registrations

    registration = all_registrations(engine)[0]
    learner = store.create_learner()
    with engine.begin() as connection:
        connection.execute(
            insert(LtiGradeTarget).values(
                learner_id=learner,
                target_key="k" * 64,
                registration_id=registration.id,
                user_id="user-1",
                resource_link_id="link",
                lineitem_url=f"{book.base}/lineitems/d9",
            )
        )
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    book.strict_timestamps = True
    book.held = threading.Event()
    first = _worker(database_url, tmp_path)
    try:
        _wait_for(lambda: len(book.scores) == 1, "the platform to take the score")
    finally:
        _kill(first)
        book.held.set()
    book.held = None
    # The lease the killed worker held on the target (passback.CLAIM_LEASE_S), run out.
    with engine.begin() as connection:
        connection.execute(update(LtiGradeTarget).values(due_at=datetime.now(UTC)))

    def sent() -> bool:
        with engine.connect() as connection:
            status = connection.execute(select(LtiGradeTarget.status)).scalar_one()
        return status == "sent"

    second = _worker(database_url, tmp_path)
    try:
        _wait_for(sent, "the target to be sent")
    finally:
        _kill(second)
    stamps = [score["timestamp"] for _, score in book.scores]
    assert len(stamps) == 2 and stamps[1] > stamps[0], stamps
    assert book.refused == []
