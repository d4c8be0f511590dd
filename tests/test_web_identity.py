"""The learner cookie: signed, HttpOnly, SameSite=Lax, a year long; a bad one means a fresh
learner, never an error; one learner never sees another's events."""

from __future__ import annotations

from collections.abc import Callable
from http.cookies import SimpleCookie

import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient

from helpers import SettingsFactory
from normdive.config import Settings
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.store.tables import Learner
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import (
    COOKIE_MAX_AGE_S,
    COOKIE_NAME,
    cookie_value,
    learner_from_cookie,
    make_signer,
)
from tamper import altered_signature


def learner_of(client: TestClient) -> str:
    learner_id = client.get("/api/state").json()["learner_id"]
    assert isinstance(learner_id, str)
    return learner_id


def set_cookie_header(client: TestClient, path: str = "/") -> SimpleCookie:
    response = client.get(path)
    cookie: SimpleCookie = SimpleCookie()
    cookie.load(response.headers["set-cookie"])
    return cookie


def stored_learners(settings: Settings) -> int:
    engine = make_engine(settings.database_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(Learner)).scalar_one())
    finally:
        engine.dispose()


def is_stored(settings: Settings, learner_id: str) -> bool:
    engine = make_engine(settings.database_url)
    try:
        return Store(engine).learner_exists(learner_id)
    finally:
        engine.dispose()


def test_a_first_visit_mints_a_learner_and_a_signed_cookie(client: TestClient) -> None:
    cookie = set_cookie_header(client)[COOKIE_NAME]
    learner_id, _, signature = cookie.value.partition(".")
    assert len(learner_id) == 32 and int(learner_id, 16) >= 0
    assert signature
    assert cookie["httponly"] is True
    assert cookie["samesite"].lower() == "lax"
    assert cookie["path"] == "/"
    assert cookie["max-age"] == str(COOKIE_MAX_AGE_S) == str(365 * 24 * 3600)
    assert not cookie["secure"]


def test_the_cookie_is_secure_when_the_settings_say_so(make_settings: SettingsFactory) -> None:
    with TestClient(create_app(make_settings(cookie_secure=True))) as test_client:
        cookie = set_cookie_header(test_client)[COOKIE_NAME]
    assert cookie["secure"] is True


def test_the_same_cookie_is_the_same_learner(client: TestClient) -> None:
    first = learner_of(client)
    assert learner_of(client) == first
    assert client.get("/").status_code == 200
    assert learner_of(client) == first


@pytest.mark.parametrize(
    "tamper",
    [
        altered_signature,
        lambda value: ("0" if value.startswith("f") else "f") + value[1:],  # the id, same signature
        lambda value: value.partition(".")[0],  # no signature at all
        lambda value: "garbage",
        lambda value: "",
    ],
    ids=["signature", "id", "unsigned", "garbage", "empty"],
)
def test_a_tampered_cookie_gets_a_fresh_learner_not_an_error(
    client: TestClient, tamper: Callable[[str], str]
) -> None:
    original = learner_of(client)
    client.post("/predict", data={"choice": "residual"})
    value = client.cookies[COOKIE_NAME]
    client.cookies.clear()
    client.cookies.set(COOKIE_NAME, tamper(value))
    response = client.get("/")
    assert response.status_code == 200
    fresh = learner_of(client)
    assert fresh != original
    assert client.get("/api/state").json()["state"]["prediction"] is None


def test_a_validly_signed_id_the_store_does_not_know_is_that_learner_stored_on_first_write(
    client: TestClient, make_settings: SettingsFactory
) -> None:
    # Only this server signs ids, and it signs them before storing them (on the first write).
    settings = make_settings()
    unknown = "0123456789abcdef" * 2
    client.cookies.set(COOKIE_NAME, cookie_value(unknown, make_signer(settings)))
    assert learner_of(client) == unknown
    assert not is_stored(settings, unknown)
    assert client.post("/predict", data={"choice": "residual"}).status_code == 303
    assert is_stored(settings, unknown)
    assert learner_of(client) == unknown
    assert client.get("/api/state").json()["state"]["prediction"] == "residual"


def test_reading_without_a_cookie_stores_nothing_but_signs_an_id(
    make_client: Callable[[], TestClient], settings: Settings
) -> None:
    for path in ("/", "/api/state", "/depths/panel", "/healthz"):
        visitor = make_client()
        response = visitor.get(path)
        assert response.status_code in (200, 409, 503), path
        if path != "/healthz":
            assert (
                learner_from_cookie(visitor.cookies[COOKIE_NAME], make_signer(settings)) is not None
            ), path
    assert stored_learners(settings) == 0


def test_the_first_write_stores_the_learner_once(client: TestClient, settings: Settings) -> None:
    learner_id = learner_of(client)
    client.post("/predict", data={"choice": "residual"})
    client.post("/numbers", data={"row1_mean": "2"})
    assert stored_learners(settings) == 1
    assert is_stored(settings, learner_id)


def test_a_refused_first_write_stores_no_learner(
    make_client: Callable[[], TestClient], settings: Settings
) -> None:
    # A bare client: a cookie from a read, but no form token, so the write is refused.
    visitor = make_client()
    visitor.get("/")
    refused = visitor.post("/predict", data={"choice": "residual"}, headers={"X-CSRF-Token": "x"})
    assert refused.status_code == 403
    assert stored_learners(settings) == 0


def test_a_cookie_signed_with_another_key_is_not_trusted(make_settings: SettingsFactory) -> None:
    ours = make_signer(make_settings())
    theirs = make_signer(make_settings(secret_key="another-secret-key-" + "x" * 32))
    value = cookie_value("ab" * 16, theirs)
    assert learner_from_cookie(value, theirs) == "ab" * 16
    assert learner_from_cookie(value, ours) is None


def test_two_learners_are_isolated(make_client: Callable[[], TestClient]) -> None:
    alice, bob = make_client(), make_client()
    assert learner_of(alice) != learner_of(bob)
    alice.post("/predict", data={"choice": "residual"})
    alice.post("/numbers", data={"row1_mean": "2"})
    alice.post("/takeaway", data={"text": "Alice's own words"})
    bob_state = bob.get("/api/state").json()["state"]
    assert bob_state["prediction"] is None
    assert bob_state["fields"]["row1_mean"]["attempts"] == 0
    assert bob_state["takeaway"] is None
    assert "Alice's own words" not in bob.get("/").text
    # Bob acting does not touch Alice either.
    bob.post("/predict", data={"choice": "layer_norm"})
    assert alice.get("/api/state").json()["state"]["prediction"] == "residual"


def test_a_new_tab_of_the_same_learner_sees_the_same_state(
    client: TestClient, make_client: Callable[[], TestClient]
) -> None:
    client.post("/predict", data={"choice": "layer_norm"})
    client.post("/numbers", data={"row1_mean": "2", "row1_variance": "1"})
    other_tab = make_client()
    other_tab.cookies.set(COOKIE_NAME, client.cookies[COOKIE_NAME])
    assert other_tab.get("/api/state").json() == client.get("/api/state").json()
    assert other_tab.get("/").text == client.get("/").text
