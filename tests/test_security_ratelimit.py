"""The write limit (web.security.ratelimit): at most `attempts_per_minute` writes per learner
in any 60 s, counted in the events table, so shared by every worker on the database; beyond
it a readable 429 with Retry-After, and nothing written. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from pydantic import ValidationError
from sqlalchemy import Engine, func, insert, select
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SECRET_KEY, MakeClient, SettingsFactory, ablation_recording, write_recording
from normdive.config import DEFAULT_ATTEMPTS_PER_MINUTE, Settings
from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.store.tables import EventRecord
from normdive.web.app import create_app
from normdive.web.security.ratelimit import (
    COUNTED_KINDS,
    WINDOW_S,
    Throttled,
    TooManyLearners,
    throttled,
)
from page_client import PageClient

pytestmark = pytest.mark.both_databases

JSON = {"Accept": "application/json"}
LIMIT = 4


def format_error(n: int) -> dict[str, str]:
    """A format error (no attempt used on the page), a different one for each n: an answer
    unchanged since the field's last check is not checked again, so it writes nothing."""
    return {"row1_mean": f"two {n}"}


@pytest.fixture
def app(make_settings: SettingsFactory, tmp_path: Path) -> Starlette:
    recording = write_recording(tmp_path, ablation_recording())
    return create_app(make_settings(attempts_per_minute=LIMIT, recording_path=recording))


@pytest.fixture
def make_learner(make_client: MakeClient) -> MakeClient:
    """make_learner() -> a new learner on the app; make_learner(other) on another app."""
    return make_client


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def state(client: TestClient) -> dict[str, Any]:
    data = client.get("/api/state").json()["state"]
    assert isinstance(data, dict)
    return data


def learner_id(client: TestClient) -> str:
    value = client.get("/api/state").json()["learner_id"]
    assert isinstance(value, str)
    return value


def write_back_dated(engine: Engine, learner: str, seconds_ago: float, count: int = 1) -> None:
    """Events written `seconds_ago` by the database's clock (as if by an earlier request)."""
    Store(engine).ensure_learner(learner)  # a learner who only read is not stored yet
    with engine.begin() as connection:
        now = connection.execute(select(func.now())).scalar_one()
        for _ in range(count):
            connection.execute(
                insert(EventRecord).values(
                    learner_id=learner,
                    kind=EventKind.TAKEAWAY_SAVED.value,
                    payload={"text": "earlier"},
                    created_at=now - timedelta(seconds=seconds_ago),
                )
            )


def assert_throttled(response: Any, *, json: bool) -> int:
    assert response.status_code == 429
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= WINDOW_S
    words = Throttled(LIMIT, retry_after).message
    if json:
        assert response.json()["ok"] is False
        assert response.json()["message"] == words
    else:
        assert words in BeautifulSoup(response.text, "html.parser").get_text(" ")
    return retry_after


# --- through the app -------------------------------------------------------------------------


def test_the_write_past_the_limit_is_refused_with_429_and_changes_nothing(
    make_learner: Callable[..., PageClient],
) -> None:
    learner = make_learner()
    assert learner.post("/predict", data={"choice": "residual"}).status_code == 303
    for attempt in range(LIMIT - 1):
        wrong = {"row1_mean": str(5 + attempt)}  # a different wrong mean each time
        assert learner.post("/numbers", data=wrong).status_code == 303, attempt
    assert state(learner)["fields"]["row1_mean"]["attempts"] == LIMIT - 1
    # The next one: refused beside the form (no JavaScript) and as JSON, nothing recorded.
    page = learner.post("/numbers", data={"row1_mean": "2"})
    assert_throttled(page, json=False)
    alert = BeautifulSoup(page.text, "html.parser").select_one("#numbers-alert")
    assert alert is not None and alert["role"] == "alert"
    answer = learner.post("/numbers", data={"row1_mean": "2"}, headers=JSON)
    assert_throttled(answer, json=True)
    assert "numbers" in answer.json()["fragments"]
    fields = state(learner)["fields"]["row1_mean"]
    assert fields["attempts"] == LIMIT - 1 and fields["landed"] is False
    # Reading is never limited.
    assert learner.get("/").status_code == 200


