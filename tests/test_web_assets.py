"""Static files and compression: versioned asset URLs kept for good, others revalidated with
ETags, gzip for files, pages and JSON, readable errors for what is not there (in-process HTTP;
nothing here measures time)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from starlette.testclient import TestClient

from normdive.web.infrastructure.assets import (
    IMMUTABLE,
    REVALIDATE,
    StaticAssets,
    accepts_gzip,
    etag_matches,
    load_asset,
)
from normdive.web.views.rendering import STATIC_DIR, static_url, static_version

GZIP = {"Accept-Encoding": "gzip"}
PLAIN = {"Accept-Encoding": "identity"}
JSON = {"Accept": "application/json"}


def page_asset_urls(client: TestClient) -> list[str]:
    soup = BeautifulSoup(client.get("/").text, "html.parser")
    urls = [str(link["href"]) for link in soup.select("link[href^='/static/']")]
    return urls + [str(script["src"]) for script in soup.select("script[src]")]


def test_the_page_links_every_asset_under_this_releases_version(client: TestClient) -> None:
    version = static_version()
    urls = page_asset_urls(client)
    assert sorted(urls) == sorted(
        static_url(name, version)
        for name in ("page.css", "page.js", "page/takeaway-saved.js", "page/kept.js")
    )


def test_versioned_assets_are_kept_for_good_and_compressed(client: TestClient) -> None:
    for url in page_asset_urls(client):
        response = client.get(url, headers=GZIP)
        assert response.status_code == 200, url
        assert response.headers["cache-control"] == IMMUTABLE
        assert response.headers["content-encoding"] == "gzip"
        assert "accept-encoding" in response.headers["vary"].lower()
        assert response.headers["etag"].startswith('W/"')
        # httpx decodes the body: it is the file itself.
        name = url.removeprefix(static_url("", static_version()))
        assert response.content == (STATIC_DIR / name).read_bytes()
        assert int(response.headers["content-length"]) < len(response.content)


def test_the_labs_webassembly_is_compressed(client: TestClient) -> None:
    response = client.get(static_url("lab/kernels.wasm", static_version()), headers=GZIP)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/wasm"
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == (STATIC_DIR / "lab" / "kernels.wasm").read_bytes()
    assert int(response.headers["content-length"]) < len(response.content)


def test_modules_imported_by_relative_url_share_the_version(client: TestClient) -> None:
    # page.js imports ./page/numbers.js, which imports ../layernorm.js; the panels' modules
    # import ../page/growing.js and their stylesheet: same versioned folder.
    base = static_url("", static_version())
    for name in ("page/numbers.js", "layernorm.js", "page/growing.js", "lab.css"):
        response = client.get(base + name, headers=GZIP)
        assert response.status_code == 200, name
        assert response.headers["cache-control"] == IMMUTABLE


def test_unversioned_and_outdated_urls_are_revalidated(client: TestClient) -> None:
    for url in ("/static/page.js", "/static/0123456789ab/page.js"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["cache-control"] == REVALIDATE


def test_an_unchanged_file_is_not_sent_again(client: TestClient) -> None:
    first = client.get("/static/page.css")
    again = client.get("/static/page.css", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    assert again.headers["cache-control"] == REVALIDATE
    other = client.get("/static/page.css", headers={"If-None-Match": 'W/"something-else"'})
    assert other.status_code == 200


def test_a_client_that_refuses_gzip_gets_the_plain_file(client: TestClient) -> None:
    for headers in (PLAIN, {"Accept-Encoding": "gzip;q=0"}):
        response = client.get("/static/page.js", headers=headers)
        assert "content-encoding" not in response.headers
        assert response.content == (STATIC_DIR / "page.js").read_bytes()
        assert int(response.headers["content-length"]) == len(response.content)


def test_head_answers_headers_only(client: TestClient) -> None:
    response = client.head("/static/page.js", headers=GZIP)
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["content-encoding"] == "gzip"


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "/static/nothing.js", 404, "There is nothing at /static/nothing.js."),
        ("GET", "/static/0123456789ab/nothing.js", 404, "There is nothing at"),
        ("GET", "/static/../pyproject.toml", 404, "There is nothing at"),
        ("GET", "/static/not-a-version/page.js", 404, "There is nothing at"),
        ("POST", "/static/page.js", 405, "does not accept a POST request"),
    ],
)
def test_what_is_not_an_asset_gets_a_readable_error(
    client: TestClient, method: str, path: str, status: int, words: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == status
    assert words in BeautifulSoup(response.text, "html.parser").get_text()
    assert "content-security-policy" in response.headers


def test_the_page_and_json_answers_are_compressed(client: TestClient) -> None:
    page = client.get("/", headers=GZIP)
    assert page.headers["content-encoding"] == "gzip"
    assert "accept-encoding" in page.headers["vary"].lower()
    assert "<h1>" in page.text
    # The form token (web.security.csrf) as the page script sends it.
    token = client.get("/api/state").json().get("csrf_token", "")
    answer = client.post("/numbers", data={}, headers={**GZIP, **JSON, "X-CSRF-Token": token})
    assert answer.headers["content-encoding"] == "gzip"
    assert "fragments" in answer.json()
    for refusing in (PLAIN, {"Accept-Encoding": "gzip;q=0"}):
        assert "content-encoding" not in client.get("/", headers=refusing).headers


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("gzip;q=0.0, br", False),
        ("deflate, br", False),
        ("", False),
        ("gzip;q=nonsense", False),
    ],
)
def test_accept_encoding(header: str, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted


def test_etags_compare_weakly() -> None:
    assert etag_matches('"abc"', 'W/"abc"')
    assert etag_matches('W/"x", W/"abc"', 'W/"abc"')
    assert etag_matches("*", 'W/"abc"')
    assert not etag_matches('"abd"', 'W/"abc"')


def test_files_are_compressed_once_and_only_when_it_pays(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("const x = 1;\n" * 200, encoding="utf-8")
    (tmp_path / "b.css").write_text("p{}", encoding="utf-8")
    (tmp_path / "c.png").write_bytes(b"\x89PNG" + bytes(300))
    text = load_asset(tmp_path / "a.js")
    assert text.gzipped is not None and gzip.decompress(text.gzipped) == text.body
    assert text.media_type == "text/javascript; charset=utf-8"
    assert load_asset(tmp_path / "b.css").gzipped is None  # larger compressed than plain
    assert load_asset(tmp_path / "c.png").gzipped is None  # not a text type
    assets = StaticAssets(tmp_path, "0123456789ab")
    assert set(assets.assets) == {"a.js", "b.css", "c.png"}
    assert assets.find("/0123456789ab/a.js") == (text, IMMUTABLE)
    assert assets.find("/a.js") == (text, REVALIDATE)
    assert assets.find("/0123456789ab/missing.js") is None
