"""Request bodies are capped at MAX_BODY_BYTES on every route that reads one: a readable 413,
whether the size is declared (Content-Length) or only found while reading (chunked, no
Content-Length), and nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from starlette.applications import Starlette

from helpers import HOST_TOKEN, SettingsFactory, ablation_recording, write_recording
from normdive.web.app import create_app
from normdive.web.security.limits import MAX_BODY_BYTES, TOO_LARGE
from page_client import PageClient

JSON = {"Accept": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
POSTS = [
    "/predict",
    "/numbers",
    "/reading",
    "/takeaway",
    "/rows/both/predict",
    "/rows/both/play",
    "/hints/1",
    "/api/prerequisite",
]


@pytest.fixture
def app(make_settings: SettingsFactory, tmp_path: Path) -> Starlette:
    return create_app(make_settings(recording_path=write_recording(tmp_path, ablation_recording())))


@pytest.fixture
def learner(app: Starlette) -> Iterator[PageClient]:
    with PageClient(app, follow_redirects=False) as client:
        assert client.post("/predict", data={"choice": "residual"}).status_code == 303
        yield client


def history(client: PageClient) -> object:
    return client.get("/api/state").json()["state"]


def chunks(total: int, size: int = 4096) -> Iterator[bytes]:
    """A body sent in pieces without a Content-Length (chunked transfer encoding)."""
    yield b"text="
    sent = 5
    while sent < total:
        piece = min(size, total - sent)
        yield b"y" * piece
        sent += piece


def headers_for(path: str) -> dict[str, str]:
    if path == "/api/prerequisite":
        return {"Authorization": f"Bearer {HOST_TOKEN}", "Content-Type": "application/json"}
    return FORM


@pytest.mark.parametrize("path", POSTS)
def test_a_declared_oversized_body_is_a_readable_413(learner: PageClient, path: str) -> None:
    before = history(learner)
    body = b"text=" + b"x" * MAX_BODY_BYTES
    answer = learner.post(path, content=body, headers={**headers_for(path), **JSON})
    assert answer.status_code == 413
    assert answer.headers["connection"] == "close"  # what is left of the body goes unread
    assert answer.json() == {"ok": False, "message": TOO_LARGE}
    if path != "/api/prerequisite":  # the API answers JSON whatever is asked
        page = learner.post(path, content=body, headers=headers_for(path))
        assert page.status_code == 413
        assert TOO_LARGE in BeautifulSoup(page.text, "html.parser").get_text(" ")
    assert history(learner) == before


@pytest.mark.parametrize("path", POSTS)
def test_a_chunked_oversized_body_is_a_readable_413(learner: PageClient, path: str) -> None:
    before = history(learner)
    answer = learner.post(
        path,
        content=chunks(MAX_BODY_BYTES + 1),
        headers={**headers_for(path), **JSON},
    )
    assert "content-length" not in answer.request.headers
    assert answer.request.headers["transfer-encoding"] == "chunked"
    assert answer.status_code == 413
    assert answer.headers["connection"] == "close"
    assert answer.json() == {"ok": False, "message": TOO_LARGE}
    assert history(learner) == before


def test_a_lying_content_length_does_not_get_past_the_limit(learner: PageClient) -> None:
    """A small declared length with a large body: the bytes are counted as they arrive."""
    body = b"text=" + b"z" * (2 * MAX_BODY_BYTES)
    answer = learner.post(
        "/takeaway", content=body, headers={**FORM, **JSON, "Content-Length": "10"}
    )
    assert answer.request.headers["content-length"] == "10"
    assert answer.status_code == 413
    assert answer.json() == {"ok": False, "message": TOO_LARGE}
    assert "zzzz" not in str(history(learner))


def test_a_body_at_the_limit_is_read_and_judged_on_its_content(learner: PageClient) -> None:
    body = b"text=" + b"w" * (MAX_BODY_BYTES - 5)
    assert len(body) == MAX_BODY_BYTES
    answer = learner.post("/takeaway", content=body, headers={**FORM, **JSON})
    assert answer.status_code == 422  # read in full: only its length is refused, by the lesson
    assert "limit is 2,000" in answer.json()["message"]
    streamed = learner.post("/takeaway", content=chunks(MAX_BODY_BYTES), headers={**FORM, **JSON})
    assert streamed.status_code == 422
