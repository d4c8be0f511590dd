"""The instructor view's data and page: a pool's learners streamed from the store, one
summary record each (a course's members, those without events too; the anonymous pool
without any LMS's learners), and the
page drawn from them without script: takeaways as text, each chart with its table."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from bs4 import BeautifulSoup
from sqlalchemy import Engine, delete, insert, text
from starlette.testclient import TestClient

from helpers import as_instructor, in_course
from lesson_answers import LESSON
from normdive.progress.events import EventKind
from normdive.progress.facts import RecordingFacts
from normdive.progress.history import History
from normdive.progress.report import PoolReportBuilder, summary_from_record
from normdive.store.event_store import Store
from normdive.store.snapshots import Snapshots
from normdive.store.tables import EventRecord, Learner
from normdive.web.infrastructure.instructor_access import Pool
from normdive.web.routes.instructor import TAKEAWAYS_SHOWN
from normdive.web.views.instructor_report import learner_summaries
from normdive.web.views.pool_reports import PoolReports

COURSE = "c" * 64
ROWS = [row.key for row in LESSON.rows]
OTHER_COURSE = "d" * 64


def predicting(store: Store, choice: str, takeaway: str | None = None) -> str:
    learner = store.create_learner()
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": choice})
    store.append(learner, EventKind.HINT_OPENED, {"rung": 1})
    if takeaway is not None:
        store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": takeaway})
    return learner


@pytest.mark.both_databases
def test_a_course_streams_its_members_one_learner_at_a_time(store: Store, engine: Engine) -> None:
    members = []
    for _ in range(3):
        learner = store.create_learner()
        in_course(engine, learner, COURSE)
        store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
        store.append(learner, EventKind.HINT_OPENED, {"rung": 1})
        members.append(learner)
    launched_only = store.create_learner()
    in_course(engine, launched_only, COURSE)
    elsewhere = store.create_learner()
    in_course(engine, elsewhere, OTHER_COURSE)
    store.append(elsewhere, EventKind.HINT_OPENED, {"rung": 2})
    anonymous = predicting(store, "layer_norm")
    # An event of a kind this version does not know is skipped.
    with engine.begin() as connection:
        connection.execute(
            insert(EventRecord).values(learner_id=members[0], kind="from_the_future", payload={})
        )

    snapshots = Snapshots(engine, History.start(LESSON))
    members_read = list(snapshots.pool(COURSE, batch_size=2))
    assert [m.learner_id for m in members_read] == sorted([*members, launched_only])
    by_id = {
        m.learner_id: summary_from_record(m.learner_id, m.record, None, m.launched_at)
        for m in members_read
    }
    assert by_id[launched_only].events == 0
    assert "opened" in by_id[launched_only].reached  # by their launch
    for learner in members:
        summary = by_id[learner]
        assert summary.events == 2  # the unknown kind is not counted
        assert summary.opening == "residual" and summary.rungs_opened == {1}
        assert summary.reached["opened"].tzinfo is not None

    pool = list(snapshots.pool(None, batch_size=1))
    assert [m.learner_id for m in pool] == [anonymous]
    assert pool[0].launched_at is None
    assert summary_from_record(anonymous, pool[0].record, None).opening == "layer_norm"


INJECTION = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_takeaways_are_shown_as_text_newest_first(
    client: TestClient, store: Store, engine: Engine
) -> None:
    predicting(store, "residual", INJECTION)
    later = predicting(store, "residual", "second & last")
    # The second takeaway was saved a day later.
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE events SET created_at = :at WHERE learner_id = :learner "
                "AND kind = 'takeaway_saved'"
            ),
            {"at": datetime(2099, 1, 1, tzinfo=UTC), "learner": later},
        )
    as_instructor(client, Pool(None))
    page = client.get("/instructor")
    assert page.status_code == 200
    soup = BeautifulSoup(page.text, "html.parser")
    assert soup.find("script") is None
    assert soup.find("img") is None
    texts = [p.get_text() for p in soup.select(".takeaway-text")]
    assert texts == ["second & last", INJECTION]
    # Each in a paragraph of its own whose direction comes from its own text: a right-to-left
    # takeaway reads as written, and a stray direction mark in one cannot turn the page.
    assert all(p["dir"] == "auto" for p in soup.select(".takeaway-text"))


def test_every_chart_has_a_table_and_the_page_needs_no_script(
    client: TestClient, store: Store
) -> None:
    for choice in ("residual", "residual", "layer_norm"):
        predicting(store, choice)
    as_instructor(client, Pool(None))
    soup = BeautifulSoup(client.get("/instructor").text, "html.parser")
    assert soup.find("script") is None
    assert "3 learners" in soup.get_text()
    funnel = soup.find("figure", attrs={"aria-labelledby": "funnel-caption"})
    assert funnel is not None
    bars = [li.get_text(" ", strip=True) for li in funnel.select("li")]
    assert bars[:2] == ["Opened the lesson 3", "Committed the opening prediction 3"]
    # The funnel's numbers, as a table inside a disclosure that opens without script.
    table = soup.find("caption", string="Learners reaching each step")
    assert table is not None and table.find_parent("details") is not None
    opening = soup.find("figure", attrs={"aria-labelledby": "opening-caption"})
    assert opening is not None
    assert [li.get_text(" ", strip=True) for li in opening.select("li")] == [
        "Residual connections 2",
        "Layer norm 1",
    ]
    # Every bar's picture is hidden from assistive technology: its label and count are text.
    assert all(svg.get("aria-hidden") == "true" for svg in soup.find_all("svg"))


def test_the_page_lists_the_newest_takeaways_and_the_aggregate_all(
    client: TestClient, store: Store
) -> None:
    for number in range(TAKEAWAYS_SHOWN + 2):
        predicting(store, "residual", f"takeaway {number}")
    as_instructor(client, Pool(None))
    soup = BeautifulSoup(client.get("/instructor").text, "html.parser")
    assert len(soup.select(".takeaway-text")) == TAKEAWAYS_SHOWN
    assert f"The newest {TAKEAWAYS_SHOWN} of {TAKEAWAYS_SHOWN + 2}" in soup.get_text()
    figures = client.get("/instructor/aggregate.json").json()
    assert len(figures["takeaways"]) == TAKEAWAYS_SHOWN + 2


def fresh_report(snapshots: Snapshots, recording: RecordingFacts, course: str | None) -> Any:
    """Every member's summary as it is now, added up from nothing."""
    builder = PoolReportBuilder(LESSON, recording)
    for summary in learner_summaries(snapshots, recording, course):
        builder.add(summary)
    return builder.report()


