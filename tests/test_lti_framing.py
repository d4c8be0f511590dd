"""Inside a platform's iframe: the cookies an LTI launch sets (and every renewal of them) are
SameSite=None, Secure and Partitioned; the Content-Security-Policy lets the launching
platform's origins frame the lesson and nobody else, and stays frame-ancestors 'none' outside
a launch; the lesson's form token keeps working framed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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
    launch,
    launch_claims,
    login,
    signed,
)
from normdive.config import Settings
from normdive.lti.registrations import register, validated
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.security.framing import FRAME_COOKIE
from normdive.web.security.headers import CONTENT_SECURITY_POLICY

COURSE_PAGES = "https://school.platform.example"
FRAMED_ATTRIBUTES = ("samesite=none", "secure", "partitioned", "httponly")


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for directive in policy.split(";"):
        name, *values = directive.split()
        parsed[name] = values
    return parsed


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def framed(
    app: Starlette, engine: Engine, jwks: KeySetServer, platform_key: RSAKey
) -> Iterator[TestClient]:
    """A browser launched into the lesson by a platform whose course pages are elsewhere."""
    register(
        engine,
        validated(
            issuer=ISSUER,
            client_id="tool-client-7",
            auth_login_url="https://login.platform.example/auth",
            token_url=f"{ISSUER}/token",
            jwks_url=jwks.url,
            deployment_ids=("deployment-1",),
            frame_origins=(COURSE_PAGES,),
        ),
    )
    with browser(app) as client:
        asked = login(client)
        response = launch(client, signed(launch_claims(asked.nonce), platform_key), asked.state)
        assert response.status_code == 303, response.text
        frame_cookie = next(
            c for c in response.headers.get_list("set-cookie") if c.startswith(FRAME_COOKIE)
        )
        for attribute in FRAMED_ATTRIBUTES:
            assert attribute in frame_cookie.lower()
        yield client


def test_a_framed_session_may_be_framed_by_its_platform_only(framed: TestClient) -> None:
    response = framed.get("/")
    assert response.status_code == 200
    policy = directives(response.headers["content-security-policy"])
    assert policy["frame-ancestors"] == [
        "https://platform.example.edu",
        "https://login.platform.example",
        COURSE_PAGES,
    ]
    # The rest of the policy is the page's usual one.
    usual = directives(CONTENT_SECURITY_POLICY)
    assert {k: v for k, v in policy.items() if k != "frame-ancestors"} == {
        k: v for k, v in usual.items() if k != "frame-ancestors"
    }
    assert "x-frame-options" not in response.headers
    # Every answer of the session says so, static files and refusals included.
    assert (
        "frame-ancestors https://platform"
        in framed.get("/nowhere").headers["content-security-policy"]
    )


def test_renewing_the_learner_cookie_keeps_it_framed(framed: TestClient) -> None:
    learner_cookie = framed.cookies.get(COOKIE_NAME)
    response = framed.get("/")
    renewed = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith(f"{COOKIE_NAME}=")
    )
    for attribute in FRAMED_ATTRIBUTES:
        assert attribute in renewed.lower()
    assert framed.cookies.get(COOKIE_NAME) == learner_cookie


def test_the_form_token_keeps_working_framed(framed: TestClient) -> None:
    token = framed.get("/api/state").json()["csrf_token"]
    response = framed.post(
        "/predict",
        data={"choice": "residual", "csrf_token": token},
        headers={"Origin": TOOL_ORIGIN},
    )
    assert response.status_code in (200, 303), response.text
    assert framed.get("/api/state").json()["state"]["prediction"] == "residual"


def test_outside_a_launch_nobody_may_frame_the_lesson(app: Starlette) -> None:
    with browser(app) as client:
        response = client.get("/")
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-frame-options"] == "DENY"
        plain = next(
            c for c in response.headers.get_list("set-cookie") if c.startswith(COOKIE_NAME)
        )
        assert "samesite=lax" in plain.lower()
        assert "partitioned" not in plain.lower()


def test_a_forged_framing_cookie_frames_nothing(app: Starlette) -> None:
    with browser(app) as client:
        client.cookies.set(FRAME_COOKIE, "https://evil.example.abcdef")
        response = client.get("/")
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-frame-options"] == "DENY"


def test_a_frame_origin_must_be_an_origin() -> None:
    from normdive.lti.registrations import RegistrationProblem

    for bad in ("https://school.example/courses", "ftp://school.example", "school.example"):
        with pytest.raises(RegistrationProblem, match="frame_origins"):
            validated(
                issuer=ISSUER,
                client_id="c",
                auth_login_url=f"{ISSUER}/auth",
                token_url=f"{ISSUER}/token",
                jwks_url=f"{ISSUER}/jwks",
                deployment_ids=("d",),
                frame_origins=(bad,),
            )


def test_a_refusal_can_be_read_in_any_https_platforms_frame(app: Starlette) -> None:
    with browser(app) as client:
        response = client.get("/lti/login", params={"iss": "https://unregistered.example"})
    assert response.status_code == 400
    policy = directives(response.headers["content-security-policy"])
    assert policy["frame-ancestors"] == ["https:"]
    assert policy["form-action"] == ["'self'"]
    assert "x-frame-options" not in response.headers
