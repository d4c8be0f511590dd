"""The instructor view's learning records: the pool's statements delivered, waiting and
refused, each refusal in the instructor's language with the store's own words quoted; the
section is there only where an LRS is set."""

from __future__ import annotations

from bs4 import Tag
from sqlalchemy import Engine, update
from starlette.testclient import TestClient

from helpers import as_instructor, in_course, soup, words
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import XapiOutbox
from normdive.web.infrastructure.instructor_access import Pool
from normdive.xapi import lrs as stores

REFUSAL = "forged LRS: no comments accepted here"


def _section(client: TestClient, language: str = "en") -> Tag | None:
    page = soup(client.get("/instructor", headers={"Accept-Language": language}).text)
    found = page.select_one("#records-title")
    return found.find_parent("section") if isinstance(found, Tag) else None


def test_no_section_without_an_lrs(client: TestClient, store: Store) -> None:
    store.append(store.create_learner(), EventKind.TAKEAWAY_SAVED, {"text": "Mine."})
    as_instructor(client, Pool(None))
    assert _section(client) is None


def test_the_pools_statements_are_counted_and_a_refusal_quoted(
    client: TestClient, store: Store, engine: Engine
) -> None:
    stores.add(engine, "ralph", "https://lrs.example.edu/xAPI/statements", "key", "secret")
    ada, bob, carol = (store.create_learner() for _ in range(3))
    for learner in (ada, bob, carol):
        store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    store.append(ada, EventKind.TAKEAWAY_SAVED, {"text": "Mine."})
    in_course(engine, carol, "c" * 64)  # a course's learner: not this pool's
    with engine.begin() as connection:
        connection.execute(
            update(XapiOutbox).where(XapiOutbox.learner_id == bob).values(status="sent")
        )
        connection.execute(
            update(XapiOutbox)
            .where(XapiOutbox.learner_id == ada, XapiOutbox.event_id == max_event(store, ada))
            .values(status="refused", last_status=400, reason=REFUSAL, lrs_id=1)
        )
    as_instructor(client, Pool(None))
    section = _section(client)
    assert section is not None
    counts = {
        words(item.find("dt")): words(item.find("dd"))
        for item in section.select(".records-counts div")
    }
    assert counts == {"Delivered": "1", "Waiting": "1", "Refused by the store": "1"}
    [refused] = section.select(".records-refused li")
    said = words(refused)
    assert said.startswith(f"Saved the takeaway, learner {ada[:8]}: ralph refused it")
    assert "(it answered 400)" in said and REFUSAL in said
    assert carol[:8] not in words(section)
    german = _section(client, "de")
    assert german is not None
    assert "Vom Speicher abgelehnt" in words(german)
    assert "hat sie abgelehnt" in words(german) and REFUSAL in words(german)


def max_event(store: Store, learner: str) -> int:
    return max(event.id for event in store.events_for(learner))
