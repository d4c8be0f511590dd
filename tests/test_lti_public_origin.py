"""NORMDIVE_PUBLIC_ORIGIN: the origin the tool's URLs are built from. Set, a request's Host
(which any client may make up) no longer reaches the URLs the tool gives a platform: its
Canvas configuration, the login's redirect_uri, the printed invitation and instructor link.
Unset, they follow the request, as a proxy forwards it. A malformed value is refused with its
variable's name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SECRET_KEY, SettingsFactory
from lti_platform import TOOL_ORIGIN, KeySetServer, login, register_platform
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.web.app import create_app

MADE_UP_HOST = "https://evil.example"


def client_at(app: Starlette, origin: str) -> TestClient:
    return TestClient(app, base_url=origin, follow_redirects=False)


@pytest.fixture
def configured(make_settings: SettingsFactory) -> Starlette:
    return create_app(make_settings(public_origin=TOOL_ORIGIN, dev_prerequisite_done=False))


@pytest.fixture
def registered(engine: Engine, jwks: KeySetServer) -> Iterator[None]:
    register_platform(engine, jwks.url)
    yield


def test_the_canvas_configuration_names_the_configured_origin(configured: Starlette) -> None:
    with client_at(configured, MADE_UP_HOST) as client:
        config = client.get("/lti/canvas.json").json()
    assert config["oidc_initiation_url"] == f"{TOOL_ORIGIN}/lti/login"
    assert config["target_link_uri"] == f"{TOOL_ORIGIN}/lti/launch"
    assert config["public_jwk_url"] == f"{TOOL_ORIGIN}/lti/jwks"
    assert config["extensions"][0]["domain"] == "tool.test"
    assert "evil" not in str(config)


def test_unset_the_urls_follow_the_request(make_settings: SettingsFactory) -> None:
    app = create_app(make_settings())
    with client_at(app, "https://other.test:8443") as client:
        config = client.get("/lti/canvas.json").json()
    assert config["target_link_uri"] == "https://other.test:8443/lti/launch"


def test_the_login_redirects_to_the_configured_launch_url(
    configured: Starlette, registered: None
) -> None:
    with client_at(configured, MADE_UP_HOST) as client:
        asked = login(client)
    assert asked.query["redirect_uri"] == f"{TOOL_ORIGIN}/lti/launch"


def test_a_login_for_another_origin_is_refused_whatever_the_host_says(
    make_settings: SettingsFactory, registered: None
) -> None:
    app = create_app(make_settings(public_origin="https://d9.example.edu"))
    # The request names the target's host; the configured origin is another.
    with client_at(app, TOOL_ORIGIN) as client:
        answer = client.get(
            "/lti/login",
            params={
                "iss": "https://platform.example.edu",
                "login_hint": "hint",
                "target_link_uri": f"{TOOL_ORIGIN}/lti/launch",
                "client_id": "tool-client-7",
            },
        )
    assert answer.status_code == 400
    assert "https://d9.example.edu" in answer.text


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://d9.example.edu", "https://d9.example.edu"),
        ("https://D9.Example.EDU/", "https://d9.example.edu"),
        (" https://d9.example.edu:8443 ", "https://d9.example.edu:8443"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://[::1]:8443", "https://[::1]:8443"),
        # A default port is left out, as a browser's Origin header leaves it out.
        ("https://d9.example.edu:443", "https://d9.example.edu"),
        ("http://d9.example.edu:80/", "http://d9.example.edu"),
        ("http://d9.example.edu:443", "http://d9.example.edu:443"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
        ("", None),
        ("   ", None),
    ],
)
def test_settings_keep_an_origin_as_its_urls_begin(given: str, kept: str | None) -> None:
    settings = Settings.model_validate({"secret_key": SECRET_KEY, "public_origin": given})
    assert settings.public_origin == kept


@pytest.mark.parametrize(
    "given",
    [
        "d9.example.edu",
        "ftp://d9.example.edu",
        "https://d9.example.edu/lti",
        "https://d9.example.edu/?x=1",
        "https://d9.example.edu/#top",
        "https://user@d9.example.edu",
        "https://d9.example.edu:99999",
        "https://",
        "javascript:alert(1)",
        "https://bücher.example",  # browsers send it as https://xn--bcher-kva.example
    ],
)
def test_settings_refuse_what_is_not_an_origin(given: str) -> None:
    with pytest.raises(ValidationError, match="is not an origin: give https://host"):
        Settings.model_validate({"secret_key": SECRET_KEY, "public_origin": given})


def test_serve_names_a_malformed_public_origin() -> None:
    result = CliRunner().invoke(
        cli,
        ["serve"],
        env={
            "NORMDIVE_SECRET_KEY": SECRET_KEY,
            "DATABASE_URL": "sqlite://",
            "NORMDIVE_PUBLIC_ORIGIN": "https://d9.example.edu/lesson",
        },
    )
    assert result.exit_code == 2
    assert "NORMDIVE_PUBLIC_ORIGIN: 'https://d9.example.edu/lesson' is not an origin" in (
        result.output
    )
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", [["lti", "invite"], ["instructor-link"]])
def test_printed_urls_start_with_the_configured_origin(command: list[str]) -> None:
    environment = {"NORMDIVE_SECRET_KEY": SECRET_KEY, "NORMDIVE_PUBLIC_ORIGIN": TOOL_ORIGIN}
    printed = CliRunner().invoke(cli, command, env=environment)
    assert printed.exit_code == 0, printed.output
    assert printed.output.startswith(f"{TOOL_ORIGIN}/")
    # --base-url, when given, is what the operator asked for.
    given = CliRunner().invoke(cli, [*command, "--base-url", "https://x.test"], env=environment)
    assert given.output.startswith("https://x.test/")


@pytest.mark.parametrize("command", [["lti", "invite"], ["instructor-link"]])
def test_printed_urls_need_an_origin(command: list[str]) -> None:
    environment = {"NORMDIVE_SECRET_KEY": SECRET_KEY, "NORMDIVE_PUBLIC_ORIGIN": ""}
    missing = CliRunner().invoke(cli, command, env=environment)
    assert missing.exit_code == 2
    assert "--base-url https://host, or NORMDIVE_PUBLIC_ORIGIN" in missing.output
    wrong = CliRunner().invoke(
        cli, [*command, "--base-url", "https://x.test/path"], env=environment
    )
    assert wrong.exit_code == 2
    assert "'https://x.test/path' is not an origin: give https://host" in wrong.output
    assert "Traceback" not in missing.output + wrong.output


@pytest.mark.parametrize(
    ("origin", "status"),
    [(TOOL_ORIGIN, 303), ("http://tool.test", 403), (MADE_UP_HOST, 403)],
)
def test_behind_a_proxy_that_forwards_no_host_forms_from_the_public_origin_count(
    make_settings: SettingsFactory, origin: str, status: int
) -> None:
    # The server sees its own address as Host; the browser's Origin names the public origin.
    app = create_app(make_settings(public_origin=TOOL_ORIGIN))
    with client_at(app, "http://127.0.0.1:8000") as client:
        token = client.get("/api/state").json()["csrf_token"]
        answer = client.post(
            "/predict", data={"choice": "residual", "csrf_token": token}, headers={"Origin": origin}
        )
    assert answer.status_code == status
