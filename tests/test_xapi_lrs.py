"""Learning records against a real LRS: Ralph (scripts/ralph_lrs.py), started once per test
process. A learner launched from an LMS works the lesson to the gate through the app, and what
the outbox's sender delivered is read back from Ralph's statements resource and checked
against README's table (verb, object, result), with the actor and context each statement
names. Then the outbox's promises: Ralph stopped mid-lesson and started again, the sender
killed while it waits for Ralph's answer, a 400 from a forged LRS: each statement reaches the
LRS once, and none is lost."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from joserfc.jwk import RSAKey
from ralph_lrs import RalphServer
from sqlalchemy import Engine, select
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SettingsFactory, ablation_recording, write_recording
from lesson_answers import post_each, steps_to_the_gate
from lrs_proxy import lrs_proxy
from lti_platform import (
    ISSUER,
    TOOL_ORIGIN,
    KeySetServer,
    launch,
    launch_claims,
    login,
    register_platform,
    signed,
    unique_sub,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lti.passback import parts_total
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import XapiOutbox
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.xapi import lrs as stores
from normdive.xapi.outbox import CLAIM_LEASE_S, Sender, deployment_tool
from normdive.xapi.statements import ADL_VERBS, Tool
from ops_server import NORMDIVE, die_with_parent, server_environment
from page_client import PageClient

LESSON = load_lesson()
README = Path(__file__).resolve().parents[1] / "README.md"
PLATFORM_NAME = "Moodle"
COURSE = {"id": "course-ml-101", "title": "Learn machine learning"}
LINK = {"id": "resource-link-d9", "title": "D9 Layer norm and residuals"}


@pytest.fixture
def settings(make_settings: SettingsFactory, tmp_path: Path) -> Settings:
    recording = write_recording(tmp_path, ablation_recording())
    return make_settings(
        dev_prerequisite_done=False, recording_path=recording, public_origin=TOOL_ORIGIN
    )


@pytest.fixture
def tool(settings: Settings) -> Tool:
    return deployment_tool(settings, LESSON)


@dataclass
class Clock:
    """The time rows are due by, moved by the tests instead of waiting; a day ahead, so that
    whatever the database stamped is due already."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime.now(UTC) + timedelta(days=1))


@pytest.fixture
def platform(engine: Engine, jwks: KeySetServer) -> None:
    register_platform(engine, jwks.url)


LearnerOf = Callable[[str], PageClient]


@pytest.fixture
def learner_of(app: Starlette, platform_key: RSAKey, platform: None) -> Iterator[LearnerOf]:
    """learner_of(sub) -> a learner launched from the course's D9 link in German, with a
    client that posts as the page does."""
    with contextlib.ExitStack() as stack:

        def launched(sub: str) -> PageClient:
            client = PageClient(app, base_url=TOOL_ORIGIN, follow_redirects=False)
            return _launched(stack.enter_context(client), platform_key, sub)

        yield launched


@pytest.fixture
def sender(engine: Engine, tool: Tool, clock: Clock) -> Iterator[Sender]:
    with Sender(engine, tool, clock=clock) as made:
        yield made


def _launched(client: PageClient, platform_key: RSAKey, sub: str) -> PageClient:
    asked = login(client)
    claims = launch_claims(
        asked.nonce,
        sub=sub,
        lti_resource_link=LINK,
        lti_context=COURSE,
        lti_launch_presentation={"locale": "de-DE"},
        lti_tool_platform={"name": PLATFORM_NAME, "product_family_code": "moodle"},
    )
    response = launch(client, signed(claims, platform_key), asked.state)
    assert response.status_code == 303, response.text
    assert client.cookies.get(COOKIE_NAME)
    return client


def learner_id(client: TestClient) -> str:
    return str(client.cookies.get(COOKIE_NAME)).split(".")[0]


def send_all(sender: Sender) -> None:
    while sender.send_due().tried:
        pass


def of_actor(statements: list[dict[str, Any]], sub: str) -> list[dict[str, Any]]:
    return [s for s in statements if s["actor"].get("account", {}).get("name") == sub]


def outbox_statuses(engine: Engine) -> Counter[str]:
    with engine.connect() as connection:
        return Counter(connection.execute(select(XapiOutbox.status)).scalars())


