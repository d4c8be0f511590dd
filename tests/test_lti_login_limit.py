"""The limit on LTI logins begun and not finished, per client address: a login stores a state
and a nonce until its launch uses them or they expire, so without a limit a script calling
/lti/login again and again would store two rows a call. Beyond the limit the login is a
readable 429 with Retry-After, and stores nothing; a finished launch or an expired login frees
its place; another address is not affected; what is stored is a keyed hash, not the address."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from bs4 import BeautifulSoup
from joserfc.jwk import RSAKey
from pydantic import SecretStr
from sqlalchemy import Engine, func, select, update
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SECRET_KEY, SettingsFactory
from lti_platform import (
    KeySetServer,
    browser,
    launch,
    launch_claims,
    login,
    login_params,
    register_platform,
    signed,
)
from normdive.config import DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS, Settings
from normdive.lti.login import LOGIN_TTL
from normdive.lti.registrations import Registration
from normdive.store.tables import LtiNonce, LtiState
from normdive.web.app import create_app
from normdive.web.security.ratelimit import address_key

LIMIT = 3
# The in-process client's peer is "testclient"; trusted as a proxy here, so that a test can
# name other client addresses with X-Forwarded-For.
PEER = "testclient"
ANOTHER_CLIENT = {"X-Forwarded-For": "203.0.113.7"}


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(open_lti_logins_per_address=LIMIT, FORWARDED_ALLOW_IPS=PEER)


@pytest.fixture
def registration(engine: Engine, jwks: KeySetServer) -> Registration:
    return register_platform(engine, jwks.url)


def rows(engine: Engine) -> tuple[int, int]:
    with engine.connect() as connection:
        return (
            connection.execute(select(func.count()).select_from(LtiState)).scalar_one(),
            connection.execute(select(func.count()).select_from(LtiNonce)).scalar_one(),
        )


def fill_up(client: TestClient) -> None:
    """Begin as many logins from the client's address as the limit allows."""
    for _ in range(LIMIT):
        login(client)


@pytest.mark.both_databases
def test_logins_beyond_the_limit_are_a_readable_429_that_stores_nothing(
    app: Starlette, engine: Engine, registration: Registration
) -> None:
    with browser(app) as client:
        fill_up(client)
        assert rows(engine) == (LIMIT, LIMIT)
        refused = client.get("/lti/login", params=login_params())
        refused_by_post = client.post("/lti/login", data=login_params())
        # Another address has places of its own.
        other = client.get("/lti/login", params=login_params(), headers=ANOTHER_CLIENT)
    for answer in (refused, refused_by_post):
        assert answer.status_code == 429
        assert LOGIN_TTL.total_seconds() - 60 < int(answer.headers["retry-after"])
        assert int(answer.headers["retry-after"]) <= LOGIN_TTL.total_seconds()
        # Shown in the platform's frame, as every LTI refusal is.
        assert "frame-ancestors" in answer.headers["content-security-policy"]
        text = " ".join(BeautifulSoup(answer.text, "html.parser").get_text(" ").split())
        assert "Too many launches from your network are still in progress" in text
        assert f"{LIMIT} begun in the last 10 minutes and not finished" in text
        assert "Try again in 10 minutes." in text
        # The setting's name may break after its underscores, not within its words.
        assert "NORMDIVE_<wbr>OPEN_<wbr>LTI_<wbr>LOGINS_<wbr>PER_<wbr>ADDRESS" in answer.text
        alert = BeautifulSoup(answer.text, "html.parser").find(role="alert")
        assert alert is not None
        assert "(The limit is NORMDIVE_OPEN_LTI_LOGINS_PER_ADDRESS.)" in alert.get_text()
        assert "nothing was stored" in text
    assert other.status_code == 303
    assert rows(engine) == (LIMIT + 1, LIMIT + 1)


@pytest.mark.both_databases
def test_retry_after_is_when_a_place_opens(
    app: Starlette, engine: Engine, registration: Registration, make_settings: SettingsFactory
) -> None:
    with browser(app) as client:
        fill_up(client)
        # The two oldest logins expire in 30 and 90 s: after 30 s there is a place again.
        soon = datetime.now(UTC) + timedelta(seconds=30)
        with engine.begin() as connection:
            oldest = connection.execute(
                select(LtiState.state).order_by(LtiState.expires_at).limit(2)
            ).scalars()
            for state, expires_at in zip(oldest, (soon, soon + timedelta(seconds=60)), strict=True):
                connection.execute(
                    update(LtiState).where(LtiState.state == state).values(expires_at=expires_at)
                )
        refused = client.get("/lti/login", params=login_params())
    assert refused.status_code == 429
    assert 25 <= int(refused.headers["retry-after"]) <= 30
    assert "Try again in 1 minute." in refused.text
    # Under a limit lowered to 2, two of the three must expire first: 90 s.
    lowered = create_app(make_settings(FORWARDED_ALLOW_IPS=PEER, open_lti_logins_per_address=2))
    with browser(lowered) as client:
        refused = client.get("/lti/login", params=login_params())
    assert refused.status_code == 429
    assert 85 <= int(refused.headers["retry-after"]) <= 90
    assert "Try again in 2 minutes." in refused.text


@pytest.mark.both_databases
def test_a_finished_launch_frees_its_place(
    app: Starlette, engine: Engine, registration: Registration, platform_key: RSAKey
) -> None:
    with browser(app) as client:
        asked = [login(client) for _ in range(LIMIT)]
        assert client.get("/lti/login", params=login_params()).status_code == 429
        first = asked[0]
        landed = launch(client, signed(launch_claims(first.nonce), platform_key), first.state)
        assert landed.status_code == 303, landed.text
        login(client)  # the place the launch freed
        assert client.get("/lti/login", params=login_params()).status_code == 429


@pytest.mark.both_databases
def test_expired_logins_count_for_nothing_and_are_cleared(
    app: Starlette, engine: Engine, registration: Registration
) -> None:
    with browser(app) as client:
        fill_up(client)
        with engine.begin() as connection:
            connection.execute(
                update(LtiState).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
            )
        login(client)
    assert rows(engine)[0] == 1  # the expired ones were deleted by that login


def test_what_is_stored_is_a_keyed_hash_of_the_address(
    app: Starlette, engine: Engine, registration: Registration
) -> None:
    with browser(app) as client:
        login(client)
    with engine.connect() as connection:
        created_by = connection.execute(select(LtiState.created_by)).scalar_one()
    assert created_by == address_key(SecretStr(SECRET_KEY), PEER)
    assert created_by is not None and PEER not in created_by


def test_a_flood_of_logins_from_one_address_stores_the_default_limit_and_no_more(
    make_settings: SettingsFactory, engine: Engine, registration: Registration
) -> None:
    flood = DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS + 50
    app = create_app(make_settings(open_lti_logins_per_address=DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS))
    with browser(app) as client:
        statuses = Counter(
            client.get("/lti/login", params=login_params()).status_code for _ in range(flood)
        )
    assert statuses == {303: DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS, 429: 50}
    assert rows(engine) == (DEFAULT_OPEN_LTI_LOGINS_PER_ADDRESS,) * 2
