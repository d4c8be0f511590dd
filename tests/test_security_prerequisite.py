"""The host platform's prerequisite report (POST /api/prerequisite) takes its bearer token and
nothing else: not a learner's cookie or form token, not the token anywhere but the
Authorization header; and a refused report says nothing about which learners exist."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from helpers import HOST_TOKEN, SECRET_KEY, SettingsFactory
from normdive.web.app import create_app
from normdive.web.security import csrf

AUTH = {"Authorization": f"Bearer {HOST_TOKEN}"}
UNKNOWN = "ab" * 16


@pytest.fixture
def locked(make_settings: SettingsFactory) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(dev_prerequisite_done=False))) as client:
        yield client


def learner(client: TestClient) -> tuple[str, str]:
    state = client.get("/api/state").json()
    return state["learner_id"], state["csrf_token"]


def done(client: TestClient) -> bool:
    return bool(client.get("/api/state").json()["state"]["prerequisite_done"])


@pytest.mark.parametrize(
    ("where", "request_kwargs"),
    [
        ("query", {"params": {"token": HOST_TOKEN, "access_token": HOST_TOKEN}}),
        ("cookie", {"cookies": {"Authorization": f"Bearer {HOST_TOKEN}"}}),
        ("other header", {"headers": {"X-Host-Token": HOST_TOKEN}}),
        ("basic", {"headers": {"Authorization": f"Basic {HOST_TOKEN}"}}),
        ("prefix", {"headers": {"Authorization": f"Bearer {HOST_TOKEN[:-1]}"}}),
        ("case", {"headers": {"Authorization": f"Bearer {HOST_TOKEN.upper()}"}}),
        ("secret key", {"headers": {"Authorization": f"Bearer {SECRET_KEY}"}}),
    ],
)
def test_the_token_counts_only_as_a_bearer_authorization_header(
    locked: TestClient, where: str, request_kwargs: dict[str, object]
) -> None:
    learner_id, _ = learner(locked)
    if "cookies" in request_kwargs:
        locked.cookies.set("Authorization", f"Bearer {HOST_TOKEN}")
        request_kwargs = {}
    answer = locked.post("/api/prerequisite", json={"learner_id": learner_id}, **request_kwargs)  # type: ignore[arg-type]
    assert answer.status_code == 401, where
    assert answer.headers["www-authenticate"] == "Bearer"
    assert "token" in answer.json()["message"]
    assert not done(locked)


def test_a_learner_s_cookie_and_form_token_do_not_authenticate(locked: TestClient) -> None:
    learner_id, token = learner(locked)
    for headers in (
        {csrf.HEADER: token},
        {"Authorization": f"Bearer {token}"},
        {"Authorization": f"Bearer {locked.cookies['normdive_learner']}"},
    ):
        answer = locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=headers)
        assert answer.status_code == 401
    assert not done(locked)


def test_a_refused_report_does_not_say_whether_the_learner_exists(locked: TestClient) -> None:
    learner_id, _ = learner(locked)
    wrong = {"Authorization": "Bearer wrong"}
    known = locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=wrong)
    unknown = locked.post("/api/prerequisite", json={"learner_id": UNKNOWN}, headers=wrong)
    assert known.status_code == unknown.status_code == 401
    assert known.json() == unknown.json()
    # With the token, a learner not stored yet is stored (they may not have written yet).
    assert (
        locked.post("/api/prerequisite", json={"learner_id": UNKNOWN}, headers=AUTH).status_code
        == 200
    )


def test_the_report_needs_no_form_token_and_ignores_the_origin(locked: TestClient) -> None:
    """Server to server: no cookie, no form token; an Origin header proves nothing either way."""
    learner_id, _ = learner(locked)
    with TestClient(locked.app) as host:
        answer = host.post(
            "/api/prerequisite",
            json={"learner_id": learner_id},
            headers={**AUTH, "Origin": "https://host.example"},
        )
    assert answer.status_code == 200 and answer.json()["ok"] is True
    assert done(locked)


def test_a_learner_cannot_open_the_lesson_by_posting_the_report_themselves(
    locked: TestClient,
) -> None:
    learner_id, token = learner(locked)
    answer = locked.post(
        "/api/prerequisite",
        json={"learner_id": learner_id},
        headers={csrf.HEADER: token, "Origin": "http://testserver"},
    )
    assert answer.status_code == 401
    assert (
        locked.post("/predict", data={"choice": "residual", "csrf_token": token}).status_code == 409
    )
    assert not done(locked)
