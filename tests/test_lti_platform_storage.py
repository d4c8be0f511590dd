"""The login and launch when the browser keeps no third-party cookie, through the app: the
platform's storage (lti_storage_target; LTI client-side postMessages) stands in for the
login's cookie, the launch page posts the launch again with the secret it read back, and
only from this tool's own page; without either, the refusal offers a window of its own.
(The pages' script, in a real browser framed by a platform: tests/browser/.)"""

from __future__ import annotations

import logging

import pytest
from bs4 import BeautifulSoup
from joserfc.jwk import RSAKey
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SettingsFactory
from lti_platform import (
    ISSUER,
    TOOL_ORIGIN,
    KeySetServer,
    browser,
    launch_claims,
    login_params,
    register_platform,
    signed,
)
from normdive.config import Settings
from normdive.web.infrastructure.identity import COOKIE_NAME

STORAGE_TARGET = "lti_storage_frame"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def registered(engine: Engine, jwks: KeySetServer) -> None:
    register_platform(engine, jwks.url)


def storage_login(client: TestClient) -> dict[str, str]:
    """The login page's data attributes (it puts its secret in the platform's storage)."""
    response = client.get("/lti/login", params=login_params(lti_storage_target=STORAGE_TARGET))
    assert response.status_code == 200, response.text
    main = BeautifulSoup(response.text, "html.parser").find("main")
    assert main is not None
    assert response.headers["content-security-policy"].endswith(f"frame-ancestors {ISSUER}")
    assert "x-frame-options" not in response.headers
    return {str(k): str(v) for k, v in main.attrs.items() if str(k).startswith("data-")}


def test_the_login_page_puts_a_secret_in_the_platforms_storage(
    app: Starlette, registered: None
) -> None:
    with browser(app) as client:
        page = storage_login(client)
    assert page["data-lti-storage"] == "put"
    assert page["data-storage-target"] == STORAGE_TARGET
    assert page["data-storage-origin"] == ISSUER  # the authorization endpoint's origin
    assert page["data-next"].startswith(f"{ISSUER}/auth?")
    state = page["data-storage-key"].removeprefix("normdive_state_")
    assert f"state={state}" in page["data-next"]
    assert len(page["data-storage-value"]) >= 43


def _nonce(next_url: str) -> str:
    return next_url.split("nonce=")[1].split("&")[0]


def test_without_the_cookie_the_launch_reads_the_storage_and_posts_again(
    app: Starlette, registered: None, platform_key: RSAKey, engine: Engine
) -> None:
    with browser(app) as framed:
        page = storage_login(framed)
        framed.cookies.clear()  # the browser kept no cookie of the login
        state = page["data-storage-key"].removeprefix("normdive_state_")
        token = signed(launch_claims(_nonce(page["data-next"])), platform_key)
        first = framed.post("/lti/launch", data={"id_token": token, "state": state})
        assert first.status_code == 200, first.text
        soup = BeautifulSoup(first.text, "html.parser")
        main = soup.find("main")
        assert main is not None and main["data-lti-storage"] == "get"
        assert main["data-storage-key"] == page["data-storage-key"]
        form = soup.find("form", id="lti-storage-launch")
        assert form is not None and form["action"] == "/lti/launch"
        assert COOKIE_NAME not in framed.cookies
        # The page's second post: the secret read back, from the tool's own page.
        again = framed.post(
            "/lti/launch",
            data={"id_token": token, "state": state, "storage_secret": page["data-storage-value"]},
            headers={"Origin": TOOL_ORIGIN},
        )
        assert again.status_code == 303, again.text
        assert COOKIE_NAME in framed.cookies


@pytest.mark.parametrize(
    ("secret", "origin"),
    [
        ("right", "https://attacker.example"),  # another site's form posting the secret
        ("right", None),  # no Origin: not the tool's page
        ("wrong-secret", TOOL_ORIGIN),
    ],
)
def test_the_storage_secret_counts_only_right_and_from_the_tools_own_page(
    app: Starlette,
    registered: None,
    platform_key: RSAKey,
    caplog: pytest.LogCaptureFixture,
    secret: str,
    origin: str | None,
) -> None:
    with browser(app) as login_browser, browser(app) as other:
        page = storage_login(login_browser)
        state = page["data-storage-key"].removeprefix("normdive_state_")
        token = signed(launch_claims(_nonce(page["data-next"])), platform_key)
        sent = page["data-storage-value"] if secret == "right" else secret
        headers = {"Origin": origin} if origin else {}
        with caplog.at_level(logging.WARNING):
            response = other.post(
                "/lti/launch",
                data={"id_token": token, "state": state, "storage_secret": sent},
                headers=headers,
            )
        assert response.status_code == 403, response.text
        assert "<code>state_from_another_browser</code>" in response.text
        assert COOKIE_NAME not in other.cookies


def test_with_neither_cookie_nor_storage_the_refusal_offers_a_window_of_its_own(
    app: Starlette, registered: None, platform_key: RSAKey
) -> None:
    with browser(app) as framed:
        response = framed.get("/lti/login", params=login_params())
        assert response.status_code == 303
        next_url = response.headers["location"]
        state = next_url.split("state=")[1].split("&")[0]
        framed.cookies.clear()
        token = signed(launch_claims(_nonce(next_url)), platform_key)
        refused = framed.post("/lti/launch", data={"id_token": token, "state": state})
        assert refused.status_code == 403
        link = BeautifulSoup(refused.text, "html.parser").find(
            "a", string="Open the lesson in a window of its own"
        )
        assert link is not None
        assert link["target"] == "_blank"
        # In a window of its own, the login starts afresh (with first-party cookies).
        relaunch = framed.get(str(link["href"]))
        assert relaunch.status_code == 303
        assert relaunch.headers["location"].startswith(f"{ISSUER}/auth?")
