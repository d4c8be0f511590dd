"""No redirect is built from the request's Host: a path with a trailing slash is a plain 404,
not Starlette's 307 to the same path without it on whatever host the client named (which
would have the browser post its form again, there)."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient


@pytest.mark.parametrize(("method", "path"), [("POST", "/predict/"), ("GET", "/healthz/")])
def test_a_trailing_slash_is_a_404_without_a_redirect(
    app: Starlette, method: str, path: str
) -> None:
    with TestClient(app, follow_redirects=False) as client:
        answer = client.request(method, path, headers={"Host": "evil.example"})
    assert answer.status_code == 404
    assert "location" not in answer.headers
    assert "evil.example" not in answer.text
