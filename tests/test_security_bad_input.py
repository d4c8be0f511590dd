"""Bad input gets a readable 4xx, never a 500, and nothing is stored: JSON nested past the
parser's depth, a body that is not a form on a form route. Every answer carries the security
headers, an unexpected error's 500 included; every answer naming a learner is `no-store`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.testclient import TestClient

from helpers import HOST_TOKEN, SettingsFactory, ablation_recording, write_recording
from normdive.progress.actions import NO_TAKEAWAY_TEXT
from normdive.web.app import create_app
from normdive.web.security.headers import CONTENT_SECURITY_POLICY

JSON = {"Accept": "application/json"}
AUTH = {"Authorization": f"Bearer {HOST_TOKEN}"}
# Every form post of the page, with a body that would succeed for a learner who committed.
FORM_POSTS = [
    ("/predict", {"choice": "residual"}),
    ("/numbers", {"row1_mean": "2"}),
    ("/reading", {"choice": "keeps_finite"}),
    ("/takeaway", {"text": "Mine."}),
    ("/rows/both/predict", {"outcome": "learns"}),
    ("/rows/both/play", {}),
    ("/hints/1", {}),
]
PATHS = [path for path, _ in FORM_POSTS]


@pytest.fixture
def app(make_settings: SettingsFactory, tmp_path: Path) -> Starlette:
    recording = write_recording(tmp_path, ablation_recording())
    return create_app(make_settings(recording_path=recording))


def assert_security_headers(headers: object) -> None:
    assert isinstance(headers, dict) or hasattr(headers, "get")
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY  # type: ignore[index]
    assert headers["x-content-type-options"] == "nosniff"  # type: ignore[index]
    assert headers["referrer-policy"] == "same-origin"  # type: ignore[index]
    assert headers["x-frame-options"] == "DENY"  # type: ignore[index]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_json_to_the_report_is_a_readable_422(client: TestClient, depth: int) -> None:
    learner_id = client.get("/api/state").json()["learner_id"]
    body = "[" * depth + "]" * depth
    response = client.post(
        "/api/prerequisite",
        content=body.encode(),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert response.status_code in (413, 422)
    assert response.json()["ok"] is False
    assert "learner_id" in response.json()["message"] or "too large" in response.json()["message"]
    assert_security_headers(response.headers)
    nested_in_object = '{"learner_id": ' + "[" * 1_000 + "]" * 1_000 + "}"
    response = client.post("/api/prerequisite", content=nested_in_object.encode(), headers=AUTH)
    assert response.status_code == 422
    assert client.get("/api/state").json()["learner_id"] == learner_id


# Python converts at most 4,300 digits between int and str (sys.get_int_max_str_digits), and
# json raises ValueError past it: as the learner id, as a member beside it, as the whole body.
HUGE_NUMBER = "9" * 5_000
HUGE_NUMBER_BODIES = [
    '{"learner_id": ' + HUGE_NUMBER + "}",
    '{"learner_id": "' + "a" * 32 + '", "n": -' + HUGE_NUMBER + "}",
    HUGE_NUMBER,
]


@pytest.mark.parametrize("body", HUGE_NUMBER_BODIES, ids=["as the id", "beside it", "alone"])
def test_a_number_of_more_digits_than_python_converts_is_a_readable_422(
    client: TestClient, body: str
) -> None:
    learner_id = client.get("/api/state").json()["learner_id"]
    response = client.post(
        "/api/prerequisite",
        content=body.encode(),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["ok"] is False
    assert "learner_id" in response.json()["message"]
    assert_security_headers(response.headers)
    assert client.get("/api/state").json()["learner_id"] == learner_id


@pytest.mark.parametrize("length", ["9" * 5_000, "0" * 4_999 + "1"])
def test_a_content_length_of_thousands_of_digits_is_a_readable_4xx(
    client: TestClient, length: str
) -> None:
    response = client.post(
        "/numbers", content=b"row1_mean=2", headers={**JSON, "Content-Length": length}
    )
    assert 400 <= response.status_code < 500


def test_an_unexpected_error_s_500_carries_the_security_headers(app: Starlette) -> None:
    async def broken(_request: Request) -> None:
        raise RuntimeError("a bug")

    app.add_route("/broken-for-this-test", broken)
    with TestClient(app, raise_server_exceptions=False) as client:
        for headers in ({}, JSON):
            response = client.get("/broken-for-this-test", headers=headers)
            assert response.status_code == 500
            assert "a bug" not in response.text
            assert_security_headers(response.headers)


NOT_FORMS = [
    ("application/json", json.dumps({"text": "Mine."})),
    ("text/plain", "text=Mine."),
    ("application/xml", "<text>Mine.</text>"),
    (None, "text=Mine."),
]


@pytest.fixture
def committed(client: TestClient) -> TestClient:
    """A learner who committed and saved a takeaway."""
    client.post("/predict", data={"choice": "residual"})
    client.post("/takeaway", data={"text": "Kept."})
    return client


def post_not_a_form(client: TestClient, path: str, content_type: str | None, body: str) -> None:
    before = client.get("/api/state").json()["state"]
    headers = {**JSON, **({"Content-Type": content_type} if content_type else {})}
    response = client.post(path, content=body.encode(), headers=headers)
    assert response.status_code == 415
    message = response.json()["message"]
    assert "application/x-www-form-urlencoded" in message and "nothing was saved" in message
    assert client.get("/api/state").json()["state"] == before


@pytest.mark.parametrize(("path", "data"), FORM_POSTS, ids=PATHS)
def test_a_json_body_on_any_form_route_is_415_and_stores_nothing(
    committed: TestClient, path: str, data: dict[str, str]
) -> None:
    post_not_a_form(committed, path, "application/json", json.dumps(data))


@pytest.mark.parametrize(("content_type", "body"), NOT_FORMS, ids=["json", "text", "xml", "none"])
def test_a_takeaway_sent_as_anything_but_a_form_keeps_the_saved_one(
    committed: TestClient, content_type: str | None, body: str
) -> None:
    post_not_a_form(committed, "/takeaway", content_type, body)
    assert committed.get("/api/state").json()["state"]["takeaway"] == "Kept."


@pytest.mark.parametrize(
    ("content_type", "body"),
    [(None, ""), ("application/x-www-form-urlencoded", '{"text": "x"}')],
    ids=["empty-body", "form-without-a-text-field"],
)
def test_a_takeaway_save_without_its_text_field_keeps_the_saved_one(
    committed: TestClient, content_type: str | None, body: str
) -> None:
    headers = {**JSON, **({"Content-Type": content_type} if content_type else {})}
    answer = committed.post("/takeaway", content=body.encode(), headers=headers)
    assert answer.status_code == 422
    assert answer.json()["message"] == NO_TAKEAWAY_TEXT
    assert committed.get("/api/state").json()["state"]["takeaway"] == "Kept."


@pytest.mark.parametrize("length", [2_001, 30_000, 60_000])
def test_a_takeaway_far_too_long_is_refused_with_its_real_length(
    committed: TestClient, length: int
) -> None:
    answer = committed.post("/takeaway", data={"text": "x" * length}, headers=JSON)
    assert answer.status_code == 422
    assert answer.json()["message"].startswith(f"Too long to save: {length:,} characters")
    assert committed.get("/api/state").json()["state"]["takeaway"] == "Kept."


def test_a_number_field_as_long_as_a_body_may_be_is_one_unreadable_answer(
    committed: TestClient,
) -> None:
    answer = committed.post("/numbers", data={"row1_mean": "9" * 60_000}, headers=JSON)
    assert answer.status_code == 200
    field = committed.get("/api/state").json()["state"]["fields"]["row1_mean"]
    assert field["landed"] is False


def test_a_form_with_no_fields_and_no_content_type_is_still_a_form(
    make_client: Callable[[], TestClient],
) -> None:
    learner = make_client()
    learner.post("/predict", data={"choice": "residual"})
    learner.post("/rows/both/predict", data={"outcome": "learns"})
    # Nothing to send: no body, no Content-Type. Refused by the lesson (409), not as a format.
    answer = learner.post("/rows/both/play", headers=JSON)
    assert answer.status_code != 415


def test_multipart_forms_are_forms(client: TestClient) -> None:
    answer = client.post("/predict", files={"choice": (None, "residual")}, headers=JSON)
    assert answer.status_code == 200
    assert client.get("/api/state").json()["state"]["prediction"] == "residual"


def test_answers_naming_a_learner_are_not_stored_by_caches(client: TestClient) -> None:
    answers = {
        "page": client.get("/"),
        "state": client.get("/api/state"),
        "json action": client.post("/predict", data={"choice": "residual"}, headers=JSON),
        "redirect": client.post("/takeaway", data={"text": "x"}, follow_redirects=False),
    }
    for name, answer in answers.items():
        assert answer.headers["cache-control"] == "no-store", name
        assert "set-cookie" in answer.headers, name
    # Static assets stay cacheable: they name nobody.
    assert client.get("/static/page.js").headers["cache-control"] != "no-store"