def test_format_errors_count_towards_the_limit(make_learner: Callable[..., PageClient]) -> None:
    """A check of only format errors still writes its event (no attempt on the page)."""
    learner = make_learner()
    learner.post("/predict", data={"choice": "residual"})
    for n in range(LIMIT - 1):
        assert learner.post("/numbers", data=format_error(n)).status_code == 303
    assert state(learner)["fields"]["row1_mean"]["attempts"] == 0
    assert_throttled(learner.post("/numbers", data=format_error(LIMIT), headers=JSON), json=True)


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/reading", {"choice": "smoothing"}),
        ("/takeaway", {"text": "Again."}),
        ("/rows/both/play", {}),
        ("/hints/1", {}),
        ("/rows/neither/predict", {"outcome": "chance"}),
    ],
)
def test_every_kind_of_write_is_limited(
    make_learner: Callable[..., PageClient], path: str, data: dict[str, str]
) -> None:
    learner = make_learner()
    learner.post("/predict", data={"choice": "residual"})
    for key, outcome in (("both", "learns"), ("residual_only", "partial")):
        learner.post(f"/rows/{key}/predict", data={"outcome": outcome})
    learner.post("/rows/layernorm_only/predict", data={"outcome": "chance"})
    # Four writes: the limit is reached, whatever comes next.
    assert_throttled(learner.post(path, data=data, headers=JSON), json=True)


def test_refusals_write_nothing_and_so_count_nothing(
    make_learner: Callable[..., PageClient],
) -> None:
    learner = make_learner()
    learner.post("/predict", data={"choice": "residual"})
    for _ in range(3 * LIMIT):
        assert learner.post("/numbers", data={"row1_mean": " "}).status_code == 422
        assert learner.post("/predict", data={"choice": "layer_norm"}).status_code == 409
    assert learner.post("/numbers", data={"row1_mean": "2"}).status_code == 303


def test_one_learner_at_the_limit_does_not_hold_up_another(
    make_learner: Callable[..., PageClient],
) -> None:
    hammer, other = make_learner(), make_learner()
    hammer.post("/predict", data={"choice": "residual"})
    for n in range(LIMIT - 1):
        hammer.post("/numbers", data=format_error(n))
    assert hammer.post("/numbers", data=format_error(LIMIT)).status_code == 429
    assert other.post("/predict", data={"choice": "residual"}).status_code == 303
    assert other.post("/numbers", data={"row1_mean": "2"}).status_code == 303


def test_the_count_is_shared_by_every_worker_on_the_database(
    make_settings: SettingsFactory,
    make_learner: Callable[..., PageClient],
    tmp_path: Path,
) -> None:
    """Two apps on one database stand for two worker processes: writes through one count in
    the other, because the count is read from the events table, not kept in memory."""
    settings = make_settings(attempts_per_minute=LIMIT)
    first, second = create_app(settings), create_app(settings)
    learner = make_learner(first)
    learner.post("/predict", data={"choice": "residual"})
    learner.post("/numbers", data=format_error(1))
    moved = make_learner(second)
    cookie = learner.cookies["normdive_learner"]
    moved.cookies.set("normdive_learner", cookie, domain="testserver.local")
    moved.post("/numbers", data=format_error(2))
    learner.post("/numbers", data=format_error(3))
    assert_throttled(moved.post("/numbers", data=format_error(4), headers=JSON), json=True)
    assert_throttled(learner.post("/numbers", data=format_error(5), headers=JSON), json=True)


def test_writes_older_than_the_window_do_not_count(
    make_learner: Callable[..., PageClient], engine: Engine
) -> None:
    learner = make_learner()
    write_back_dated(engine, learner_id(learner), WINDOW_S + 5, count=5 * LIMIT)
    learner.post("/predict", data={"choice": "residual"})
    for n in range(LIMIT - 1):
        assert learner.post("/numbers", data=format_error(n)).status_code == 303
    assert learner.post("/numbers", data=format_error(LIMIT)).status_code == 429


