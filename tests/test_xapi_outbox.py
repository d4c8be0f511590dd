"""The xAPI outbox's queue, on both databases: the trigger on events queues each event a
statement is made of, in the event's own transaction, only while an LRS is stored, with the
learner's latest LTI link then; `forget` and `resend` change only the learner's rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert, select

from lti_platform import register_platform
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LtiLearnerLink, XapiOutbox
from normdive.xapi import lrs as stores
from normdive.xapi.outbox import StatementStatus, forget, resend

pytestmark = pytest.mark.both_databases


def queued(engine: Engine) -> list[tuple[int, str | None, str]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(XapiOutbox.event_id, XapiOutbox.link_key, XapiOutbox.status).order_by(
                XapiOutbox.event_id
            )
        ).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


def link(engine: Engine, learner: str, key: str, registration: int, minutes_ago: int) -> None:
    with engine.begin() as connection:
        connection.execute(
            insert(LtiLearnerLink).values(
                learner_id=learner,
                link_key=key,
                registration_id=registration,
                user_id="sub",
                resource_link_id=key[:8],
                last_launch_at=datetime.now(UTC) - timedelta(minutes=minutes_ago),
            )
        )


def test_events_are_queued_only_while_an_lrs_is_stored(store: Store, engine: Engine) -> None:
    learner = store.create_learner()
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    assert queued(engine) == []
    stores.add(engine, "lrs", "https://lrs.example.edu/xAPI/statements", "key", "secret")
    row = store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    store.append(learner, EventKind.HINT_OPENED, {"rung": 1})  # no statement: not queued
    assert queued(engine) == [(row.id, None, "due")]
    assert stores.remove(engine, "lrs")
    store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    assert len(queued(engine)) == 1


def test_a_queued_event_keeps_the_learners_latest_link(store: Store, engine: Engine) -> None:
    learner = store.create_learner()
    stores.add(engine, "lrs", "https://lrs.example.edu/xAPI/statements", "key", "secret")
    registration = register_platform(engine, "https://platform.example.edu/jwks").id
    link(engine, learner, "a" * 64, registration, minutes_ago=10)
    link(engine, learner, "b" * 64, registration, minutes_ago=1)
    row = store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    assert queued(engine) == [(row.id, "b" * 64, "due")]


def test_forget_and_resend_touch_only_the_learners_rows(store: Store, engine: Engine) -> None:
    ada, bob = store.create_learner(), store.create_learner()
    early = store.append(ada, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    stores.add(engine, "lrs", "https://lrs.example.edu/xAPI/statements", "key", "secret")
    store.append(ada, EventKind.ROW_PLAYED, {"row": "both"})
    other = store.append(bob, EventKind.ROW_PLAYED, {"row": "both"})
    assert resend(engine, ada) == 2  # the one queued, and the one stored before an LRS was
    assert early.id in {event_id for event_id, _, _ in queued(engine)}
    done = forget(engine, ada)
    assert (done.voiding, done.withheld) == (0, 2)  # never tried: never sent
    statuses = {event_id: status for event_id, _, status in queued(engine)}
    assert statuses[other.id] == StatementStatus.DUE
    assert sorted(statuses.values()).count(StatementStatus.WITHHELD) == 2
