"""Grade passback through the score outbox, against a platform's grade book served over real
HTTP (tests/lti_platform.py: its token endpoint verifies the tool's client assertion with the
tool's own key set from /lti/jwks).

A launch with the score scope records where scores go and queues one; a write that may change
the gate queues the learner in the same transaction (the database's trigger), on both
databases; the sender posts the latest score, creating a line item when the launch named
none; while the platform is down the score waits with a growing delay and is sent once it is
back; a closed gate sends full marks, FullyGraded; `normdive lti outbox` shows the queue and
`normdive lti rotate-key` rotates the tool's key."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, func, insert, select
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SettingsFactory
from lesson_answers import RIGHT_READING_ID
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    ISSUER,
    GradeBook,
    KeySetServer,
    browser,
    grade_book_server,
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
from normdive.lti import passback, tool_keys
from normdive.lti.passback import Sender, retry_delay
from normdive.lti.registrations import PrerequisiteMode, Registration, register, validated
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LTI_URL_LENGTH, LtiGradeTarget, LtiScoreOutbox
from normdive.web.infrastructure.identity import COOKIE_NAME

LESSON = load_lesson()
PARTS = passback.parts_total(LESSON)


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def book(app: Starlette, engine: Engine, jwks: KeySetServer) -> Iterator[GradeBook]:
    with grade_book_server(GradeBook()) as served, browser(app) as client:
        register_platform(engine, jwks.url, token_url=served.token_url)
        served.tool_key_set = client.get("/lti/jwks").json()
        yield served


@dataclass
class Clock:
    """The time the sender's targets are due by, moved by the tests instead of waiting. It
    starts a day ahead, so that whatever a launch stamps with the real time is due already."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime.now(UTC) + timedelta(days=1))


@pytest.fixture
def sender(engine: Engine, settings: Settings, clock: Clock) -> Sender:
    return Sender(engine, LESSON, settings.recording_path, clock=clock)


LaunchAs = Callable[..., str]


@pytest.fixture
def launch_as(app: Starlette, book: GradeBook, platform_key: RSAKey) -> Iterator[LaunchAs]:
    clients: list[TestClient] = []

    def launched(
        *,
        with_lineitem: bool = True,
        lineitem: str = "/lineitems/d9?course=1",
        link: str = "resource-link-1",
        **claims: object,
    ) -> str:
        client = browser(app).__enter__()
        clients.append(client)
        asked = login(client)
        claims.setdefault("sub", unique_sub())
        claims.setdefault("lti_resource_link", {"id": link, "title": "D9"})
        token = signed(
            launch_claims(
                asked.nonce,
                **{
                    "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": (
                        book.endpoint_claim(with_lineitem=with_lineitem, lineitem=lineitem)
                    ),
                    **claims,
                },
            ),
            platform_key,
        )
        response = launch(client, token, asked.state)
        assert response.status_code == 303, response.text
        return str(client.cookies.get(COOKIE_NAME)).split(".")[0]

    yield launched
    for client in clients:
        client.__exit__(None, None, None)


def outbox(engine: Engine) -> dict[str, tuple[int, int]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(LtiScoreOutbox.learner_id, LtiScoreOutbox.version, LtiScoreOutbox.attempts)
        ).all()
    return {learner: (version, attempts) for learner, version, attempts in rows}