@dataclass(frozen=True)
class TableRow:
    """One row of README's table of what is sent."""

    kind: str
    verb: str
    object_pattern: re.Pattern[str]
    result: frozenset[str]
    extensions: frozenset[str]


RESULT_KEYS = frozenset({"response", "success", "score", "completion"})


def readme_table() -> list[TableRow]:
    """README's table "What the LRS gets": event, verb, object, result."""
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- xapi-table -->")[1]
    rows = []
    for line in section.strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        event, verb, activity, result = (cell.strip() for cell in line.strip("|").split("|"))
        path = re.findall(r"`([^`]*)`", activity)[0].removeprefix("…")
        pattern = re.escape(f"{TOOL_ORIGIN}/xapi/activities{path}")
        pattern = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", pattern)
        names = re.findall(r"`([^`]*)`", result)
        rows.append(
            TableRow(
                kind=re.findall(r"`([^`]*)`", event)[0],
                verb=re.findall(r"`([^`]*)`", verb)[0],
                object_pattern=re.compile(pattern + "$"),
                result=frozenset(name for name in names if name in RESULT_KEYS),
                extensions=frozenset(name for name in names if name not in RESULT_KEYS),
            )
        )
    return rows


def test_readme_tables_every_kind_a_statement_is_made_of() -> None:
    from normdive.xapi.statements import STATEMENT_KINDS

    assert {row.kind for row in readme_table()} == {kind.value for kind in STATEMENT_KINDS}


def the_lab_and_rerun(store: Store, learner: str) -> None:
    """A lab run and a re-run row, appended as the lab's and re-run's routes append them
    (their training happens in the learner's browser)."""
    config = {
        "depth": 2,
        "layernorm": True,
        "residual": True,
        "eps": 1e-5,
        "init": "default",
        "seed": 0,
    }
    final = {"step": 200, "heldout_loss": 0.12, "heldout_accuracy": 0.97}
    curve = [{"step": 200, "train_loss": 0.1, "heldout_loss": 0.12, "heldout_accuracy": 0.97}]
    store.append(
        learner, EventKind.LAB_COMMITTED, {"run": 1, "config": config, "outcome": "learns"}
    )
    store.append(
        learner,
        EventKind.LAB_FINISHED,
        {"run": 1, "final": final, "curve": curve, "outcome": "learns"},
    )
    store.append(
        learner,
        EventKind.RERUN_ROW_FINISHED,
        {
            "rerun": 1,
            "row": "both",
            "config": config,
            "final": final,
            "curve": curve,
            "outcome": "learns",
        },
    )


