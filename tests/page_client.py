"""PageClient: an in-process test client that posts as the lesson page does, with the
learner's form token (web.security.csrf) in the X-CSRF-Token header.

The page carries the token in every form and in its meta tag; GET /api/state returns it too.
This client asks /api/state for it whenever its learner cookie is new (which also gives a
first-time client its learner and cookie, as opening the page would), so tests about the
lesson itself post as a real page would. Tests about the token itself use a plain
TestClient. The host platform's prerequisite report is left alone: it uses its bearer token.
"""

from __future__ import annotations

from typing import Any

from starlette.testclient import (
    TestClient,
    httpx,  # the HTTP client the TestClient is built on
)

from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.security.csrf import FIELD, HEADER

# The one POST that does not take the form token.
TOKENLESS_PATHS = ("/api/prerequisite",)


class PageClient(TestClient):
    _token: str | None = None
    _token_cookie: str | None = None

    def _cookie(self) -> str | None:
        try:
            return self.cookies.get(COOKIE_NAME)
        except httpx.CookieConflict:  # a test set one by hand beside the server's: not ours to pick
            return None

    def form_token(self) -> str | None:
        """The token for this client's current learner cookie (fetched when it changed)."""
        cookie = self._cookie()
        if cookie is None or cookie != self._token_cookie:
            answer = super().request("GET", "/api/state")
            body = answer.json() if answer.status_code == 200 else {}
            self._token = body.get("csrf_token") if isinstance(body, dict) else None
            self._token_cookie = self._cookie()
        return self._token

    def request(self, method: str, url: Any, **kwargs: Any) -> httpx.Response:  # type: ignore[override]
        data = kwargs.get("data")
        headers = httpx.Headers(kwargs.get("headers"))
        explicit = HEADER in headers or (isinstance(data, dict) and FIELD in data)
        path = httpx.URL(str(url)).path
        if method.upper() == "POST" and not explicit and path not in TOKENLESS_PATHS:
            token = self.form_token()
            if token is not None:
                headers[HEADER] = token
                kwargs["headers"] = headers
        return super().request(method, url, **kwargs)