def test_a_launch_with_the_score_scope_sends_the_score(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    learner = launch_as(sub="ada")
    assert learner in outbox(engine)
    report = sender.send_due()
    assert (report.sent, report.failed) == (1, 0)
    assert book.refused == []
    assert book.tokens_issued == 1
    [(path, score)] = book.scores
    assert path == "/lineitems/d9/scores?course=1"
    assert score["userId"] == "ada"
    assert score["scoreGiven"] == 0
    assert score["scoreMaximum"] == PARTS == 12
    assert score["activityProgress"] == "InProgress"
    assert score["gradingProgress"] == "Pending"
    assert datetime.fromisoformat(score["timestamp"]).tzinfo is not None
    assert outbox(engine) == {}


def test_progress_is_sent_as_it_stands_at_send_time(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, store: Store
) -> None:
    learner = launch_as()
    sender.send_due()
    store.append(learner, EventKind.READING_LOCKED, {"choice": RIGHT_READING_ID, "right": True})
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    assert sender.send_due().sent == 1
    first, latest = book.scores[0][1], book.scores[1][1]
    assert latest["scoreGiven"] == 2  # the reading and one prediction: both writes in one send
    assert latest["timestamp"] > first["timestamp"]
    assert len(book.scores) == 2
    assert book.tokens_issued == 1  # the token is kept between rounds


@pytest.mark.both_databases
def test_a_gate_changing_write_queues_the_learner_in_its_own_transaction(
    store: Store, engine: Engine
) -> None:
    graded, ungraded = store.create_learner(), store.create_learner()
    with engine.begin() as connection:
        connection.execute(
            LtiGradeTarget.__table__.insert().values(
                learner_id=graded,
                target_key="t" * 64,
                registration_id=_registration(engine),
                user_id="ada",
                resource_link_id="link",
                lineitem_url="https://platform.example.edu/lineitems/1",
            )
        )
    for kind, payload in [
        (EventKind.NUMBERS_CHECKED, {"answers": []}),
        (EventKind.READING_LOCKED, {"choice": RIGHT_READING_ID, "right": True}),
        (EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"}),
        (EventKind.ROW_PLAYED, {"row": "both"}),
        (EventKind.GATE_CLOSED, {"recording_digest": "0" * 64, "recording_file": "r.json"}),
    ]:
        before = outbox(engine).get(graded, (0, 0))[0]
        store.append(graded, kind, payload)
        store.append(ungraded, kind, payload)
        assert outbox(engine)[graded][0] == before + 1, kind
    # Writes that cannot change the gate queue nothing.
    store.append(graded, EventKind.HINT_OPENED, {"rung": 1})
    store.append(graded, EventKind.TAKEAWAY_SAVED, {"text": "x"})
    assert outbox(engine) == {graded: (5, 0)}


def _registration(engine: Engine) -> int:
    register_platform(engine, "https://platform.example.edu/jwks")
    from normdive.lti.registrations import all_registrations

    return all_registrations(engine)[0].id


def test_a_closed_gate_sends_full_marks_fully_graded(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, store: Store
) -> None:
    learner = launch_as()
    store.append(
        learner,
        EventKind.GATE_CLOSED,
        {"recording_digest": "0" * 64, "recording_file": "the-transformer-block.json"},
    )
    sender.send_due()
    score = book.scores[-1][1]
    assert score["scoreGiven"] == score["scoreMaximum"] == PARTS
    assert score["activityProgress"] == "Completed"
    assert score["gradingProgress"] == "FullyGraded"


def test_without_a_line_item_the_tool_creates_one(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, store: Store
) -> None:
    learner = launch_as(with_lineitem=False)
    sender.send_due()
    assert book.lineitems_created == [
        {
            "scoreMaximum": PARTS,
            "label": f"D9 {LESSON.title}",
            "resourceLinkId": "resource-link-1",
            "submissionReview": {"reviewableStatus": ["InProgress", "Submitted", "Completed"]},
        }
    ]
    assert book.scores[-1][0] == "/lineitems/1/scores"
    store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    sender.send_due()
    assert len(book.lineitems_created) == 1  # kept: the next score goes to the same one
    assert book.scores[-1][0] == "/lineitems/1/scores"


def test_while_the_platform_is_down_the_score_waits_then_goes(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, clock: Clock, engine: Engine
) -> None:
    launch_as(sub="ada")
    book.down = True
    assert sender.send_due().failed == 1
    [state] = passback.targets(engine)
    assert (state.status, state.attempts, state.last_status) == ("failing", 1, 503)
    assert "unreachable or failing (503" in (state.reason or "")
    assert sender.send_due().tried == 0  # not due again yet: it waits FIRST_RETRY_S
    assert [retry_delay(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert retry_delay(50) == passback.MAX_RETRY_S == 300.0
    book.down = False
    clock.advance(passback.FIRST_RETRY_S)
    assert sender.send_due().sent == 1
    [state] = passback.targets(engine)
    assert (state.status, state.attempts, state.due_at, state.reason) == ("sent", 0, None, None)
    assert len(book.scores) == 1


# (case, the endpoint that answers it, its body, the target's state after, what its reason
# says). A token endpoint's answer fails its registration for now: tried again later. A line
# item the platform says it created but names unusably is not created again until the score
# changes (each try would add a column to the gradebook).
HOSTILE_ANSWERS = [
    ("token of arrays 50,000 deep", "/token", b"[" * 50_000, "failing", "gave no access token"),
    (
        "token lifetime beyond a float",
        "/token",
        b'{"access_token": "t", "expires_in": ' + b"9" * 400 + b"}",
        "failing",
        "gave no access token",
    ),
    (
        "token over the answer limit",
        "/token",
        b'{"access_token": "' + b"t" * passback.MAX_ANSWER_BYTES + b'"}',
        "failing",
        "gave no access token",
    ),
    ("line item of arrays 50,000 deep", "/lineitems", b"[" * 50_000, "refused", "named no id"),
    (
        "line item id too long to keep",
        "/lineitems",
        b'{"id": "https://platform.example.edu/lineitems/' + b"l" * LTI_URL_LENGTH + b'"}',
        "refused",
        f"longer than {LTI_URL_LENGTH} characters",
    ),
    (
        "line item id with NUL",
        "/lineitems",
        b'{"id": "https://platform.example.edu/lineitems/1\\u0000"}',
        "refused",
        "is not a URL",
    ),
]


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("case", "path", "body", "status", "words"),
    HOSTILE_ANSWERS,
    ids=[case[0] for case in HOSTILE_ANSWERS],
)
def test_a_hostile_answer_is_a_failed_send_that_waits(
    launch_as: LaunchAs,
    book: GradeBook,
    sender: Sender,
    clock: Clock,
    engine: Engine,
    case: str,
    path: str,
    body: bytes,
    status: str,
    words: str,
) -> None:
    learner = launch_as(with_lineitem=False)
    book.raw_answers[path] = body
    report = sender.send_due()
    assert (report.sent, report.failed) == (0, 1)
    [state] = passback.targets(engine)
    assert state.learner_id == learner
    assert state.status == status
    assert words in (state.reason or "")
    if len(body) > passback.MAX_ANSWER_BYTES:
        assert "over 64 KiB, not read" in (state.last_answer or "")
    assert book.scores == []
    asked = len(book.requests)
    clock.advance(passback.MAX_RETRY_S)
    sender.send_due()
    if status == "failing":
        assert len(book.requests) == asked + 1  # the token endpoint, once more
    else:
        assert len(book.requests) == asked  # no new line item until the score changes


def test_a_launch_without_the_score_scope_sends_nothing(
    app: Starlette, book: GradeBook, platform_key: RSAKey, engine: Engine
) -> None:
    with browser(app) as client:
        asked = login(client)
        token = signed(launch_claims(asked.nonce), platform_key)
        assert launch(client, token, asked.state).status_code == 303
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(LtiGradeTarget)).scalar() == 0
    assert outbox(engine) == {}


def outbox_command(database_url: str, *options: str) -> str:
    result = CliRunner().invoke(
        cli,
        ["lti", "outbox", *options],
        env={"DATABASE_URL": database_url, "NORMDIVE_SECRET_KEY": None},
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_the_outbox_command_shows_the_queue(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, database_url: str
) -> None:
    learner = launch_as(sub="ada")
    launch_as(sub="bob")
    book.refused_users.add("ada")
    sender.send_due()
    shown = outbox_command(database_url)
    assert "2 grade target(s): 0 waiting to be sent, 1 refused" in shown
    assert "1 up to date." in shown
    assert f"{learner}  user ada  link resource-link-1  https://platform.example.edu" in shown
    assert "refused; last answer 400; no try due" in shown
    assert (
        "Moodle says this user cannot be graded here (not enrolled as a student, or their "
        "enrolment is suspended or over): check their enrolment in the course, then use Resend "
        "changed grades (or `normdive lti resend --context KEY`) (Moodle answered 400 Incorrect "
        "score received)"
    ) in shown
    assert "user bob" not in shown  # up to date: counted, not listed
    assert "user bob" in outbox_command(database_url, "--all")
    listed = json.loads(outbox_command(database_url, "--json"))
    assert {(t["user_id"], t["status"], t["last_status"]) for t in listed} == {
        ("ada", "refused", 400),
        ("bob", "sent", 200),
    }


def test_rotate_key_publishes_the_new_key_and_the_previous_one(
    app: Starlette, database_url: str, book: GradeBook, launch_as: LaunchAs, sender: Sender
) -> None:
    def kids() -> list[str]:
        with browser(app) as client:
            return [key["kid"] for key in client.get("/lti/jwks").json()["keys"]]

    first = kids()
    assert len(first) == 1
    env = {"DATABASE_URL": database_url, "NORMDIVE_SECRET_KEY": None}
    result = CliRunner().invoke(cli, ["lti", "rotate-key"], env=env)
    assert result.exit_code == 0, result.output
    second = kids()
    assert len(second) == 2 and first[0] in second
    assert CliRunner().invoke(cli, ["lti", "rotate-key"], env=env).exit_code == 0
    third = kids()
    assert len(third) == 2 and first[0] not in third
    # The grade book verifies assertions against the set it fetched now: the new key signs.
    book.tool_key_set = {"keys": [k for k in _key_set(app)["keys"] if k["kid"] == third[0]]}
    launch_as()
    assert sender.send_due().sent == 1
    assert book.refused == []


def _key_set(app: Starlette) -> dict[str, list[dict[str, str]]]:
    with browser(app) as client:
        answer = client.get("/lti/jwks")
        assert answer.headers["cache-control"] == "public, max-age=300"
        return dict(answer.json())


def test_two_senders_never_send_the_same_target_twice(
    launch_as: LaunchAs, book: GradeBook, engine: Engine, settings: Settings
) -> None:
    for _ in range(3):
        launch_as()
    first = Sender(engine, LESSON, settings.recording_path)
    second = Sender(engine, LESSON, settings.recording_path)
    # While the first sends its first target, the second runs a round: it takes the two
    # targets the first has not claimed yet, and the first leaves them to it.
    original = first._send_target
    seen: list[int] = []

    def send_while_the_other_runs(*args: Any) -> Any:
        seen.append(second.send_due().sent)
        return original(*args)

    first._send_target = send_while_the_other_runs  # type: ignore[method-assign]
    assert first.send_due().sent == 1
    assert seen == [2]
    assert len({score["userId"] for _, score in book.scores}) == len(book.scores) == 3
    assert outbox(engine) == {}


def _scores_at(book: GradeBook, lineitem: str, user: str) -> list[int]:
    """The scores `user` got at `lineitem` (a path), in the order they came."""
    return [
        score["scoreGiven"]
        for path, score in book.scores
        if path.split("?")[0] == f"{lineitem}/scores" and score["userId"] == user
    ]


def _asked(book: GradeBook, path: str) -> int:
    return sum(asked == path for asked in book.requests)


def _state(engine: Engine, user: str, link: str) -> passback.TargetState:
    [found] = [
        t for t in passback.targets(engine) if (t.user_id, t.resource_link_id) == (user, link)
    ]
    return found


# The rows Ada predicts while the platform is down, one each 10 s: the last ones again.
DURING_THE_OUTAGE = (
    "neither",
    "layernorm_only",
    "residual_only",
    "both",
    "neither",
    "both",
    "both",
)


def test_one_bad_target_never_holds_back_another(
    launch_as: LaunchAs,
    book: GradeBook,
    sender: Sender,
    clock: Clock,
    store: Store,
    engine: Engine,
    database_url: str,
) -> None:
    """A platform deletes one of Ada's line items, refuses Eve (400, as Moodle does for a user
    who cannot be graded), then is down for a minute. Ada's other targets get every score,
    nothing is retried without end, and the outbox says why in words."""
    ada = launch_as(sub="ada", link="link-gone", lineitem="/lineitems/gone")
    for link in ("link-b", "link-c"):
        launch_as(sub="ada", link=link, lineitem=f"/lineitems/{link}")
    eve = launch_as(sub="eve", link="link-b", lineitem="/lineitems/link-b")
    book.deleted.add("/lineitems/gone")
    book.refused_users.add("eve")

    def write(learner: str, row: str) -> None:
        store.append(learner, EventKind.ROW_PREDICTED, {"row": row, "outcome": "learns"})

    sender.send_due()
    write(ada, "both")
    write(eve, "both")
    sender.send_due()
    assert _scores_at(book, "/lineitems/link-b", "ada") == [0, 1]
    assert _scores_at(book, "/lineitems/link-c", "ada") == [0, 1]
    assert _asked(book, "/lineitems/gone/scores") == 1  # gone: never asked again
    assert _asked(book, "/lineitems/link-b/scores") == 4  # Eve twice: her score changed
    assert _state(engine, "ada", "link-gone").status == "gone"
    assert _state(engine, "eve", "link-b").status == "refused"

    # Down for a minute, while Ada keeps working: each write fans out, none resets the wait.
    book.down = True
    asked_before = len(book.requests)
    for second in range(61):
        if second % 10 == 0:
            write(ada, DURING_THE_OUTAGE[second // 10])
        sender.send_due()
        for target in passback.targets(engine):
            if target.due_at is not None:
                assert target.due_at - clock.now <= timedelta(seconds=passback.MAX_RETRY_S)
        clock.advance(1)
    # Two targets, tried at 0, 5, 15, 35 s (each wait doubling from FIRST_RETRY_S).
    assert len(book.requests) - asked_before == 2 * 4
    assert _state(engine, "ada", "link-b").status == "failing"
    book.down = False
    clock.advance(passback.MAX_RETRY_S)
    sender.send_due()
    latest = _scores_at(book, "/lineitems/link-b", "ada")[-1]
    assert latest == 4  # all four row predictions
    assert _scores_at(book, "/lineitems/link-b", "ada")[-1] == latest
    assert _scores_at(book, "/lineitems/link-c", "ada")[-1] == latest
    assert _asked(book, "/lineitems/gone/scores") == 1
    assert _scores_at(book, "/lineitems/link-b", "eve") == []
    # Settled: nothing is due, and nothing more is asked however long the worker runs.
    asked_before = len(book.requests)
    for _ in range(5):
        clock.advance(passback.MAX_RETRY_S)
        assert sender.send_due().tried == 0
    assert len(book.requests) == asked_before
    assert {t.status for t in passback.targets(engine)} == {"sent", "gone", "refused"}

    shown = outbox_command(database_url)
    assert (
        "the platform says the line item is gone (404 Line item not found): it was deleted in "
        "the gradebook. D9 sends this learner's score again once a launch names a line item"
    ) in shown
    assert (
        "Moodle says this user cannot be graded here (not enrolled as a student, or their "
        "enrolment is suspended or over): check their enrolment in the course"
    ) in shown
    assert "(Moodle answered 400 Incorrect score received)" in shown

    # A launch naming a line item again (the teacher made a new grade column): it goes there.
    launch_as(sub="ada", link="link-gone", lineitem="/lineitems/new-column")
    sender.send_due()
    assert _scores_at(book, "/lineitems/new-column", "ada") == [latest]
    assert _state(engine, "ada", "link-gone").status == "sent"


def test_an_outage_waits_at_most_five_minutes_between_tries(
    launch_as: LaunchAs,
    book: GradeBook,
    sender: Sender,
    clock: Clock,
    store: Store,
    engine: Engine,
) -> None:
    learner = launch_as()
    sender.send_due()
    book.down = True
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    waits = []
    for _ in range(10):
        assert sender.send_due().failed == 1
        [state] = passback.targets(engine)
        assert state.due_at is not None
        wait = (state.due_at - clock.now).total_seconds()
        waits.append(wait)
        clock.advance(wait)
    assert waits == [5, 10, 20, 40, 80, 160, 300, 300, 300, 300]
    assert book.requests.count("/lineitems/d9/scores") == 1 + 10


def test_a_deleted_line_item_the_tool_created_is_created_again_once(
    launch_as: LaunchAs,
    book: GradeBook,
    sender: Sender,
    store: Store,
    engine: Engine,
    database_url: str,
) -> None:
    learner = launch_as(sub="ada", with_lineitem=False)
    sender.send_due()
    assert book.scores[-1][0] == "/lineitems/1/scores"
    book.deleted.add("/lineitems/1")
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    assert sender.send_due().sent == 1
    assert len(book.lineitems_created) == 2
    assert book.scores[-1][0] == "/lineitems/2/scores"
    assert book.scores[-1][1]["scoreGiven"] == 1
    state = _state(engine, "ada", "resource-link-1")
    assert (state.status, state.lineitem_url) == ("sent", f"{book.base}/lineitems/2")
    assert "the line item was deleted in the gradebook: D9 created a new one" in (
        outbox_command(database_url, "--all")
    )
    # Deleted again: the gradebook's owner does not want it. Gone, not made a third time.
    book.deleted.add("/lineitems/2")
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "neither", "outcome": "learns"})
    assert sender.send_due().failed == 1
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "residual_only", "outcome": "chance"})
    sender.send_due()
    assert len(book.lineitems_created) == 2
    assert _asked(book, "/lineitems/2/scores") == 2  # the score it took, the 404
    assert _state(engine, "ada", "resource-link-1").status == "gone"


def test_a_refused_token_is_fetched_again_once_then_reported(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, store: Store, engine: Engine
) -> None:
    learner = launch_as(sub="ada")
    sender.send_due()
    assert book.tokens_issued == 1
    book.revoked_tokens.add("token-1")  # the platform dropped it before it expired
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "neither", "outcome": "learns"})
    assert sender.send_due().sent == 1
    assert book.tokens_issued == 2
    assert book.scores[-1][1]["scoreGiven"] == 1
    book.revoked_tokens.update({"token-2", "token-3"})
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    assert sender.send_due().failed == 1
    assert book.tokens_issued == 3  # one new token, not one per try
    state = _state(engine, "ada", "resource-link-1")
    assert (state.status, state.last_status) == ("refused", 401)
    assert "refused the tool's access to the line item, even with a new token (401 " in (
        state.reason or ""
    )
    assert "invalid_token" in (state.reason or "")