def test_a_lesson_worked_to_the_gate_reaches_ralph_as_readme_says(
    app: Starlette,
    engine: Engine,
    store: Store,
    learner_of: LearnerOf,
    ralph: RalphServer,
    sender: Sender,
) -> None:
    stores.add(engine, "ralph", ralph.statements_url, ralph.key, ralph.secret)
    sub = unique_sub()
    client = learner_of(sub)
    learner = learner_id(client)
    # A slip first (the sum left undivided), and a typo that is not a number.
    steps = steps_to_the_gate()
    post_each(client, steps[:1])
    post_each(client, [("/numbers", {"row1_mean": "6", "row2_mean": "drei"})])
    post_each(client, steps[1:])
    post_each(client, [("/takeaway", {"text": "Layer norm keeps the scale; residuals the path."})])
    assert EventKind.GATE_CLOSED in {event.kind for event in store.events_for(learner)}
    the_lab_and_rerun(store, learner)
    send_all(sender)
    assert outbox_statuses(engine) == {"sent": len(store.events_for(learner)) - 1}

    got = of_actor(ralph.statements(), sub)
    ids = [statement["id"] for statement in got]
    assert len(ids) == len(set(ids))  # each statement once
    for row in readme_table():
        matching = [
            s
            for s in got
            if s["verb"]["id"] == ADL_VERBS + row.verb
            and row.object_pattern.match(s["object"]["id"])
        ]
        assert matching, row.kind
        for statement in matching:
            result = statement.get("result", {})
            assert set(result) - {"extensions"} <= row.result, row.kind
            extensions = {key.rsplit("/", 1)[1] for key in result.get("extensions", {})}
            assert extensions <= row.extensions, row.kind
        keys = {key for statement in matching for key in statement.get("result", {})}
        assert keys - {"extensions"} == row.result, row.kind
        seen = {
            key.rsplit("/", 1)[1]
            for statement in matching
            for key in statement.get("result", {}).get("extensions", {})
        }
        assert seen == row.extensions, row.kind
    # Every statement the events make reached Ralph: the table's rows and nothing else.
    assert len(got) == sum(
        1
        for s in got
        for row in readme_table()
        if s["verb"]["id"] == ADL_VERBS + row.verb and row.object_pattern.match(s["object"]["id"])
    )
    answers = [s for s in got if "/numbers/" in s["object"]["id"]]
    assert len(answers) == 2 + 6  # the check with the slip and the typo, then the six
    slip = next(s for s in answers if s["result"]["response"] == "6")
    assert slip["result"]["success"] is False
    assert slip["result"]["extensions"][f"{TOOL_ORIGIN}/xapi/extensions/slip"] == "mean_not_divided"
    typo = next(s for s in answers if s["result"]["response"] == "drei")
    assert "success" not in typo["result"]  # not a number: not graded
    field = next(s for s in answers if s["object"]["id"].endswith("/row1_mean"))
    definition = field["object"]["definition"]
    assert definition["interactionType"] == "numeric"
    assert definition["correctResponsesPattern"] == ["1.999[:]2.001"]
    assert set(definition["name"]) == {"en", "de"}
    passed = next(s for s in got if s["verb"]["id"] == ADL_VERBS + "passed")
    parts = parts_total(LESSON)
    assert passed["result"]["score"] == {"scaled": 1.0, "raw": parts, "min": 0, "max": parts}
    for statement in got:
        assert statement["actor"]["account"] == {"homePage": ISSUER, "name": sub}
        assert "name" not in statement["actor"] and "mbox" not in statement["actor"]
        context = statement["context"]
        assert context["language"] == "de"
        assert context["platform"] == PLATFORM_NAME
        assert context["registration"] == got[0]["context"]["registration"]
        grouping = context["contextActivities"]["grouping"]
        claims = [activity["definition"]["extensions"] for activity in grouping]
        assert claims[0]["https://purl.imsglobal.org/spec/lti/claim/context"]["id"] == COURSE["id"]
        assert (
            claims[1]["https://purl.imsglobal.org/spec/lti/claim/resource_link"]["id"] == LINK["id"]
        )
        version = context["extensions"][f"{TOOL_ORIGIN}/xapi/extensions/tool-version"]
        assert version == sender.tool.version


def test_nothing_is_queued_before_an_lrs_is_set(engine: Engine, learner_of: LearnerOf) -> None:
    client = learner_of(unique_sub())
    post_each(client, steps_to_the_gate()[:3])
    assert outbox_statuses(engine) == {}


def test_ralph_stopped_mid_lesson_gets_every_statement_once_it_is_back(
    app: Starlette,
    engine: Engine,
    store: Store,
    learner_of: LearnerOf,
    ralph: RalphServer,
    sender: Sender,
) -> None:
    stores.add(engine, "ralph", ralph.statements_url, ralph.key, ralph.secret)
    sub = unique_sub()
    client = learner_of(sub)
    steps = steps_to_the_gate()
    post_each(client, steps[:3])
    send_all(sender)
    ralph.stop_server()
    try:
        post_each(client, steps[3:])  # the learner's requests never wait for the LRS
        report = sender.send_due()
        waiting = len(steps) - 3 + 1  # and the gate's closing
        assert report.failed == waiting and report.sent == 0
        assert outbox_statuses(engine)["failing"] == waiting
        assert sender.send_due().tried == 0  # waiting out the backoff
    finally:
        ralph.start_server()
    sender.clock.advance(60)  # type: ignore[attr-defined]
    send_all(sender)
    assert outbox_statuses(engine) == {"sent": len(store.events_for(learner_id(client))) - 1}
    got = of_actor(ralph.statements(), sub)
    ids = [statement["id"] for statement in got]
    assert len(ids) == len(set(ids)) == 1 + 6 + 1 + 4 + 4 + 1


