"""The refusals a learner can meet before any lesson logic (a request from another site, a
missing form token, too many writes, a request too large, an address with nothing there)
read in the learner's language, as every other sentence of the page does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from helpers import SettingsFactory, ablation_recording, write_recording
from normdive.web.app import create_app
from page_client import PageClient

JSON = {"Accept": "application/json"}
GERMAN = {**JSON, "Accept-Language": "de"}
ARABIC = {**JSON, "Accept-Language": "ar"}


@pytest.fixture
def client(make_settings: SettingsFactory, tmp_path: Path) -> Iterator[PageClient]:
    recording = write_recording(tmp_path, ablation_recording())
    app = create_app(make_settings(recording_path=recording, attempts_per_minute=1))
    with PageClient(app) as client:
        yield client


def _said(answer: object) -> str:
    return str(answer.json()["message"])  # type: ignore[attr-defined]


def test_a_refusal_for_a_missing_form_token_is_german(client: PageClient) -> None:
    client.get("/")
    bare = TestClient(client.app, cookies=client.cookies)
    answer = bare.post("/predict", data={"choice": "residual"}, headers=GERMAN)
    assert answer.status_code == 403
    assert _said(answer).startswith("Dieser Anfrage fehlt das Formular-Token")


def test_a_request_from_another_site_is_refused_in_arabic(client: PageClient) -> None:
    answer = client.post(
        "/predict",
        data={"choice": "residual"},
        headers={**ARABIC, "Origin": "https://evil.example"},
    )
    assert answer.status_code == 403
    assert _said(answer).startswith("جاء هذا الطلب من موقع آخر (https://evil.example)")


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        (GERMAN, "Das sind 1 Antwort innerhalb einer Minute"),
        (ARABIC, "هذه إجابة واحدة في دقيقة واحدة"),
    ],
)
def test_the_write_limit_is_said_in_the_learners_language(
    client: PageClient, headers: dict[str, str], words: str
) -> None:
    assert client.post("/predict", data={"choice": "residual"}, headers=headers).status_code == 200
    answer = client.post("/reading", data={"choice": "x"}, headers=headers)
    assert answer.status_code == 429
    assert _said(answer).startswith(words)


def test_a_body_too_large_is_refused_in_german_before_the_app_reads_it(
    client: PageClient,
) -> None:
    answer = client.post("/takeaway", content=b"text=" + b"x" * 70_000, headers=GERMAN)
    assert answer.status_code == 413
    assert _said(answer) == (
        "Diese Anfrage ist zu groß, um angenommen zu werden. Nichts wurde gespeichert."
    )


def test_an_address_with_nothing_there_is_said_in_arabic(client: PageClient) -> None:
    answer = client.get("/nothing-here", headers=ARABIC)
    assert answer.status_code == 404
    assert _said(answer) == "لا يوجد شيء في /nothing-here."