@pytest.mark.both_databases
def test_a_refused_token_endpoint_fails_its_registration_with_one_request(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine, database_url: str
) -> None:
    for sub in ("ada", "bob", "cy"):
        launch_as(sub=sub)
    book.token_refusal = "client disabled"
    report = sender.send_due()
    assert (report.sent, report.failed) == (0, 3)
    assert book.requests == ["/token"]
    assert {(t.status, t.attempts) for t in passback.targets(engine)} == {("failing", 1)}
    shown = outbox_command(database_url)
    assert "failing; last answer 400; 1 failed tries in a row; next try" in shown
    assert (
        "the platform refused the token (400 invalid_client: client disabled): the client may "
        "have been disabled"
    ) in shown


def test_a_line_item_off_the_platforms_origins_gets_no_token(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    launch_as(
        sub="ada",
        **{
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": [passback.SCORE_SCOPE],
                "lineitem": "https://grades.elsewhere.example/lineitems/1",
            }
        },
    )
    assert sender.send_due().failed == 1
    assert book.requests == []  # not even a token: it would go nowhere it may
    state = _state(engine, "ada", "resource-link-1")
    assert state.status == "foreign"
    assert "https://grades.elsewhere.example, which is none of the origins registered" in (
        state.reason or ""
    )


def test_a_registrations_origins_include_where_canvas_serves_grades() -> None:
    canvas = Registration(
        id=1,
        issuer="https://canvas.instructure.com",
        client_id="10000000000001",
        auth_login_url="https://sso.canvaslms.com/api/lti/authorize_redirect",
        token_url="https://sso.canvaslms.com/login/oauth2/token",
        jwks_url="https://sso.canvaslms.com/api/lti/security/jwks",
        deployment_ids=("1:abc",),
        prerequisite_mode=PrerequisiteMode.PLATFORM,
        frame_origins=("https://school.instructure.com",),
    )
    lineitem = "https://school.instructure.com/api/lti/courses/5/line_items/2"
    assert passback.foreign_reason(lineitem, canvas) is None
    assert passback.foreign_reason("https://SSO.canvaslms.com:443/x", canvas) is None
    for elsewhere in (
        "https://school.instructure.com.evil.example/api/lti/courses/5/line_items/2",
        "http://school.instructure.com/api/lti/courses/5/line_items/2",
        "https://school.instructure.com:8443/api/lti/courses/5/line_items/2",
    ):
        assert passback.foreign_reason(elsewhere, canvas) is not None, elsewhere