def test_retry_after_is_when_the_oldest_counted_write_leaves_the_window(
    make_learner: Callable[..., PageClient], engine: Engine
) -> None:
    learner = make_learner()
    write_back_dated(engine, learner_id(learner), 50, count=LIMIT - 1)
    learner.post("/predict", data={"choice": "residual"})
    retry_after = assert_throttled(
        learner.post("/numbers", data=format_error(0), headers=JSON), json=True
    )
    # The fourth newest write is 50 s old (SQLite's clock keeps whole seconds).
    assert 8 <= retry_after <= 12


def test_the_prerequisite_report_is_not_the_learners_write(
    make_settings: SettingsFactory, engine: Engine
) -> None:
    # Nor is the gate's closing, which goes with the learner's write that closes the gate.
    assert EventKind.PREREQUISITE_DONE.value not in COUNTED_KINDS
    not_theirs = {"prerequisite_done", "gate_closed"}
    assert set(COUNTED_KINDS) == {kind.value for kind in EventKind} - not_theirs
    with PageClient(create_app(make_settings(attempts_per_minute=1)), follow_redirects=False) as c:
        learner = learner_id(c)
        Store(engine).ensure_learner(learner)  # as the host's report stores them
        with engine.begin() as connection:
            for _ in range(3):
                connection.execute(
                    insert(EventRecord).values(
                        learner_id=learner, kind="prerequisite_done", payload={"source": "host"}
                    )
                )
        assert c.post("/predict", data={"choice": "residual"}).status_code == 303
        assert c.post("/takeaway", data={"text": "x"}).status_code == 429


# --- the function ----------------------------------------------------------------------------


def test_throttled_counts_only_the_learners_own_recent_writes(
    make_learner: Callable[..., PageClient], engine: Engine
) -> None:
    alice, bob = learner_id(make_learner()), learner_id(make_learner())
    assert throttled(engine, alice, 1) is None
    write_back_dated(engine, bob, 1, count=3)
    assert throttled(engine, alice, 1) is None
    limited = throttled(engine, bob, 3)
    assert limited is not None and limited.limit == 3
    assert WINDOW_S - 3 <= limited.retry_after_s <= WINDOW_S
    assert throttled(engine, bob, 4) is None


# --- the setting -----------------------------------------------------------------------------


def test_the_setting_has_a_default_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NORMDIVE_SECRET_KEY", SECRET_KEY)
    assert Settings().attempts_per_minute == DEFAULT_ATTEMPTS_PER_MINUTE == 30
    monkeypatch.setenv("NORMDIVE_ATTEMPTS_PER_MINUTE", "120")
    assert Settings().attempts_per_minute == 120
    for bad in ("0", "-3", "lots"):
        monkeypatch.setenv("NORMDIVE_ATTEMPTS_PER_MINUTE", bad)
        with pytest.raises(ValidationError):
            Settings()


@pytest.mark.parametrize(
    ("retry_after_s", "wait"),
    [(1, "Wait 1 second, then"), (2, "Wait 2 seconds, then"), (60, "Wait 60 seconds, then")],
)
def test_the_wait_is_written_in_the_singular_for_one_second(retry_after_s: int, wait: str) -> None:
    assert wait in Throttled(LIMIT, retry_after_s).message


def test_counts_of_one_are_written_in_the_singular() -> None:
    assert Throttled(1, 30).message.startswith("That is 1 answer within a minute")
    assert Throttled(2, 30).message.startswith("That is 2 answers within a minute")
    one = TooManyLearners(1, 30).message
    assert one.startswith("1 new learner started from your network")
    assert "Wait 1 minute, or go back" in one
    many = TooManyLearners(60, 61).message
    assert many.startswith("60 new learners started") and "Wait 2 minutes, or" in many
