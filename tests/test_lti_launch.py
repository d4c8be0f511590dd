"""The LTI 1.3 login and launch, through the app, against a platform made here with real RSA
keys and its key set served over real HTTP (tests/lti_platform.py).

A good launch signs the platform's user in as one learner (the same again from another
browser), on any worker. Every refusal the issue lists (a replayed id_token, an expired one, a
wrong aud, an unknown kid after one refresh, alg none, HS256 with the public key, a foreign
deployment, a state from another browser) and the others the validation makes is a readable
page with a 4xx and a log line, and stores nothing.

A hostile client's launches cost little: made-up key ids cost the platform one fetch of its
key set per cooldown (launches that miss together share it), JSON nested thousands deep is a
malformed token or key set, and a claim too long for its column is refused by name, on both
databases. The key set's cooldown runs on a clock the tests move (MovableClock)."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, func, select
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SettingsFactory, client_factory
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    SCORE_SCOPE,
    TOOL_ORIGIN,
    KeySetServer,
    MovableClock,
    browser,
    hs256_with_public_key,
    launch,
    launch_claims,
    login,
    login_params,
    new_key,
    register_platform,
    signed,
    signed_payload,
    unsigned,
)
from normdive.config import Settings
from normdive.lti import platform_keys
from normdive.lti.platform_json import MAX_JSON_DEPTH
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import Registration
from normdive.store.tables import (
    LTI_IDENTIFIER_LENGTH,
    LTI_URL_LENGTH,
    EventRecord,
    Learner,
    LtiContextMember,
    LtiGradeTarget,
    LtiLearner,
    LtiNonce,
    LtiPlatformKeySet,
    LtiScoreOutbox,
    LtiState,
)
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.infrastructure.language import LAUNCH_COOKIE

ROUTES_LOGGER = "normdive.web.routes.lti"
# What a launch may store; a refused one changes none of them.
LAUNCH_TABLES = (
    Learner,
    EventRecord,
    LtiLearner,
    LtiContextMember,
    LtiState,
    LtiNonce,
    LtiGradeTarget,
    LtiScoreOutbox,
)


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    # 8.5 as an LMS learner meets it: not done until the launch says so.
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture(autouse=True)
def key_set_clock(monkeypatch: pytest.MonkeyPatch) -> MovableClock:
    """The clock the key set's refetch cooldown runs on, moved by the tests that need it."""
    clock = MovableClock()
    monkeypatch.setattr(platform_keys, "clock", clock)
    return clock


@pytest.fixture
def registration(engine: Engine, jwks: KeySetServer) -> Registration:
    return register_platform(engine, jwks.url)


@pytest.fixture
def make_browser(app: Starlette) -> Iterator[Callable[[], TestClient]]:
    """Browsers on the tool's https origin (lti_platform.browser), each a learner of its own."""
    with client_factory(app, TestClient, base_url=TOOL_ORIGIN) as make:
        yield make


def stored(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            table.__tablename__: connection.execute(
                select(func.count()).select_from(table)
            ).scalar_one()
            for table in LAUNCH_TABLES
        }


def learner_of(client: TestClient) -> str:
    cookie = client.cookies.get(COOKIE_NAME)
    assert cookie is not None
    return cookie.split(".")[0]


# --- a good launch ----------------------------------------------------------------------------