def test_a_write_fanned_out_during_a_send_is_sent_next_round(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, store: Store, settings: Settings
) -> None:
    learner = launch_as(sub="ada")
    other_worker = Sender(
        engine=sender.engine, lesson=LESSON, recording_path=settings.recording_path
    )
    original = sender._send_target

    def with_a_write_meanwhile(*args: Any) -> Any:
        outcome = original(*args)
        # The learner works on, and another worker fans it out while this one still holds
        # the target: it cannot make the target due, so the send's end must.
        store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
        assert other_worker.fan_out() == 1
        return outcome

    sender._send_target = with_a_write_meanwhile  # type: ignore[method-assign]
    assert sender.send_due().sent == 1
    sender._send_target = original  # type: ignore[method-assign]
    assert sender.send_due().sent == 1
    assert [score["scoreGiven"] for _, score in book.scores] == [0, 1]


@contextmanager
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """A platform on 127.0.0.1 that takes connections and never answers: its origin, and the
    connections it took."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(SILENT_POLL_S)
    taken: list[socket.socket] = []
    stop = threading.Event()

    def take() -> None:
        while not stop.is_set():
            try:
                taken.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", taken
    finally:
        stop.set()
        thread.join()
        for connection in taken:
            connection.close()
        listener.close()


# How often the silent platform looks for its stop; how long the sender waits for an answer.
SILENT_POLL_S = 0.05
SILENT_TIMEOUT_S = 0.5


def test_a_silent_platform_costs_one_timeout_a_round(
    engine: Engine, store: Store, settings: Settings, clock: Clock
) -> None:
    """Three targets on a host that never answers and one on a platform that does: the silent
    host is waited for once a round, and the other target does not wait behind it."""
    with (
        grade_book_server(GradeBook()) as book,
        silent_server() as (silent, taken),
        httpx.Client(timeout=SILENT_TIMEOUT_S, follow_redirects=False) as client,
    ):
        registration = register(
            engine,
            validated(
                issuer=ISSUER,
                client_id=CLIENT_ID,
                auth_login_url=f"{ISSUER}/auth",
                token_url=book.token_url,
                jwks_url=f"{ISSUER}/jwks",
                deployment_ids=(DEPLOYMENT_ID,),
                frame_origins=(silent,),
            ),
        )
        book.tool_key_set = dict(tool_keys.public_key_set(engine))
        learners = [store.create_learner() for _ in range(4)]
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
                        "lineitem_url": f"{silent if index < 3 else book.base}/lineitems/{index}",
                    }
                    for index, learner in enumerate(learners)
                ],
            )
        for learner in learners:
            store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
        sender = Sender(engine, LESSON, settings.recording_path, client=client, clock=clock)
        report = sender.send_due()
        assert (report.sent, report.failed) == (1, 3)
        assert len(taken) == 1
        assert [score["userId"] for _, score in book.scores] == ["user-3"]
        failing = [t for t in passback.targets(engine) if t.status == "failing"]
        assert len(failing) == 3
        assert all("ReadTimeout" in (t.reason or "") for t in failing)


def _created_for(book: GradeBook, link: str) -> int:
    return sum(body.get("resourceLinkId") == link for body in book.lineitems_created)


def test_the_learners_of_a_link_share_the_one_line_item_the_tool_creates(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    """A launch naming only the container: one line item per resource link, not per learner."""
    launch_as(sub="ada", with_lineitem=False)
    launch_as(sub="bob", with_lineitem=False)
    launch_as(sub="cy", with_lineitem=False, link="resource-link-2")
    assert sender.send_due().sent == 3
    assert _created_for(book, "resource-link-1") == 1
    assert _created_for(book, "resource-link-2") == 1
    on_link_1 = {path for path, score in book.scores if score["userId"] in ("ada", "bob")}
    assert on_link_1 == {"/lineitems/1/scores"}
    # Looked up once per link, before creating (AGS 2.0, 3.2).
    assert book.requests.count("GET /lineitems") == 2
    # A learner launching later takes it without asking the container again.
    launch_as(sub="dee", with_lineitem=False)
    sender.send_due()
    assert len(book.lineitems_created) == 2
    assert book.requests.count("GET /lineitems") == 2
    assert _state(engine, "dee", "resource-link-1").lineitem_url == f"{book.base}/lineitems/1"


def test_a_line_item_the_container_holds_for_the_link_is_used_not_created(
    launch_as: LaunchAs, book: GradeBook, sender: Sender
) -> None:
    book.lineitems_created.append(
        {"scoreMaximum": PARTS, "label": "made before", "resourceLinkId": "resource-link-1"}
    )
    launch_as(sub="ada", with_lineitem=False)
    assert sender.send_due().sent == 1
    assert len(book.lineitems_created) == 1
    assert book.scores[-1][0] == "/lineitems/1/scores"


@pytest.mark.both_databases
def test_two_learners_first_sends_at_once_create_one_line_item(
    launch_as: LaunchAs, book: GradeBook, engine: Engine, settings: Settings, clock: Clock
) -> None:
    launch_as(sub="ada", with_lineitem=False)
    launch_as(sub="bob", with_lineitem=False)
    senders = [Sender(engine, LESSON, settings.recording_path, clock=clock) for _ in range(2)]
    start = threading.Barrier(2)

    def send(sender: Sender) -> None:
        start.wait()
        sender.send_due(limit=2)

    threads = [threading.Thread(target=send, args=(each,)) for each in senders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for _ in range(3):  # a target that waited for the other's line item goes next
        clock.advance(passback.LINK_WAIT_S)
        senders[0].send_due()
    assert len(book.lineitems_created) == 1
    assert {score["userId"] for _, score in book.scores} == {"ada", "bob"}
    assert {path for path, _ in book.scores} == {"/lineitems/1/scores"}


def test_a_target_waits_while_another_sender_creates_its_links_line_item(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine, clock: Clock
) -> None:
    from normdive.lti.grade_doctor import LINEITEM_BEING_MADE
    from normdive.store.tables import LtiLinkLineitem

    launch_as(sub="ada", with_lineitem=False)
    with engine.connect() as connection:
        key, registration = connection.execute(
            select(LtiGradeTarget.target_key, LtiGradeTarget.registration_id)
        ).one()
    with engine.begin() as connection:
        connection.execute(
            insert(LtiLinkLineitem).values(
                link_key=key,
                registration_id=registration,
                lineitem_url=None,
                claimed_until=clock.now + timedelta(seconds=60),
                updated_at=clock.now,
            )
        )
    assert sender.send_due().sent == 0
    [state] = passback.targets(engine)
    assert (state.status, state.reason) == ("due", LINEITEM_BEING_MADE)
    assert book.lineitems_created == [] and book.scores == []
    # The other sender died holding it: once its claim has lapsed, this one makes it.
    clock.advance(passback.CLAIM_LEASE_S + 1)
    assert sender.send_due().sent == 1
    assert len(book.lineitems_created) == 1


def test_a_refused_token_leaves_the_links_claim_free_for_the_next_round(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, clock: Clock, engine: Engine
) -> None:
    launch_as(sub="ada", with_lineitem=False)
    book.token_refusal = "the client is disabled"
    assert sender.send_due().failed == 1
    assert book.lineitems_created == []
    book.token_refusal = None
    clock.advance(passback.FIRST_RETRY_S)  # well within a claim's lease
    assert sender.send_due().sent == 1  # not kept waiting for a claim nobody holds
    assert len(book.lineitems_created) == 1


LIS = "http://purl.imsglobal.org/vocab/lis/v2/"


@pytest.mark.parametrize(
    "roles",
    [
        [f"{LIS}membership#Instructor"],
        [f"{LIS}membership#Learner", f"{LIS}membership#Instructor"],  # staff wins
        [f"{LIS}membership#Mentor"],
        [f"{LIS}institution/person#Student"],  # no context role
    ],
)
def test_only_a_learner_of_the_course_is_a_grade_target(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine, roles: list[str]
) -> None:
    launch_as(sub="teacher", lti_roles=roles)
    assert passback.targets(engine) == []
    assert sender.send_due().tried == 0
    assert book.scores == []


def test_a_learner_who_becomes_staff_is_graded_no_more(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    launch_as(sub="sam")
    assert sender.send_due().sent == 1
    launch_as(sub="sam", lti_roles=[f"{LIS}membership/Instructor#TeachingAssistant"])
    assert passback.targets(engine) == []


def test_an_empty_line_item_claim_is_no_line_item(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    """Moodle, once the tool made the link's line item in the container, names it "" in the
    launches after: the link's line item the tool holds takes their scores."""
    launch_as(sub="ada", with_lineitem=False)
    assert sender.send_due().sent == 1
    endpoint = {**book.endpoint_claim(with_lineitem=False), "lineitem": ""}
    launch_as(sub="bob", **{"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": endpoint})
    assert sender.send_due().sent == 1
    assert [score["userId"] for _, score in book.scores] == ["ada", "bob"]
    assert {path for path, _ in book.scores} == {"/lineitems/1/scores"}
    assert len(book.lineitems_created) == 1
    assert _state(engine, "bob", "resource-link-1").status == "sent"