def test_a_sender_killed_mid_send_leaves_nothing_lost_or_twice(
    app: Starlette,
    engine: Engine,
    store: Store,
    settings: Settings,
    learner_of: LearnerOf,
    ralph: RalphServer,
    sender: Sender,
    tmp_path: Path,
) -> None:
    sub = unique_sub()
    with lrs_proxy(ralph.statements_url) as proxy:
        stores.add(engine, "ralph", proxy.url, ralph.key, ralph.secret)
        client = learner_of(sub)
        post_each(client, steps_to_the_gate())
        proxy.hold_next = True
        dying = subprocess.Popen(
            [NORMDIVE, "xapi", "send"],
            env=server_environment(
                settings.database_url, tmp_path, NORMDIVE_PUBLIC_ORIGIN=TOOL_ORIGIN
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        try:
            # Ralph has stored the round's statements; its answer has not reached the sender.
            assert proxy.held.wait(timeout=60)
        finally:
            dying.send_signal(signal.SIGKILL)
            dying.wait()
        proxy.release.set()
        [(first_post, stored_status)] = proxy.posts
        assert stored_status == 200
        events = len(steps_to_the_gate()) + 1  # and the gate's closing
        assert outbox_statuses(engine) == {"due": events}  # held by the dead sender's claim
        # Once its claim has lapsed (the clock is a day ahead), another sender sends them again.
        assert sender.clock() > datetime.now(UTC) + timedelta(seconds=CLAIM_LEASE_S)
        send_all(sender)
    assert set(outbox_statuses(engine)) == {"sent"}
    got = of_actor(ralph.statements(), sub)
    ids = [statement["id"] for statement in got]
    assert len(ids) == len(set(ids)) == len(first_post)
    assert sorted(ids) == sorted(first_post)


def test_a_statement_a_forged_lrs_refuses_is_kept_with_its_reason_and_blocks_none(
    app: Starlette,
    engine: Engine,
    learner_of: LearnerOf,
    ralph: RalphServer,
    sender: Sender,
) -> None:
    def refuse(statement: dict[str, Any]) -> str | None:
        if statement["verb"]["id"].endswith("/commented"):
            return "forged LRS: no comments accepted here"
        return None

    sub = unique_sub()
    with lrs_proxy(ralph.statements_url) as proxy:
        proxy.refuse = refuse
        stores.add(engine, "forged", proxy.url, ralph.key, ralph.secret)
        client = learner_of(sub)
        post_each(client, steps_to_the_gate()[:3])
        post_each(client, [("/takeaway", {"text": "A thought."})])
        post_each(client, steps_to_the_gate()[3:5])
        send_all(sender)
    assert outbox_statuses(engine) == {"sent": 5, "refused": 1}
    got = of_actor(ralph.statements(), sub)
    assert len(got) == len({s["id"] for s in got}) == 1 + 6 + 1 + 2
    environment = {"DATABASE_URL": str(engine.url.render_as_string(hide_password=False))}
    shown = CliRunner().invoke(cli, ["xapi", "status"], env=environment)
    assert shown.exit_code == 0, shown.output
    assert "1 refused" in shown.output
    assert "takeaway_saved" in shown.output
    assert "forged LRS: no comments accepted here" in shown.output
    assert "400" in shown.output


def test_a_learners_statements_are_voided_on_request(
    app: Starlette,
    engine: Engine,
    learner_of: LearnerOf,
    ralph: RalphServer,
    sender: Sender,
) -> None:
    stores.add(engine, "ralph", ralph.statements_url, ralph.key, ralph.secret)
    sub = unique_sub()
    client = learner_of(sub)
    post_each(client, steps_to_the_gate()[:2])
    send_all(sender)
    sent = {s["id"] for s in of_actor(ralph.statements(), sub)}
    assert len(sent) == 1 + 6
    environment = {"DATABASE_URL": str(engine.url.render_as_string(hide_password=False))}
    shown = CliRunner().invoke(
        cli, ["xapi", "forget", "--learner", learner_id(client)], env=environment
    )
    assert shown.exit_code == 0, shown.output
    send_all(sender)
    voided = {
        s["object"]["id"]
        for s in ralph.statements()
        if s["verb"]["id"] == ADL_VERBS + "voided" and s["object"]["objectType"] == "StatementRef"
    }
    assert sent <= voided
    assert outbox_statuses(engine) == {"voided": 2}
    uuid.UUID(next(iter(voided)))