@pytest.mark.both_databases
@pytest.mark.parametrize("course", [None, COURSE])
def test_a_kept_pool_report_equals_the_one_added_up_from_nothing(
    store: Store, engine: Engine, course: str | None
) -> None:
    """Views between which learners work, join, leave and appear behind their snapshots: the
    kept report, brought up to date from the summaries that moved, is always the fresh one."""
    rng = random.Random(7)
    snapshots = Snapshots(engine, History.start(LESSON))
    recording = RecordingFacts(
        problem=None, row_keys=tuple(r.key for r in LESSON.rows), best_row=LESSON.rows[0].key
    )
    reports = PoolReports(LESSON)
    learners: list[str] = []
    for _view in range(6):
        for _ in range(rng.randint(1, 4)):
            choice = rng.randrange(5)
            if choice == 0 or not learners:  # someone new
                learner = store.create_learner()
                if course is not None:
                    in_course(engine, learner, course)
                learners.append(learner)
            learner = rng.choice(learners)
            if choice == 1:  # works through the store alone: their snapshot falls behind
                store.append(learner, EventKind.HINT_OPENED, {"rung": rng.choice([1, 2])})
            elif choice == 2:  # works through the app: their snapshot kept current
                store.append(learner, EventKind.ROW_PLAYED, {"row": rng.choice(ROWS)})
                snapshots.read(learner)
            elif choice == 3:
                store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
                store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": f"t{rng.random()}"})
            elif choice == 4 and len(learners) > 1:  # removed from the store
                learners.remove(learner)
                with engine.begin() as connection:
                    connection.execute(delete(Learner).where(Learner.id == learner))
        assert reports.report(snapshots, recording, course) == fresh_report(
            snapshots, recording, course
        )