def test_a_platform_holding_the_score_already_is_sent_not_refused(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    """A target whose send was cut short before its timestamp was kept (as before this
    version kept it): the strict platform says it holds a score with that timestamp."""
    book.strict_timestamps = True
    launch_as(sub="ada")
    assert sender.send_due().sent == 1
    with engine.begin() as connection:
        connection.execute(
            LtiGradeTarget.__table__.update().values(
                status="due", due_at=datetime.now(UTC), sent_score=None, sent_timestamp=None
            )
        )
    report = sender.send_due()
    assert (report.sent, report.failed) == (1, 0)
    [target] = passback.targets(engine)
    assert target.status == "sent" and not target.needs_attention


def test_a_send_whose_answer_was_lost_goes_again_stamped_later(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine, clock: Clock
) -> None:
    book.strict_timestamps = True
    book.lose_answers = 1
    launch_as(sub="eve")
    assert sender.send_due().failed == 1  # the platform took it; the answer never came
    clock.advance(passback.MAX_RETRY_S)
    assert sender.send_due().sent == 1
    first, second = (datetime.fromisoformat(score["timestamp"]) for _, score in book.scores)
    assert second > first
    [target] = passback.targets(engine)
    assert target.status == "sent" and book.refused == []


def test_a_token_endpoints_error_page_is_said_in_a_line_not_quoted(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine, database_url: str
) -> None:
    """Moodle's token endpoint answers an HTML page when its HTTP security keeps it from
    fetching the tool's key set."""
    page = (
        b"<!DOCTYPE html><html><head><title>Error</title></head><body><div class='error'>"
        b"Exception - JWK Set did not contain any keys</div><script>var M = {};</script>"
        b"</body></html>"
    )
    book.raw_answers["/token"] = page
    book.raw_status = 500
    launch_as(sub="ada")
    assert sender.send_due().failed == 1
    [target] = passback.targets(engine)
    assert target.reason is not None
    assert "could not fetch the tool's key set" in target.reason
    assert '"cURL blocked hosts list"' in target.reason
    assert "<" not in target.reason and "var M" not in target.reason
    assert target.last_answer is None
    assert "var M" not in outbox_command(database_url)