@pytest.mark.both_databases
def test_a_launch_signs_the_user_in_as_one_learner(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
) -> None:
    client = make_browser()
    asked = login(client)
    assert asked.query["redirect_uri"] == f"{TOOL_ORIGIN}/lti/launch"
    assert asked.query["client_id"] == CLIENT_ID
    assert asked.query["response_mode"] == "form_post"
    assert asked.query["lti_message_hint"] == "resource-link-1"
    response = launch(client, signed(launch_claims(asked.nonce), platform_key), asked.state)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/"
    cookies = response.headers.get_list("set-cookie")
    learner_cookie = next(c for c in cookies if c.startswith(f"{COOKIE_NAME}="))
    for attribute in ("SameSite=none", "Secure", "Partitioned", "HttpOnly"):
        assert attribute.lower() in learner_cookie.lower()
    # The login's state cookie is deleted.
    assert any(
        c.startswith(f"normdive_lti_state_{asked.state}=") and "Max-Age=0" in c for c in cookies
    )
    # The registration lets the platform gate 8.5, so the lesson is open.
    page = client.get("/")
    assert page.status_code == 200
    assert 'id="locked-title"' not in page.text
    first = learner_of(client)
    counts = stored(engine)
    assert counts["lti_learners"] == 1
    assert counts["lti_context_members"] == 1
    assert counts["lti_states"] == counts["lti_nonces"] == 0

    # The same user from another device: the same learner.
    other = make_browser()
    again = login(other)
    response = launch(other, signed(launch_claims(again.nonce), platform_key), again.state)
    assert response.status_code == 303, response.text
    assert learner_of(other) == first
    assert stored(engine)["lti_learners"] == 1


def test_login_by_post_works_too(
    make_browser: Callable[[], TestClient], registration: Registration, platform_key: RSAKey
) -> None:
    client = make_browser()
    asked = login(client, method="POST")
    response = launch(client, signed(launch_claims(asked.nonce), platform_key), asked.state)
    assert response.status_code == 303, response.text


@pytest.mark.both_databases
def test_login_and_launch_may_land_on_different_workers(
    settings: Settings, registration: Registration, platform_key: RSAKey
) -> None:
    with browser(create_app(settings)) as first, browser(create_app(settings)) as second:
        asked = login(first)
        second.cookies = first.cookies
        token = signed(launch_claims(asked.nonce), platform_key)
        assert launch(second, token, asked.state).status_code == 303


def test_the_key_set_is_fetched_once_and_shared(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
) -> None:
    for _ in range(3):
        client = make_browser()
        asked = login(client)
        token = signed(launch_claims(asked.nonce), platform_key)
        assert launch(client, token, asked.state).status_code == 303
    assert jwks.fetches == 1


def launched_with(client: TestClient, key: RSAKey) -> httpx.Response:
    """A fresh login, then a launch whose id_token `key` signed (under its own kid)."""
    asked = login(client)
    return launch(client, signed(launch_claims(asked.nonce), key), asked.state)


def test_a_rotated_platform_key_is_fetched_once_and_accepted(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    key_set_clock: MovableClock,
) -> None:
    client = make_browser()
    assert launched_with(client, platform_key).status_code == 303
    rotated = new_key("platform-key-2")
    jwks.keys = [rotated]
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    assert launched_with(client, rotated).status_code == 303
    assert jwks.fetches == 2


