"""The app factory: routes, static files, headers, readable errors, and never torch."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from starlette.requests import Request
from starlette.testclient import TestClient

from helpers import SettingsFactory
from normdive.web.app import create_app
from normdive.web.routes.pages import json_safe
from normdive.web.security.limits import MAX_BODY_BYTES
from normdive.web.views.rendering import static_version

JSON = {"Accept": "application/json"}
REPO = Path(__file__).resolve().parents[1]


def test_the_app_serves_the_page_health_and_static_files(client: TestClient) -> None:
    assert client.get("/").status_code == 200
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"ok": True, "database": "ok"}
    for name, kind in [
        ("page.css", "text/css"),
        ("page.js", "javascript"),
        ("layernorm.js", "javascript"),
    ]:
        response = client.get(f"/static/{name}")
        assert response.status_code == 200, name
        assert kind in response.headers["content-type"]
        assert response.headers["cache-control"] == "no-cache"


def test_the_page_links_versioned_assets_that_exist(client: TestClient) -> None:
    soup = BeautifulSoup(client.get("/").text, "html.parser")
    urls = [link["href"] for link in soup.select("link[rel=stylesheet]")]
    urls += [script["src"] for script in soup.select("script[src]")]
    assert len(urls) == 2
    for url in urls:
        assert f"/static/{static_version()}/" in str(url)
        assert client.get(str(url)).status_code == 200


def test_every_response_carries_the_security_headers(client: TestClient) -> None:
    for response in (client.get("/"), client.get("/static/page.js"), client.get("/missing")):
        policy = response.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy
        assert response.headers["x-content-type-options"] == "nosniff"


def test_no_api_documentation_is_exposed(client: TestClient) -> None:
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert client.get(path).status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "/no/such/page", 404, "There is nothing at /no/such/page."),
        ("PUT", "/predict", 405, "/predict does not accept a PUT request."),
        ("DELETE", "/", 405, "/ does not accept a DELETE request."),
        ("GET", "/predict", 405, "/predict does not accept a GET request."),
    ],
)
def test_http_errors_read_as_html_or_json(
    client: TestClient, method: str, path: str, status: int, words: str
) -> None:
    page = client.request(method, path)
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
    soup = BeautifulSoup(page.text, "html.parser")
    assert soup.select_one("[role=alert]").get_text(strip=True) == words
    assert soup.select_one("a[href='/']") is not None
    assert "Traceback" not in page.text

    data = client.request(method, path, headers=JSON)
    assert data.status_code == status
    assert data.json() == {"ok": False, "message": words}


def test_a_405_says_which_methods_are_allowed(client: TestClient) -> None:
    assert client.put("/predict").headers["allow"] == "POST"


@pytest.mark.parametrize("path", ["/healthz", "/", "/lti/jwks", "/static/page.css", "/nowhere"])
def test_head_answers_as_get_would_without_the_body(client: TestClient, path: str) -> None:
    got = client.get(path, headers={"Accept-Encoding": "identity"})
    head = client.head(path, headers={"Accept-Encoding": "identity"})
    assert head.status_code == got.status_code
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    if "content-length" in got.headers:
        assert head.headers["content-length"] == got.headers["content-length"]
    assert head.headers["content-security-policy"] == got.headers["content-security-policy"]


def test_head_on_a_post_only_route_is_a_405_naming_post(client: TestClient) -> None:
    answer = client.head("/predict")
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")


def test_an_oversized_body_gets_a_readable_413_and_changes_nothing(client: TestClient) -> None:
    client.post("/predict", data={"choice": "residual"})
    big = "x" * (MAX_BODY_BYTES + 1)
    declared = client.post("/takeaway", data={"text": big}, headers=JSON)
    assert declared.status_code == 413
    assert declared.json() == {
        "ok": False,
        "message": "That request is too large to accept. Nothing was saved.",
    }

    def chunks() -> object:  # no Content-Length: the limit is found while reading
        yield b"text="
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b"y" * 1024

    streamed = client.post(
        "/takeaway",
        content=chunks(),  # type: ignore[arg-type]
        headers={"Content-Type": "application/x-www-form-urlencoded", **JSON},
    )
    assert streamed.status_code == 413
    assert client.get("/api/state").json()["state"]["takeaway"] is None


def test_an_unexpected_failure_is_a_readable_500_without_a_trace(
    make_settings: SettingsFactory,
) -> None:
    app = create_app(make_settings())

    def explode(_request: Request) -> None:
        raise RuntimeError("boom: internal detail")

    app.add_route("/explode", explode)

    with TestClient(app, raise_server_exceptions=False) as test_client:
        page = test_client.get("/explode")
        data = test_client.get("/explode", headers=JSON)
    assert page.status_code == 500 and data.status_code == 500
    assert "boom" not in page.text and "Traceback" not in page.text
    assert "Something went wrong on our side" in page.text
    assert data.json()["ok"] is False and "boom" not in data.json()["message"]


def test_a_store_that_cannot_be_reached_is_a_503_not_a_500(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    # A SQLite file in a folder that does not exist cannot be opened.
    url = f"sqlite:///{tmp_path / 'absent' / 'db.sqlite3'}"
    with TestClient(create_app(make_settings(DATABASE_URL=url))) as test_client:
        page = test_client.get("/")
        health = test_client.get("/healthz")
    assert page.status_code == 503
    assert "The progress store is not reachable right now" in page.text
    assert health.status_code == 503


@pytest.mark.slow
def test_serving_the_app_never_imports_torch(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from pathlib import Path
        from helpers import build_settings, migrated_sqlite_url
        from page_client import PageClient
        import normdive.cli
        from normdive.web.app import create_app

        folder = Path({str(tmp_path)!r})
        app = create_app(build_settings(migrated_sqlite_url(folder), folder))
        with PageClient(app) as client:
            assert client.get("/").status_code == 200
            assert client.post("/predict", data={{"choice": "residual"}}).status_code == 200
            assert client.post("/numbers", data={{"row1_mean": "2"}}).status_code == 200
            assert client.get("/api/state").status_code == 200
        loaded = sorted(name for name in sys.modules if name.split(".")[0] == "torch")
        assert not loaded, loaded
        print("no torch")
        """
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no torch"


def test_json_safe_spells_non_finite_numbers() -> None:
    value = {"a": [1.5, math.nan, {"b": math.inf}], "c": -math.inf, "d": "text", "e": None}
    assert json_safe(value) == {
        "a": [1.5, "nan", {"b": "inf"}],
        "c": "-inf",
        "d": "text",
        "e": None,
    }


def test_a_method_not_allowed_names_the_allowed_ones_in_one_order(client: TestClient) -> None:
    # Starlette builds Allow from a set; the answer must not depend on the worker's hash seed.
    answer = client.delete("/")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"
