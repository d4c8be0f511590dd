"""POST /api/prerequisite: the host platform reports that a learner finished 8.5."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from helpers import HOST_TOKEN, SettingsFactory
from normdive.web.app import create_app

AUTH = {"Authorization": f"Bearer {HOST_TOKEN}"}


@pytest.fixture
def locked(make_settings: SettingsFactory) -> Iterator[TestClient]:
    """8.5 is not treated as done here: only a report opens the lesson."""
    with TestClient(create_app(make_settings(dev_prerequisite_done=False))) as test_client:
        yield test_client


def learner_of(client: TestClient) -> str:
    learner_id = client.get("/api/state").json()["learner_id"]
    assert isinstance(learner_id, str)
    return learner_id


def test_a_report_with_the_token_opens_the_lesson(locked: TestClient) -> None:
    learner_id = learner_of(locked)
    assert "Waiting for 8.5" in locked.get("/").text
    response = locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "message": f"Recorded: 8.5 is done for {learner_id}.",
        "already_done": False,
    }
    page = locked.get("/").text
    assert "Waiting for 8.5" not in page and 'id="predict"' in page
    state = locked.get("/api/state").json()["state"]
    assert state["prerequisite_done"] is True
    assert state["prerequisite_by_dev_setting"] is False


def test_a_second_report_is_fine_and_says_so(locked: TestClient) -> None:
    learner_id = learner_of(locked)
    locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=AUTH)
    again = locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=AUTH)
    assert again.status_code == 200
    assert again.json()["already_done"] is True


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {HOST_TOKEN}"},
        {"Authorization": "Bearer "},
        {"Authorization": f"Bearer {HOST_TOKEN}x"},
        {"Authorization": "Bearer tökén".encode("latin-1")},  # type: ignore[dict-item]
    ],
    ids=["none", "wrong", "not-bearer", "empty", "longer", "non-ascii"],
)
def test_a_missing_or_wrong_token_is_401_and_changes_nothing(
    locked: TestClient, headers: dict[str, str | bytes]
) -> None:
    learner_id = learner_of(locked)
    response = locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["ok"] is False and response.json()["message"]
    assert locked.get("/api/state").json()["state"]["prerequisite_done"] is False


def test_without_a_host_token_every_report_is_refused(make_settings: SettingsFactory) -> None:
    app = create_app(make_settings(host_token=None, dev_prerequisite_done=False))
    with TestClient(app) as test_client:
        learner_id = learner_of(test_client)
        for headers in ({}, AUTH, {"Authorization": "Bearer "}):
            response = test_client.post(
                "/api/prerequisite", json={"learner_id": learner_id}, headers=headers
            )
            assert response.status_code == 503
            assert "no host token" in response.json()["message"]
        assert test_client.get("/api/state").json()["state"]["prerequisite_done"] is False


def test_a_learner_who_only_opened_the_locked_page_is_stored_by_the_report(
    locked: TestClient,
) -> None:
    # Opening the locked page stores nothing; the host reports the id the page shows.
    learner_id = learner_of(locked)
    response = locked.post("/api/prerequisite", json={"learner_id": learner_id}, headers=AUTH)
    assert response.status_code == 200
    assert response.json()["already_done"] is False
    assert locked.get("/api/state").json()["state"]["prerequisite_done"] is True


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'{"learner": "x"}',
        b'{"learner_id": 12}',
        b'{"learner_id": "ABCDEF0123456789ABCDEF0123456789"}',
        b'{"learner_id": "short"}',
        b"\xff\xfe",
    ],
)
def test_a_malformed_report_is_422(locked: TestClient, body: bytes) -> None:
    response = locked.post(
        "/api/prerequisite",
        content=body,
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert "learner_id" in response.json()["message"]


def test_the_prerequisite_endpoint_only_accepts_post(locked: TestClient) -> None:
    response = locked.get("/api/prerequisite")
    assert response.status_code == 405
    assert response.json()["ok"] is False
