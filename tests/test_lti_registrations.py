"""`normdive lti register`, `list` and `remove` through the real CLI, on both databases: a
registration is stored with its deployments, refused readably when malformed or taken, and
removed with everything that hangs from it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, insert, select
from typer.testing import CliRunner

from normdive.cli import app
from normdive.lti.registrations import PrerequisiteMode, all_registrations, find
from normdive.store.tables import LtiDeployment, LtiNonce, LtiPlatformKeySet, LtiState

pytestmark = pytest.mark.both_databases

runner = CliRunner()

ISSUER = "https://lms.example.edu"
CLIENT_ID = "10000000000042"
REGISTER = [
    "lti",
    "register",
    "--issuer",
    ISSUER,
    "--client-id",
    CLIENT_ID,
    "--auth-login-url",
    "https://lms.example.edu/api/lti/authorize_redirect",
    "--token-url",
    "https://lms.example.edu/login/oauth2/token",
    "--jwks-url",
    "https://lms.example.edu/api/lti/security/jwks",
    "--deployment-id",
    "1:abc",
    "--deployment-id",
    "2:def",
]


def _invoke(database_url: str, *args: str) -> tuple[int, str]:
    # No NORMDIVE_SECRET_KEY: registering signs no cookie.
    result = runner.invoke(
        app, list(args), env={"DATABASE_URL": database_url, "NORMDIVE_SECRET_KEY": None}
    )
    return result.exit_code, result.output


def test_register_stores_the_platform_with_its_deployments(
    database_url: str, engine: Engine
) -> None:
    code, output = _invoke(database_url, *REGISTER)
    assert code == 0, output
    assert "deployment ids: 1:abc, 2:def" in output
    registration = find(engine, ISSUER, CLIENT_ID)
    assert registration is not None
    assert registration.deployment_ids == ("1:abc", "2:def")
    assert registration.prerequisite_mode is PrerequisiteMode.PLATFORM
    assert registration.jwks_url == "https://lms.example.edu/api/lti/security/jwks"
    # With one registration for the issuer, a login that names no client id finds it.
    assert find(engine, ISSUER, None) == registration


def test_list_shows_every_registration(database_url: str) -> None:
    assert _invoke(database_url, "lti", "list") == (0, "No platform is registered.\n")
    assert _invoke(database_url, *REGISTER)[0] == 0
    other = [*REGISTER, "--prerequisite", "report"]
    other[other.index(CLIENT_ID)] = "other-client"
    assert _invoke(database_url, *other)[0] == 0
    code, output = _invoke(database_url, "lti", "list")
    assert code == 0
    assert output.count(f"issuer:         {ISSUER}") == 2
    assert f"client id:      {CLIENT_ID}" in output
    assert "client id:      other-client" in output
    assert "8.5 checked by: report" in output


def test_the_same_issuer_and_client_id_twice_is_refused(database_url: str, engine: Engine) -> None:
    assert _invoke(database_url, *REGISTER)[0] == 0
    code, output = _invoke(database_url, *REGISTER)
    assert code == 1
    assert "is registered already" in output
    assert len(all_registrations(engine)) == 1


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--jwks-url", "http://lms.example.edu/jwks", "must be https"),
        ("--token-url", "not a url", "not an absolute URL"),
        ("--auth-login-url", "https://lms.example.edu/auth#x", "has a fragment"),
        ("--prerequisite", "sometimes", "prerequisite_mode"),
        ("--issuer", "   ", "issuer"),
    ],
)
def test_a_malformed_registration_is_refused_and_stores_nothing(
    database_url: str, engine: Engine, option: str, value: str, message: str
) -> None:
    args = [*REGISTER]
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    code, output = _invoke(database_url, *args)
    assert code == 1
    assert "Not registered" in output
    assert message in output
    assert all_registrations(engine) == []


def test_plain_http_is_accepted_for_a_platform_on_this_machine(database_url: str) -> None:
    args = [*REGISTER]
    args[args.index("--jwks-url") + 1] = "http://127.0.0.1:8765/jwks"
    assert _invoke(database_url, *args)[0] == 0


def test_remove_takes_the_deployments_logins_and_cached_keys_with_it(
    database_url: str, engine: Engine
) -> None:
    assert _invoke(database_url, *REGISTER)[0] == 0
    registration = find(engine, ISSUER, CLIENT_ID)
    assert registration is not None
    later = datetime.now(UTC) + timedelta(minutes=5)
    with engine.begin() as connection:
        connection.execute(
            insert(LtiState).values(
                state="s" * 43,
                registration_id=registration.id,
                nonce="n" * 43,
                target_link_uri="https://tool.example/lti/launch",
                expires_at=later,
            )
        )
        connection.execute(
            insert(LtiNonce).values(
                nonce="n" * 43, registration_id=registration.id, expires_at=later
            )
        )
        connection.execute(
            insert(LtiPlatformKeySet).values(
                registration_id=registration.id, key_set={"keys": []}, fetched_at=later
            )
        )
    code, output = _invoke(
        database_url, "lti", "remove", "--issuer", ISSUER, "--client-id", CLIENT_ID
    )
    assert code == 0, output
    assert all_registrations(engine) == []
    with engine.connect() as connection:
        for table in (LtiDeployment, LtiState, LtiNonce, LtiPlatformKeySet):
            assert connection.execute(select(func.count()).select_from(table)).scalar_one() == 0


def test_removing_what_is_not_registered_says_so(database_url: str) -> None:
    code, output = _invoke(database_url, "lti", "remove", "--issuer", ISSUER, "--client-id", "x")
    assert code == 1
    assert "Nothing removed: no registration for issuer" in output
