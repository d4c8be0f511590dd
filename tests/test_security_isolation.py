"""Learner isolation: guessing, forging, replaying or mixing cookies and tokens never reads or
writes another learner's events. Alice does the lesson; Mallory tries every trick on her."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from itsdangerous import Signer
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import (
    SECRET_KEY,
    SettingsFactory,
    ablation_recording,
    client_factory,
    write_recording,
)
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME, SIGNER_SALT, cookie_value, make_signer
from normdive.web.security import csrf
from page_client import PageClient
from tamper import altered_signature

JSON = {"Accept": "application/json"}
ALICE_WORDS = "Alice's own takeaway"
PREDICTIONS = {"both": "learns", "residual_only": "partial", "layernorm_only": "chance"}


@pytest.fixture
def app(make_settings: SettingsFactory, tmp_path: Path) -> Starlette:
    return create_app(make_settings(recording_path=write_recording(tmp_path, ablation_recording())))


@pytest.fixture
def make_client(app: Starlette) -> Iterator[Callable[..., TestClient]]:
    """Bare clients (nothing adds a form token for them); make_client(kind=PageClient) posts
    with the token as the page does."""
    with client_factory(app, TestClient) as make:
        yield make


@pytest.fixture
def alice(make_client: Callable[..., TestClient]) -> TestClient:
    """A learner well into the lesson: a prediction, numbers, a reading, rows, a takeaway."""
    client = make_client(kind=PageClient)
    for path, data in [
        ("/predict", {"choice": "residual"}),
        ("/numbers", {"row1_mean": "2", "row1_variance": "5"}),
        ("/reading", {"choice": "smoothing"}),
        ("/takeaway", {"text": ALICE_WORDS}),
        *((f"/rows/{key}/predict", {"outcome": outcome}) for key, outcome in PREDICTIONS.items()),
    ]:
        assert client.post(path, data=data).status_code == 303, path
    return client


def state_of(client: TestClient) -> dict[str, object]:
    data = client.get("/api/state").json()
    assert isinstance(data, dict)
    return data


def alice_snapshot(alice: TestClient) -> dict[str, object]:
    return state_of(alice)


def mallory_token(client: TestClient) -> str:
    token = client.get("/api/state").json()["csrf_token"]
    assert isinstance(token, str)
    return token


def assert_untouched(alice: TestClient, before: dict[str, object]) -> None:
    after = state_of(alice)
    assert (after["learner_id"], after["state"]) == (before["learner_id"], before["state"])


def test_a_stranger_never_sees_alice(
    alice: TestClient, make_client: Callable[..., TestClient]
) -> None:
    mallory = make_client()
    seen = state_of(mallory)
    assert seen["learner_id"] != state_of(alice)["learner_id"]
    page = mallory.get("/").text
    assert ALICE_WORDS not in page
    assert "curve-svg" not in mallory.get("/?play=both").text  # Mallory never played


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda alice_id, alice_cookie: alice_id, id="unsigned-id"),
        pytest.param(lambda alice_id, alice_cookie: f"{alice_id}.", id="empty-signature"),
        pytest.param(
            lambda alice_id, alice_cookie: altered_signature(alice_cookie), id="forged-signature"
        ),
        pytest.param(
            lambda alice_id, alice_cookie: (
                Signer("a guessed key" * 3, salt=SIGNER_SALT).sign(alice_id).decode()
            ),
            id="signed-with-a-guessed-key",
        ),
        pytest.param(
            lambda alice_id, alice_cookie: (
                Signer(SECRET_KEY, salt="another purpose").sign(alice_id).decode()
            ),
            id="signed-for-another-purpose",
        ),
        pytest.param(lambda alice_id, alice_cookie: alice_cookie.upper(), id="case-changed"),
        pytest.param(
            lambda alice_id, alice_cookie: alice_cookie.partition(".")[2], id="signature-only"
        ),
    ],
)
def test_a_forged_cookie_for_alice_gets_a_fresh_learner_and_never_her_events(
    alice: TestClient,
    make_client: Callable[..., TestClient],
    forge: Callable[[str, str], str],
) -> None:
    before = alice_snapshot(alice)
    alice_id = str(before["learner_id"])
    forged = forge(alice_id, alice.cookies[COOKIE_NAME])
    mallory = make_client()
    mallory.cookies.set(COOKIE_NAME, forged, domain="testserver.local")
    seen = mallory.get("/api/state").json()
    assert seen["learner_id"] != alice_id
    assert seen["state"]["takeaway"] is None
    assert ALICE_WORDS not in mallory.get("/").text
    # Posting with the forged cookie and Alice's real token (say it leaked) changes nothing of
    # hers: the cookie names nobody, so the token fits nobody.
    mallory.cookies.clear()
    mallory.cookies.set(COOKIE_NAME, forged, domain="testserver.local")
    answer = mallory.post(
        "/takeaway",
        data={"text": "Mallory was here"},
        headers={**JSON, csrf.HEADER: str(before["csrf_token"])},
    )
    assert answer.status_code == 403
    assert_untouched(alice, before)


def test_alice_s_replayed_cookie_with_mallory_s_token_is_refused(
    alice: TestClient, make_client: Callable[..., TestClient]
) -> None:
    before = alice_snapshot(alice)
    mallory = make_client()
    token = mallory_token(mallory)
    replay = make_client()
    replay.cookies.set(COOKIE_NAME, alice.cookies[COOKIE_NAME], domain="testserver.local")
    for path, data in [
        ("/takeaway", {"text": "Mallory was here"}),
        ("/numbers", {"row1_mean": "2"}),
        ("/rows/neither/predict", {"outcome": "learns"}),
        ("/hints/1", {}),
    ]:
        answer = replay.post(path, data={**data, "csrf_token": token}, headers=JSON)
        assert answer.status_code == 403, path
        assert answer.json()["message"] == csrf.WRONG_TOKEN
    assert_untouched(alice, before)


def test_mallory_s_cookie_with_alice_s_token_writes_only_to_mallory(
    alice: TestClient, make_client: Callable[..., TestClient]
) -> None:
    before = alice_snapshot(alice)
    mallory = make_client()
    mallory_token(mallory)
    answer = mallory.post(
        "/predict",
        data={"choice": "layer_norm"},
        headers={**JSON, csrf.HEADER: str(before["csrf_token"])},
    )
    assert answer.status_code == 403
    assert state_of(mallory)["state"]["prediction"] is None  # type: ignore[index]
    assert_untouched(alice, before)


def test_naming_alice_in_a_form_or_query_does_nothing(
    alice: TestClient, make_client: Callable[..., TestClient]
) -> None:
    before = alice_snapshot(alice)
    alice_id = str(before["learner_id"])
    mallory = make_client(kind=PageClient)
    for field in ("learner_id", "learner", COOKIE_NAME):
        answer = mallory.post(
            f"/takeaway?{field}={alice_id}", data={"text": "Mallory was here", field: alice_id}
        )
        assert answer.status_code == 303
    assert state_of(mallory)["state"]["takeaway"] == "Mallory was here"  # type: ignore[index]
    assert ALICE_WORDS not in mallory.get(f"/?learner_id={alice_id}").text
    assert_untouched(alice, before)


def test_a_guessed_id_cannot_be_signed_without_the_key(
    alice: TestClient, make_client: Callable[..., TestClient], make_settings: SettingsFactory
) -> None:
    """Only the secret key signs: a cookie for an id the server never issued, signed with the
    real key (as a leak of the key would allow), is that id's own empty history (an id is
    stored only by its first write, so a signed id need not be stored), never Alice."""
    before = alice_snapshot(alice)
    mallory = make_client()
    unissued = "0123456789abcdef" * 2
    signed = cookie_value(unissued, make_signer(make_settings()))
    mallory.cookies.set(COOKIE_NAME, signed, domain="testserver.local")
    seen = state_of(mallory)
    assert seen["learner_id"] != before["learner_id"]
    assert seen["state"]["prediction"] is None  # type: ignore[index]
    assert_untouched(alice, before)


def test_alice_s_curves_are_hers_alone(
    alice: TestClient, make_client: Callable[..., TestClient]
) -> None:
    assert alice.post("/rows/neither/predict", data={"outcome": "chance"}).status_code == 303
    assert alice.post("/rows/both/play").status_code == 303
    assert 'data-player-row="both"' in alice.get("/?play=both").text
    mallory = make_client()
    shown = mallory.get("/?play=both").text
    assert "data-player-row" not in shown and "curve-svg" not in shown
