"""The security headers on every kind of answer, and a page that needs nothing the policy
forbids: no inline script or style, no event-handler attributes, nothing from elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SettingsFactory, ablation_recording, write_recording
from normdive.web.app import create_app
from normdive.web.security.headers import CONTENT_SECURITY_POLICY
from normdive.web.security.limits import MAX_BODY_BYTES
from page_client import PageClient

JSON = {"Accept": "application/json"}


@pytest.fixture
def app(make_settings: SettingsFactory, tmp_path: Path) -> Starlette:
    recording = write_recording(tmp_path, ablation_recording())
    return create_app(make_settings(recording_path=recording, attempts_per_minute=1))


def directives(policy: str) -> dict[str, list[str]]:
    parsed: dict[str, list[str]] = {}
    for part in policy.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


def test_the_policy_allows_no_inline_script_no_eval_and_no_framing() -> None:
    policy = directives(CONTENT_SECURITY_POLICY)
    assert policy["default-src"] == ["'self'"]
    # No 'unsafe-inline', no 'unsafe-eval': WebAssembly compilation only (the lab's kernels).
    assert policy["script-src"] == ["'self'", "'wasm-unsafe-eval'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert "unsafe" not in CONTENT_SECURITY_POLICY.replace("'wasm-unsafe-eval'", "")


def every_kind_of_answer(client: PageClient) -> dict[str, object]:
    """One answer of each kind the app gives, keyed by what it is."""
    answers: dict[str, object] = {"page": client.get("/"), "state": client.get("/api/state")}
    answers["health"] = client.get("/healthz")
    answers["static"] = client.get("/static/page.js")
    answers["missing"] = client.get("/nothing-here")
    # Before the commit, a check is 409; the commit is the learner's one write a minute here.
    answers["conflict"] = client.post("/numbers", data={"row1_mean": "2"}, headers=JSON)
    answers["redirect"] = client.post("/predict", data={"choice": "residual"})
    answers["throttled"] = client.post("/numbers", data={"row1_mean": "2"}, headers=JSON)
    answers["forbidden"] = client.post(
        "/numbers", data={"row1_mean": "2"}, headers={"X-CSRF-Token": "x"}
    )
    answers["too-large"] = client.post("/takeaway", data={"text": "x" * (MAX_BODY_BYTES + 1)})
    answers["unauthorised"] = client.post("/api/prerequisite", json={})
    answers["method"] = client.put("/predict")
    return answers


def test_every_answer_carries_the_security_headers(app: Starlette) -> None:
    with PageClient(app, follow_redirects=False) as client:
        answers = every_kind_of_answer(client)
    statuses = {name: answer.status_code for name, answer in answers.items()}  # type: ignore[attr-defined]
    assert statuses == {
        "page": 200,
        "state": 200,
        "health": 200,
        "static": 200,
        "missing": 404,
        "redirect": 303,
        "conflict": 409,
        "throttled": 429,
        "forbidden": 403,
        "too-large": 413,
        "unauthorised": 401,
        "method": 405,
    }
    for name, answer in answers.items():
        headers = answer.headers  # type: ignore[attr-defined]
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY, name
        assert headers["x-content-type-options"] == "nosniff", name
        assert headers["referrer-policy"] == "same-origin", name
        assert headers["x-frame-options"] == "DENY", name


def test_the_page_needs_nothing_the_policy_forbids(app: Starlette) -> None:
    with PageClient(app, follow_redirects=False) as client:
        client.post("/predict", data={"choice": "residual"})
        client.post("/rows/both/predict", data={"outcome": "learns"})
        pages = [client.get("/").text, client.get("/?eps=off&row=1,2,3").text]
    with TestClient(app) as stranger:
        pages.append(stranger.get("/nothing-here").text)
    for html in pages:
        soup = BeautifulSoup(html, "html.parser")
        for script in soup.find_all("script"):
            assert script.get("src", "").startswith("/static/"), script  # no inline script
            assert not script.get_text(strip=True)
        assert not soup.find_all("style")
        for element in soup.find_all(True):
            attributes = set(element.attrs)
            assert not {a for a in attributes if a.startswith("on")}, element.name
            assert "style" not in attributes, element.name
            for name in ("src", "href", "action"):
                value = str(element.get(name, ""))
                assert not value.startswith(("http:", "https:", "//", "javascript:")), value
