"""Deep linking: an instructor picking the lesson in the platform's content picker gets a page
whose one button posts a signed LtiDeepLinkingResponse back to the platform, holding the
lesson as an ltiResourceLink with a line item; learners and malformed requests are refused."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from bs4 import BeautifulSoup
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SettingsFactory
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    INSTRUCTOR_ROLE,
    ISSUER,
    LEARNER_ROLE,
    TOOL_ORIGIN,
    KeySetServer,
    browser,
    launch,
    launch_claims,
    login,
    register_platform,
    signed,
)
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lesson.translations import load_translation
from normdive.lti.launch import is_return_address

LESSON = load_lesson()
RETURN_URL = f"{ISSUER}/deep_links/return?course=1"
SETTINGS_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def client(app: Starlette, engine: Engine, jwks: KeySetServer) -> Iterator[TestClient]:
    register_platform(engine, jwks.url)
    with browser(app) as test_client:
        yield test_client


def deep_linking_claims(nonce: str, **overrides: Any) -> dict[str, Any]:
    settings = {
        "deep_link_return_url": RETURN_URL,
        "accept_types": ["link", "ltiResourceLink"],
        "accept_presentation_document_targets": ["iframe", "window"],
        "data": "opaque-platform-data",
    }
    claims: dict[str, Any] = {
        "lti_message_type": "LtiDeepLinkingRequest",
        "lti_resource_link": None,
        "lti_roles": [INSTRUCTOR_ROLE],
        SETTINGS_CLAIM: settings,
    }
    claims.update(overrides)
    return launch_claims(nonce, **claims)


def test_an_instructor_gets_the_signed_response_with_the_lesson_and_its_line_item(
    client: TestClient, platform_key: RSAKey
) -> None:
    asked = login(client)
    response = launch(client, signed(deep_linking_claims(asked.nonce), platform_key), asked.state)
    assert response.status_code == 200, response.text
    assert f"form-action 'self' {ISSUER}" in response.headers["content-security-policy"]
    soup = BeautifulSoup(response.text, "html.parser")
    form = soup.find("form")
    assert form is not None and form["action"] == RETURN_URL and form["method"] == "post"
    button = soup.find("button")
    assert button is not None and "Add" in button.get_text()
    hidden = soup.find("input", attrs={"name": "JWT"})
    assert hidden is not None
    keys = KeySet.import_key_set(client.get("/lti/jwks").json())
    token = jwt.decode(str(hidden["value"]), keys, algorithms=["RS256"])
    claims = token.claims
    assert claims["iss"] == CLIENT_ID
    assert claims["aud"] == ISSUER
    assert claims[CLAIM + "message_type"] == "LtiDeepLinkingResponse"
    assert claims[CLAIM + "version"] == "1.3.0"
    assert claims[CLAIM + "deployment_id"] == DEPLOYMENT_ID
    assert claims[DL + "data"] == "opaque-platform-data"
    [item] = claims[DL + "content_items"]
    assert item["type"] == "ltiResourceLink"
    assert item["url"] == f"{TOOL_ORIGIN}/lti/launch"
    assert item["title"] == f"D9 {LESSON.title}"
    assert item["lineItem"] == {
        "label": f"D9 {LESSON.title}",
        "scoreMaximum": 12,
        # Submission Review 1.0: the gradebook may open a learner's D9 from this column.
        "submissionReview": {"reviewableStatus": ["InProgress", "Submitted", "Completed"]},
    }
    # The login was used up: the same request again is refused.
    again = launch(client, signed(deep_linking_claims(asked.nonce), platform_key), asked.state)
    assert again.status_code == 400


# Where the tool's signed answer must not be posted: a script, inline data, plain http to
# another machine, no host, credentials in the address, unparseable.
BAD_RETURN_ADDRESSES = [
    "javascript:alert(1)",
    "data:text/html,<p>x</p>",
    "http://platform.example.edu/deep_links/return",
    "https:///no-host",
    "https://user:secret@platform.example.edu/return",
    "https://[::1/return",
    "/deep_links/return",
]


@pytest.mark.parametrize(
    "address",
    [
        RETURN_URL,
        "http://127.0.0.1:8080/deep_links",
        "http://localhost/deep_links",
        "http://lms.localhost/deep_links",
        "http://[::1]:9000/deep_links",
    ],
)
def test_https_and_this_machines_http_are_return_addresses(address: str) -> None:
    assert is_return_address(address)


@pytest.mark.parametrize("address", BAD_RETURN_ADDRESSES)
def test_other_addresses_are_not(address: str) -> None:
    assert not is_return_address(address)


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"lti_roles": [LEARNER_ROLE]}, 403, "not_staff"),
        ({SETTINGS_CLAIM: None}, 401, "missing_claim"),
        (
            {SETTINGS_CLAIM: {"deep_link_return_url": RETURN_URL, "accept_types": ["file"]}},
            400,
            "unacceptable_content",
        ),
        *(
            (
                {
                    SETTINGS_CLAIM: {
                        "deep_link_return_url": address,
                        "accept_types": ["ltiResourceLink"],
                    }
                },
                400,
                "bad_return_url",
            )
            for address in BAD_RETURN_ADDRESSES
        ),
    ],
    ids=[
        "a learner",
        "no settings",
        "no resource links accepted",
        *(f"return to {address[:24]}" for address in BAD_RETURN_ADDRESSES),
    ],
)
def test_a_deep_linking_request_it_cannot_answer_is_refused(
    client: TestClient,
    platform_key: RSAKey,
    caplog: pytest.LogCaptureFixture,
    overrides: dict[str, Any],
    status: int,
    code: str,
) -> None:
    asked = login(client)
    token = signed(deep_linking_claims(asked.nonce, **overrides), platform_key)
    with caplog.at_level(logging.WARNING):
        response = launch(client, token, asked.state)
    assert response.status_code == status, response.text
    assert f"<code>{code}</code>" in response.text
    assert any(code in record.getMessage() for record in caplog.records)


def test_the_canvas_configuration_names_the_tools_urls(app: Starlette) -> None:
    with browser(app) as client:
        answer = client.get("/lti/canvas.json")
    assert answer.status_code == 200
    config = answer.json()
    assert config["oidc_initiation_url"] == f"{TOOL_ORIGIN}/lti/login"
    assert config["target_link_uri"] == f"{TOOL_ORIGIN}/lti/launch"
    assert config["public_jwk_url"] == f"{TOOL_ORIGIN}/lti/jwks"
    assert set(config["scopes"]) == {
        "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
        "https://purl.imsglobal.org/spec/lti-ags/scope/score",
        "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",
    }
    [canvas] = config["extensions"]
    assert canvas["platform"] == "canvas.instructure.com"
    assert canvas["domain"] == "tool.test"
    assert canvas["privacy_level"] == "anonymous"
    assert {p["message_type"] for p in canvas["settings"]["placements"]} == {
        "LtiDeepLinkingRequest"
    }


def test_the_picker_speaks_the_launchs_language(client: TestClient, platform_key: RSAKey) -> None:
    asked = login(client)
    claims = deep_linking_claims(
        asked.nonce, **{CLAIM + "launch_presentation": {"locale": "de-DE"}}
    )
    response = launch(client, signed(claims, platform_key), asked.state)
    assert response.status_code == 200, response.text
    soup = BeautifulSoup(response.text, "html.parser")
    heading = soup.find("h1")
    assert heading is not None and heading.get_text() == "Diese Lektion zu Ihrem Kurs hinzufügen"
    button = soup.find("button")
    assert button is not None and button.get_text().endswith("zum Kurs hinzufügen")
    assert load_translation("de")[0].summary in soup.get_text()