def test_a_key_replaced_under_the_same_kid_is_fetched_again_and_accepted(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    key_set_clock: MovableClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_browser()
    assert launched_with(client, platform_key).status_code == 303
    # The platform makes a new key and publishes it under the old key's id.
    replaced = new_key(str(platform_key.kid))
    jwks.keys = [replaced]
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    assert launched_with(client, replaced).status_code == 303
    assert jwks.fetches == 2
    # A token signed by neither key, under that id, fetches nothing more within the cooldown.
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launched_with(client, new_key(str(platform_key.kid)))
    assert_refused(response, 401, "bad_signature", "does not verify", caplog)
    assert jwks.fetches == 2


def test_a_forged_signature_under_a_known_kid_fetches_at_most_once_a_cooldown(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    key_set_clock: MovableClock,
) -> None:
    client = make_browser()
    assert launched_with(client, platform_key).status_code == 303
    impostor = new_key(str(platform_key.kid))
    assert all(launched_with(client, impostor).status_code == 401 for _ in range(5))
    assert jwks.fetches == 1  # the cooldown of the first fetch still holds
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    assert all(launched_with(client, impostor).status_code == 401 for _ in range(5))
    assert jwks.fetches == 2  # one more look, which still finds the platform's own key


def test_an_expiry_within_the_clock_leeway_is_accepted(
    make_browser: Callable[[], TestClient], registration: Registration, platform_key: RSAKey
) -> None:
    client = make_browser()
    asked = login(client)
    claims = launch_claims(asked.nonce, exp=int(time.time()) - 30)
    assert launch(client, signed(claims, platform_key), asked.state).status_code == 303


# --- refusals ---------------------------------------------------------------------------------


def assert_refused(
    response: httpx.Response,
    status: int,
    code: str,
    words: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "This LTI launch was refused" in response.text
    assert words in response.text.replace("&#39;", "'")
    assert f"<code>{code}</code>" in response.text
    assert any(
        record.name == ROUTES_LOGGER and code in record.getMessage() for record in caplog.records
    )
    assert COOKIE_NAME not in response.headers.get("set-cookie", "")


def refused_launch(
    client: TestClient,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    token: str,
    state: str,
    refusal: tuple[int, str, str],
) -> httpx.Response:
    """Launch with `token`; the answer is the readable refusal (status, code, words), logged,
    and the launch stored nothing."""
    before = stored(engine)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(client, token, state)
    assert_refused(response, *refusal, caplog)
    assert stored(engine) == before
    return response


Tamper = Callable[[str, RSAKey], tuple[str, dict[str, Any]]]


def nested(depth: int) -> Any:
    """A JSON value of arrays `depth` deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _claims_with(**overrides: Any) -> Callable[[str, RSAKey], str]:
    return lambda nonce, key: signed(launch_claims(nonce, **overrides), key)


def _claims_from_now(claim: str, offset_s: int) -> Callable[[str, RSAKey], str]:
    """A token whose `claim` is `offset_s` from the moment it is signed, not from when this
    module was collected: a long run may reach the test many minutes after collection."""
    return lambda nonce, key: signed(
        launch_claims(nonce, **{claim: int(time.time()) + offset_s}), key
    )


REFUSED_TOKENS: list[tuple[str, Callable[[str, RSAKey], str], int, str, str]] = [
    (
        "expired",
        _claims_from_now("exp", -120),
        401,
        "expired",
        "has expired",
    ),
    ("wrong aud", _claims_with(aud="someone-else"), 401, "wrong_aud", "does not name this tool"),
    (
        "several audiences without azp",
        _claims_with(aud=[CLIENT_ID, "another-tool"]),
        401,
        "wrong_azp",
        "authorized party",
    ),
    (
        "azp of another tool",
        _claims_with(azp="another-tool"),
        401,
        "wrong_azp",
        "authorized party",
    ),
    ("wrong iss", _claims_with(iss="https://evil.example"), 401, "wrong_iss", "issuer"),
    ("wrong nonce", _claims_with(nonce="not-the-nonce"), 401, "wrong_nonce", "nonce"),
    ("no sub", _claims_with(sub=None), 401, "missing_claim", "sub"),
    (
        "issued in the future",
        _claims_from_now("iat", 600),
        401,
        "wrong_iat",
        "in the future",
    ),
    (
        "alg none",
        lambda nonce, key: unsigned(launch_claims(nonce), str(key.kid)),
        401,
        "algorithm_refused",
        "alg none",
    ),
    (
        "HS256 with the public key",
        lambda nonce, key: hs256_with_public_key(launch_claims(nonce), key),
        401,
        "algorithm_refused",
        "HS256",
    ),
    (
        "signed by another key under the platform's kid",
        lambda nonce, key: signed(
            launch_claims(nonce), RSAKey.generate_key(2048, parameters={"kid": key.kid})
        ),
        401,
        "bad_signature",
        "does not verify",
    ),
    (
        "foreign deployment",
        _claims_with(lti_deployment_id="deployment-of-someone-else"),
        403,
        "unregistered_deployment",
        "not registered here",
    ),
    (
        "another message type",
        _claims_with(lti_message_type="LtiStartProctoring"),
        400,
        "unsupported_message_type",
        "LtiResourceLinkRequest",
    ),
    ("version 1.1", _claims_with(lti_version="1.1"), 400, "unsupported_version", "1.3.0"),
    (
        "another target link",
        _claims_with(lti_target_link_uri="https://tool.test/elsewhere"),
        400,
        "wrong_target_link_uri",
        "target link URI",
    ),
    (
        "no resource link",
        _claims_with(lti_resource_link=None),
        401,
        "missing_claim",
        "resource link",
    ),
    ("not a JWT", lambda nonce, key: "not.a.jwt", 400, "malformed_id_token", "not a signed JWT"),
    (
        "claims nested 10,000 deep",
        lambda nonce, key: signed_payload(b"[" * 10_000 + b"]" * 10_000, key),
        400,
        "malformed_id_token",
        "not a set of JSON claims",
    ),
    (
        "a claim nested past the depth limit",
        _claims_with(nested=nested(MAX_JSON_DEPTH)),
        400,
        "malformed_id_token",
        f"deeper than {MAX_JSON_DEPTH} levels",
    ),
    (
        "oversized",
        lambda nonce, key: signed(launch_claims(nonce, padding="x" * 40_000), key),
        413,
        "id_token_too_large",
        "at most 32 KiB",
    ),
]


@pytest.mark.parametrize(
    ("case", "token_for", "status", "code", "words"),
    REFUSED_TOKENS,
    ids=[case[0] for case in REFUSED_TOKENS],
)
def test_a_bad_id_token_is_refused_readably_and_stores_nothing(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    case: str,
    token_for: Callable[[str, RSAKey], str],
    status: int,
    code: str,
    words: str,
) -> None:
    client = make_browser()
    asked = login(client)
    token = token_for(asked.nonce, platform_key)
    refused_launch(client, engine, caplog, token, asked.state, (status, code, words))


@pytest.mark.both_databases
def test_a_replayed_id_token_is_refused(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_browser()
    asked = login(client)
    token = signed(launch_claims(asked.nonce), platform_key)
    assert launch(client, token, asked.state).status_code == 303
    before = stored(engine)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        # As it was: its state was used up with it.
        client.cookies.set(f"normdive_lti_state_{asked.state}", asked.state, path="/lti/launch")
        replayed = launch(client, token, asked.state)
        assert_refused(replayed, 400, "unknown_state", "used already", caplog)
        # With a fresh login's state: the old token's nonce is not the new login's.
        fresh = login(client)
        after_login = stored(engine)
        replayed = launch(client, token, fresh.state)
        assert_refused(replayed, 401, "wrong_nonce", "nonce", caplog)
    assert stored(engine) == after_login
    assert before["learners"] == after_login["learners"]


def test_an_unknown_kid_is_fetched_again_once_then_refused(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    jwks: KeySetServer,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    key_set_clock: MovableClock,
) -> None:
    client = make_browser()
    asked = login(client)
    stranger = new_key("kid-nobody-published")
    before = stored(engine)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(client, signed(launch_claims(asked.nonce), stranger), asked.state)
    assert_refused(response, 401, "unknown_kid", "even fetched again just now", caplog)
    assert jwks.fetches == 1  # nothing cached before: the one fetch is the refresh
    assert stored(engine) == before

    # With a key set cached, after the cooldown: exactly one more fetch, then refused.
    good = login(client)
    client_key = jwks.keys[0]
    assert (
        launch(client, signed(launch_claims(good.nonce), client_key), good.state).status_code == 303
    )
    fetches = jwks.fetches
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    asked = login(client)
    response = launch(client, signed(launch_claims(asked.nonce), stranger), asked.state)
    assert response.status_code == 401
    assert jwks.fetches == fetches + 1


COOLDOWN_S = int(platform_keys.JWKS_REFETCH_COOLDOWN_S)
COOLDOWN_WORDS = f"once every {platform_keys.JWKS_REFETCH_COOLDOWN_S:g} s"


def made_up_kid(claims: dict[str, Any], key: RSAKey) -> str:
    """The claims signed by `key` under a key id nobody published."""
    return signed(claims, key, kid=f"made-up-{uuid.uuid4()}")


def test_made_up_kids_cost_the_platform_one_fetch_per_cooldown(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    key_set_clock: MovableClock,
) -> None:
    client = make_browser()
    good = login(client)
    assert (
        launch(client, signed(launch_claims(good.nonce), platform_key), good.state).status_code
        == 303
    )
    assert jwks.fetches == 1
    # One public login's state serves any number of refused launches (a refusal keeps it).
    asked = login(client)
    claims = launch_claims(asked.nonce)
    before = stored(engine)
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        first = launch(client, made_up_kid(claims, platform_key), asked.state)
        assert_refused(first, 401, "unknown_kid", "even fetched again just now", caplog)
        # The platform is slow now: a launch that fetched would wait a second for it.
        jwks.delay_s = 1.0
        for _ in range(29):
            response = launch(client, made_up_kid(claims, platform_key), asked.state)
            assert_refused(response, 401, "unknown_kid", COOLDOWN_WORDS, caplog)
            assert 1 <= int(response.headers["retry-after"]) <= COOLDOWN_S
    assert jwks.fetches == 2
    assert stored(engine) == before

    # The platform rotates its key: refused until the cooldown ends, then taken at once.
    jwks.delay_s = 0.0
    rotated = new_key("platform-key-2")
    jwks.keys = [platform_key, rotated]
    assert launch(client, signed(claims, rotated), asked.state).status_code == 401
    assert jwks.fetches == 2
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    assert launch(client, signed(claims, rotated), asked.state).status_code == 303
    assert jwks.fetches == 3


def test_the_first_launch_ever_fetches_a_rotated_key_at_once(
    make_browser: Callable[[], TestClient], registration: Registration, jwks: KeySetServer
) -> None:
    rotated = new_key("platform-key-2")
    jwks.keys = [rotated]
    client = make_browser()
    asked = login(client)
    assert launch(client, signed(launch_claims(asked.nonce), rotated), asked.state).status_code == (
        303
    )
    assert jwks.fetches == 1


def test_a_failed_fetch_starts_the_cooldown_too(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    caplog: pytest.LogCaptureFixture,
    key_set_clock: MovableClock,
) -> None:
    client = make_browser()
    jwks.status = 500
    asked = login(client)
    token = signed(launch_claims(asked.nonce), platform_key)
    assert launch(client, token, asked.state).status_code == 401
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(client, token, asked.state)
    assert_refused(response, 401, "jwks_unreachable", "tries at most " + COOLDOWN_WORDS, caplog)
    assert 1 <= int(response.headers["retry-after"]) <= COOLDOWN_S
    assert jwks.fetches == 1
    jwks.status = 200
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    assert launch(client, token, asked.state).status_code == 303
    assert jwks.fetches == 2


LAUNCHES_AT_ONCE = 8


def _at_once(engine: Engine, registration: Registration, kids: list[str]) -> list[object]:
    """signing_key for each kid, each in a thread of its own, all at once: the key or the
    Refusal."""
    start = threading.Barrier(len(kids))

    def one(kid: str) -> object:
        start.wait()
        try:
            return platform_keys.signing_key(engine, registration, kid)
        except Refusal as refusal:
            return refusal

    with ThreadPoolExecutor(max_workers=len(kids)) as pool:
        return list(pool.map(one, kids))


@pytest.mark.both_databases
def test_launches_that_miss_at_once_share_one_fetch(
    registration: Registration,
    jwks: KeySetServer,
    engine: Engine,
    key_set_clock: MovableClock,
) -> None:
    rotated = new_key("platform-key-2")
    jwks.keys = [rotated]
    jwks.delay_s = 0.3
    # Nothing stored yet: every launch misses; one fetches, the others wait and share it.
    found = _at_once(engine, registration, [str(rotated.kid)] * LAUNCHES_AT_ONCE)
    assert all(isinstance(key, RSAKey) and key.kid == rotated.kid for key in found)
    assert jwks.fetches == 1

    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    made_up = [f"made-up-{uuid.uuid4()}" for _ in range(LAUNCHES_AT_ONCE)]
    refused = _at_once(engine, registration, made_up)
    assert all(isinstance(r, Refusal) and r.code == "unknown_kid" for r in refused)
    assert jwks.fetches == 2


DEEP_KEY_SETS: list[tuple[str, Callable[[RSAKey], bytes]]] = [
    ("nested 50,000 deep", lambda key: b'{"keys":' + b"[" * 50_000),
    ("closed, 10,000 deep", lambda key: b'{"keys":' + b"[" * 10_000 + b"]" * 10_000 + b"}"),
    (
        # The platform's own key, with a member nested past the depth limit.
        "a key nested past the depth limit",
        lambda key: json.dumps(
            {"keys": [{**key.as_dict(private=False), "extra": nested(MAX_JSON_DEPTH)}]}
        ).encode(),
    ),
]


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("case", "body_for"), DEEP_KEY_SETS, ids=[case[0] for case in DEEP_KEY_SETS]
)
def test_a_key_set_nested_too_deep_is_refused_readably(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    case: str,
    body_for: Callable[[RSAKey], bytes],
) -> None:
    jwks.raw_body = body_for(platform_key)
    client = make_browser()
    asked = login(client)
    token = signed(launch_claims(asked.nonce), platform_key)
    refusal = (401, "jwks_invalid", "not a JSON Web Key Set")
    refused_launch(client, engine, caplog, token, asked.state, refusal)
    with engine.connect() as connection:
        kept = connection.execute(select(func.count()).select_from(LtiPlatformKeySet))
        assert kept.scalar_one() == 0


def _endpoint(**urls: str) -> dict[str, Any]:
    return {"scope": [SCORE_SCOPE], **urls}


LINEITEM_PREFIX = "https://platform.example.edu/lineitems/"
# (case, the launch's claims' overrides for a value of `length` characters, the claim's name
# in the refusal, its column's limit)
STORED_CLAIMS: list[tuple[str, Callable[[int], dict[str, Any]], str, int]] = [
    ("sub", lambda n: {"sub": "u" * n}, "(sub)", LTI_IDENTIFIER_LENGTH),
    (
        "resource link id",
        lambda n: {"lti_resource_link": {"id": "r" * n}},
        "resource_link id",
        LTI_IDENTIFIER_LENGTH,
    ),
    (
        "lineitem",
        lambda n: {
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": _endpoint(
                lineitem=LINEITEM_PREFIX + "l" * (n - len(LINEITEM_PREFIX))
            )
        },
        "endpoint lineitem",
        LTI_URL_LENGTH,
    ),
    (
        "lineitems",
        lambda n: {
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": _endpoint(
                lineitems=LINEITEM_PREFIX + "l" * (n - len(LINEITEM_PREFIX))
            )
        },
        "endpoint lineitems",
        LTI_URL_LENGTH,
    ),
]


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("case", "claims_of_length", "named", "limit"),
    STORED_CLAIMS,
    ids=[case[0] for case in STORED_CLAIMS],
)
def test_a_claim_too_long_for_its_column_is_refused_by_name(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    case: str,
    claims_of_length: Callable[[int], dict[str, Any]],
    named: str,
    limit: int,
) -> None:
    client = make_browser()
    asked = login(client)
    token = signed(launch_claims(asked.nonce, **claims_of_length(limit + 1)), platform_key)
    response = refused_launch(
        client, engine, caplog, token, asked.state, (400, "claim_too_long", named)
    )
    assert f"{limit + 1} characters long; this tool keeps at most {limit}" in response.text

    # At the limit: taken, and kept whole where the launch keeps it.
    token = signed(launch_claims(asked.nonce, **claims_of_length(limit)), platform_key)
    assert launch(client, token, asked.state).status_code == 303
    if case in ("lineitem", "lineitems"):
        with engine.connect() as connection:
            kept = connection.execute(select(getattr(LtiGradeTarget, f"{case}_url"))).scalar_one()
        assert len(kept) == limit


@pytest.mark.both_databases
def test_a_grade_target_keeps_sub_and_resource_link_at_their_limit(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
) -> None:
    client = make_browser()
    asked = login(client)
    claims = launch_claims(
        asked.nonce,
        sub="u" * LTI_IDENTIFIER_LENGTH,
        lti_resource_link={"id": "r" * LTI_IDENTIFIER_LENGTH},
        **{
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": _endpoint(
                lineitem=LINEITEM_PREFIX + "l" * (LTI_URL_LENGTH - len(LINEITEM_PREFIX)),
                lineitems=LINEITEM_PREFIX + "s" * (LTI_URL_LENGTH - len(LINEITEM_PREFIX)),
            )
        },
    )
    assert launch(client, signed(claims, platform_key), asked.state).status_code == 303
    with engine.connect() as connection:
        target = connection.execute(select(LtiGradeTarget)).one()
    assert len(target.user_id) == len(target.resource_link_id) == LTI_IDENTIFIER_LENGTH
    assert len(target.lineitem_url) == len(target.lineitems_url) == LTI_URL_LENGTH


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("case", "overrides"),
    [
        ("sub", {"sub": "user\x00one"}),
        ("resource link id", {"lti_resource_link": {"id": "link\x00one"}}),
        (
            "lineitem",
            {
                "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": _endpoint(
                    lineitem=LINEITEM_PREFIX + "\x00"
                )
            },
        ),
    ],
)
def test_a_stored_claim_with_control_characters_is_refused_readably(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    case: str,
    overrides: dict[str, Any],
) -> None:
    client = make_browser()
    asked = login(client)
    token = signed(launch_claims(asked.nonce, **overrides), platform_key)
    refusal = (400, "claim_malformed", "cannot be printed")
    refused_launch(client, engine, caplog, token, asked.state, refusal)


@pytest.mark.both_databases
def test_a_state_from_another_browser_is_refused(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    victim, attacker = make_browser(), make_browser()
    asked = login(victim)
    token = signed(launch_claims(asked.nonce), platform_key)
    before = stored(engine)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(attacker, token, asked.state)
    assert_refused(response, 403, "state_from_another_browser", "another browser", caplog)
    assert stored(engine) == before
    # The browser that logged in can still launch with it.
    assert launch(victim, token, asked.state).status_code == 303


def test_a_key_set_that_cannot_be_fetched_is_refused_readably(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    jwks: KeySetServer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    key_set_clock: MovableClock,
) -> None:
    client = make_browser()
    jwks.status = 500
    asked = login(client)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(client, signed(launch_claims(asked.nonce), platform_key), asked.state)
    assert_refused(response, 401, "jwks_status", "answered 500", caplog)

    jwks.status = 200
    jwks.delay_s = 2.0
    key_set_clock.advance(platform_keys.JWKS_REFETCH_COOLDOWN_S)
    monkeypatch.setattr(platform_keys, "JWKS_FETCH_TIMEOUT_S", 0.2)
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(client, signed(launch_claims(asked.nonce), platform_key), asked.state)
    assert_refused(response, 401, "jwks_unreachable", "could not be fetched", caplog)


# --- the login's refusals ---------------------------------------------------------------------

LOGIN_REFUSALS = [
    ("unregistered issuer", {"iss": "https://nobody.example"}, "unregistered_platform"),
    ("unknown client id", {"client_id": "nobody"}, "unregistered_platform"),
    ("no login hint", {"login_hint": ""}, "login_parameter_missing"),
    ("no target", {"target_link_uri": ""}, "login_parameter_missing"),
    (
        "a target on another site",
        {"target_link_uri": "https://evil.example/lti/launch"},
        "foreign_target_link_uri",
    ),
    ("unregistered deployment", {"lti_deployment_id": "elsewhere"}, "unregistered_deployment"),
]


@pytest.mark.parametrize(
    ("case", "overrides", "code"), LOGIN_REFUSALS, ids=[case[0] for case in LOGIN_REFUSALS]
)
def test_a_bad_login_is_refused_readably_and_stores_nothing(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
    case: str,
    overrides: dict[str, str],
    code: str,
) -> None:
    client = make_browser()
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = client.get("/lti/login", params=login_params(**overrides))
    assert response.status_code == 400, response.text
    assert f"<code>{code}</code>" in response.text
    assert any(code in record.getMessage() for record in caplog.records)
    assert stored(engine)["lti_states"] == 0
    assert "set-cookie" not in response.headers


def test_a_launch_without_a_login_is_refused(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_browser()
    with caplog.at_level(logging.WARNING, logger=ROUTES_LOGGER):
        response = launch(client, signed(launch_claims("n"), platform_key), "made-up-state")
    assert_refused(response, 400, "unknown_state", "not one this tool issued", caplog)


def test_deployment_id_claim_is_checked_even_without_a_login_hint_for_it(
    make_browser: Callable[[], TestClient], registration: Registration, platform_key: RSAKey
) -> None:
    # The login named no deployment (it is optional there); the launch's claim still counts.
    client = make_browser()
    asked = login(client, lti_deployment_id="")
    token = signed(launch_claims(asked.nonce, lti_deployment_id="elsewhere"), platform_key)
    assert launch(client, token, asked.state).status_code == 403
    asked = login(client, lti_deployment_id="")
    token = signed(launch_claims(asked.nonce), platform_key)
    assert launch(client, token, asked.state).status_code == 303
    assert DEPLOYMENT_ID in registration.deployment_ids


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("where", "value"),
    [("client_id", "client\x00id"), ("login_hint", "hint\x01"), ("state", "state\x00")],
)
def test_control_characters_are_refused_readably_on_both_databases(
    make_browser: Callable[[], TestClient], registration: Registration, where: str, value: str
) -> None:
    client = make_browser()
    if where == "state":
        response = launch(client, "a.b.c", value)
    else:
        response = client.get("/lti/login", params=login_params(**{where: value}))
    assert response.status_code == 400, response.text
    assert "This LTI launch was refused" in response.text


# --- the launch's locale ------------------------------------------------------------------


def test_a_launch_with_a_locale_opens_the_lesson_in_that_language(
    make_browser: Callable[[], TestClient], registration: Registration, platform_key: RSAKey
) -> None:
    client = make_browser()
    asked = login(client)
    claims = launch_claims(asked.nonce, lti_launch_presentation={"locale": "de-DE"})
    response = launch(client, signed(claims, platform_key), asked.state)
    assert response.status_code == 303, response.text
    kept = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith(LAUNCH_COOKIE + "=")
    )
    assert "Partitioned" in kept and "Secure" in kept
    page = client.get("/", headers={"Accept-Language": "en"})
    assert '<html lang="de" dir="ltr"' in page.text
    assert "Layer-Norm und Residual\u00adverbindungen" in page.text  # a soft hyphen in it

    # A later launch naming no locale forgets it.
    asked = login(client)
    claims = launch_claims(asked.nonce, lti_launch_presentation={"return_url": None})
    launch(client, signed(claims, platform_key), asked.state)
    assert '<html lang="en" dir="ltr"' in client.get("/").text


@pytest.mark.parametrize("presentation", [{"locale": 7}, {"locale": "x" * 36}, "de", None])
def test_a_malformed_launch_locale_is_ignored(
    make_browser: Callable[[], TestClient],
    registration: Registration,
    platform_key: RSAKey,
    presentation: Any,
) -> None:
    client = make_browser()
    asked = login(client)
    claims = launch_claims(asked.nonce, lti_launch_presentation=presentation)
    assert launch(client, signed(claims, platform_key), asked.state).status_code == 303
    assert '<html lang="en" dir="ltr"' in client.get("/").text
