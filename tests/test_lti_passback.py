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

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, func, select, update
from typer.testing import CliRunner

from conftest import SettingsFactory
from lesson_answers import RIGHT_READING_ID
from lti_platform import (
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
from normdive.lti import passback
from normdive.lti.passback import Sender, retry_delay
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LTI_URL_LENGTH, LtiGradeTarget, LtiScoreOutbox
from normdive.web.identity import COOKIE_NAME

LESSON = load_lesson()
PARTS = passback.parts_total(LESSON)


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def book(app: FastAPI, engine: Engine, jwks: KeySetServer) -> Iterator[GradeBook]:
    with grade_book_server(GradeBook()) as served, browser(app) as client:
        register_platform(engine, jwks.url, token_url=served.token_url)
        served.tool_key_set = client.get("/lti/jwks").json()
        yield served


@pytest.fixture
def sender(engine: Engine, settings: Settings) -> Sender:
    return Sender(engine, LESSON, settings.recording_path)


LaunchAs = Callable[..., str]


@pytest.fixture
def launch_as(app: FastAPI, book: GradeBook, platform_key: RSAKey) -> Iterator[LaunchAs]:
    clients: list[TestClient] = []

    def launched(*, with_lineitem: bool = True, **claims: object) -> str:
        client = browser(app).__enter__()
        clients.append(client)
        asked = login(client)
        claims.setdefault("sub", unique_sub())
        token = signed(
            launch_claims(
                asked.nonce,
                **{
                    "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": (
                        book.endpoint_claim(with_lineitem=with_lineitem)
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
        {"scoreMaximum": PARTS, "label": f"D9 {LESSON.title}", "resourceLinkId": "resource-link-1"}
    ]
    assert book.scores[-1][0] == "/lineitems/1/scores"
    store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    sender.send_due()
    assert len(book.lineitems_created) == 1  # kept: the next score goes to the same one
    assert book.scores[-1][0] == "/lineitems/1/scores"


def test_while_the_platform_is_down_the_score_waits_then_goes(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, engine: Engine
) -> None:
    learner = launch_as()
    book.down = True
    assert sender.send_due().failed == 1
    assert outbox(engine)[learner] == (1, 1)
    assert sender.send_due().failed == 0  # not due again yet: it waits FIRST_RETRY_S
    with engine.connect() as connection:
        row = connection.execute(select(LtiScoreOutbox)).one()
    assert "answered 503" in (row.last_error or "")
    assert [retry_delay(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert retry_delay(50) == passback.MAX_RETRY_S
    book.down = False
    with engine.begin() as connection:
        connection.execute(update(LtiScoreOutbox).values(due_at=datetime.now(UTC)))
    assert sender.send_due().sent == 1
    assert outbox(engine) == {}
    assert len(book.scores) == 1


# (case, the endpoint that answers it, its body, what the send's failure says)
HOSTILE_ANSWERS = [
    ("token of arrays 50,000 deep", "/token", b"[" * 50_000, "gave no access token"),
    (
        "token lifetime beyond a float",
        "/token",
        b'{"access_token": "t", "expires_in": ' + b"9" * 400 + b"}",
        "gave no access token",
    ),
    ("line item of arrays 50,000 deep", "/lineitems", b"[" * 50_000, "named no id"),
    (
        "line item id too long to keep",
        "/lineitems",
        b'{"id": "https://platform.example.edu/lineitems/' + b"l" * LTI_URL_LENGTH + b'"}',
        f"longer than {LTI_URL_LENGTH} characters",
    ),
    (
        "line item id with NUL",
        "/lineitems",
        b'{"id": "https://platform.example.edu/lineitems/1\\u0000"}',
        "is not a URL",
    ),
]


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("case", "path", "body", "words"),
    HOSTILE_ANSWERS,
    ids=[case[0] for case in HOSTILE_ANSWERS],
)
def test_a_hostile_answer_is_a_failed_send_that_waits(
    launch_as: LaunchAs,
    book: GradeBook,
    sender: Sender,
    engine: Engine,
    case: str,
    path: str,
    body: bytes,
    words: str,
) -> None:
    learner = launch_as(with_lineitem=False)
    book.raw_answers[path] = body
    report = sender.send_due()
    assert (report.sent, report.failed) == (0, 1)
    with engine.connect() as connection:
        row = connection.execute(select(LtiScoreOutbox)).one()
        kept = connection.execute(select(LtiGradeTarget.lineitem_url)).scalar_one()
    assert row.learner_id == learner
    assert row.attempts == 1
    assert words in (row.last_error or "")
    assert kept is None
    assert book.scores == []


def test_a_launch_without_the_score_scope_sends_nothing(
    app: FastAPI, book: GradeBook, platform_key: RSAKey, engine: Engine
) -> None:
    with browser(app) as client:
        asked = login(client)
        token = signed(launch_claims(asked.nonce), platform_key)
        assert launch(client, token, asked.state).status_code == 303
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(LtiGradeTarget)).scalar() == 0
    assert outbox(engine) == {}


def test_the_outbox_command_shows_the_queue(
    launch_as: LaunchAs, book: GradeBook, sender: Sender, database_url: str
) -> None:
    learner = launch_as()
    book.down = True
    sender.send_due()
    result = CliRunner().invoke(
        cli, ["lti", "outbox"], env={"DATABASE_URL": database_url, "NORMDIVE_SECRET_KEY": None}
    )
    assert result.exit_code == 0, result.output
    assert "1 score(s) waiting." in result.output
    assert f"{learner}  tries 1" in result.output
    assert "answered 503" in result.output


def test_rotate_key_publishes_the_new_key_and_the_previous_one(
    app: FastAPI, database_url: str, book: GradeBook, launch_as: LaunchAs, sender: Sender
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


def _key_set(app: FastAPI) -> dict[str, list[dict[str, str]]]:
    with browser(app) as client:
        answer = client.get("/lti/jwks")
        assert answer.headers["cache-control"] == "public, max-age=300"
        return dict(answer.json())


def test_two_senders_never_send_the_same_row_twice(
    launch_as: LaunchAs, book: GradeBook, engine: Engine, settings: Settings
) -> None:
    for _ in range(3):
        launch_as()
    first = Sender(engine, LESSON, settings.recording_path)
    second = Sender(engine, LESSON, settings.recording_path)
    # While the first sends its first row, the second runs a round: it takes the two rows
    # the first has not claimed yet, and the first leaves them to it.
    original = first._send
    seen: list[int] = []

    def send_while_the_other_runs(learner_id: str) -> None:
        seen.append(second.send_due().sent)
        original(learner_id)

    first._send = send_while_the_other_runs  # type: ignore[method-assign]
    assert first.send_due().sent == 1
    assert seen == [2]
    assert len({score["userId"] for _, score in book.scores}) == len(book.scores) == 3
    assert outbox(engine) == {}
