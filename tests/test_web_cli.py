"""`normdive serve`: help text, and a loud, clear refusal when the settings are invalid."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from helpers import SECRET_KEY, migrated_sqlite_url
from normdive.cli import app
from normdive.config import SECRET_KEY_HOW_TO, Settings, settings_problems

SERVER_START_TIMEOUT_S = 60.0
# The console script installed beside this interpreter.
NORMDIVE = str(Path(sys.executable).parent / "normdive")


def clean_environment(**values: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("NORMDIVE_") and key != "DATABASE_URL"
    }
    env.update(values)
    return env


def test_serve_has_help() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--workers", "--reload", "NORMDIVE_SECRET_KEY"):
        assert option in result.output


@pytest.mark.slow
def test_serve_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    result = subprocess.run(
        [NORMDIVE, "serve", "--port", "9"],
        capture_output=True,
        text=True,
        env=clean_environment(DATABASE_URL=f"sqlite:///{tmp_path / 'x.sqlite3'}"),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "the settings are not valid" in result.stderr
    assert "NORMDIVE_SECRET_KEY: missing" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_names_a_secret_key_that_is_too_short() -> None:
    result = CliRunner().invoke(
        app, ["serve"], env={"NORMDIVE_SECRET_KEY": "short", "DATABASE_URL": "sqlite://"}
    )
    assert result.exit_code == 2
    assert "NORMDIVE_SECRET_KEY:" in result.output
    assert "32" in result.output


def imported_modules(importtime_log: str) -> set[str]:
    """The modules a `python -X importtime` run imported, from its log on stderr."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_log.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_help_imports_no_layer_and_no_torch() -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", NORMDIVE, "--help"],
        capture_output=True,
        text=True,
        env=clean_environment(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "record-runs" in result.stdout and "serve" in result.stdout
    loaded = imported_modules(result.stderr)
    assert "normdive.cli" in loaded
    assert {name for name in loaded if name.split(".")[0] == "torch"} == set()
    layers = {"normdive.web", "normdive.store", "normdive.training", "normdive.progress"}
    assert loaded & layers == set()


@pytest.mark.slow
def test_serve_serves_the_page_without_importing_torch(tmp_path: Path) -> None:
    url = migrated_sqlite_url(tmp_path)
    port = free_port()
    log_path = tmp_path / "serve.log"  # a file: the import log would fill a pipe and stall
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", NORMDIVE, "serve", "--port", str(port)],
            env=clean_environment(
                DATABASE_URL=url, NORMDIVE_SECRET_KEY=SECRET_KEY, NORMDIVE_DEV_PREREQUISITE_DONE="1"
            ),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            response = wait_for(f"http://127.0.0.1:{port}/", process, log_path)
            assert response.status_code == 200
            assert "normdive_learner" in response.headers["set-cookie"]
        finally:
            process.terminate()
            process.wait(timeout=30)
    loaded = imported_modules(log_path.read_text(encoding="utf-8"))
    # The worker, a process of its own, runs with the same -X options and stderr.
    assert "normdive.web.routes.pages" in loaded
    assert {name for name in loaded if name.split(".")[0] == "torch"} == set()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(url: str, process: subprocess.Popen[bytes], log_path: Path) -> httpx2.Response:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        try:
            return httpx2.get(url)
        except httpx2.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(log_path.read_text(encoding="utf-8")[-4000:]) from None
            time.sleep(0.1)


def test_serve_refuses_a_database_without_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    result = CliRunner().invoke(
        app, ["serve"], env={"NORMDIVE_SECRET_KEY": SECRET_KEY, "DATABASE_URL": url}
    )
    assert result.exit_code == 2
    assert "run `normdive db upgrade`" in result.output


def test_serve_refuses_a_database_url_it_cannot_read() -> None:
    result = CliRunner().invoke(
        app, ["serve"], env={"NORMDIVE_SECRET_KEY": SECRET_KEY, "DATABASE_URL": "nonsense"}
    )
    assert result.exit_code == 2
    assert "DATABASE_URL: not a database URL" in result.output
    assert "normdive supports SQLite" in result.output


def test_serve_refuses_a_database_it_cannot_reach(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'folder.sqlite3'}"
    result = CliRunner().invoke(
        app, ["serve"], env={"NORMDIVE_SECRET_KEY": SECRET_KEY, "DATABASE_URL": url}
    )
    assert result.exit_code == 2
    assert "DATABASE_URL: the database cannot be reached" in result.output


def test_serve_names_the_supported_databases_for_a_mysql_url(tmp_path: Path) -> None:
    result = subprocess.run(
        [NORMDIVE, "serve", "--port", "9"],
        capture_output=True,
        text=True,
        env=clean_environment(
            DATABASE_URL="mysql://normdive:pw@127.0.0.1/normdive", NORMDIVE_SECRET_KEY=SECRET_KEY
        ),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        "  DATABASE_URL: mysql is not supported; normdive supports SQLite "
        "(sqlite:///path/to/file.sqlite3) and PostgreSQL (postgresql://user:password@host/database)"
    ) in result.stderr.splitlines()


@pytest.mark.parametrize(
    "url", ["mysql://u@h/db", "postgresql+psycopg2://u@h/db", "postgres://u@h/db", "oracle://h"]
)
def test_settings_refuse_databases_normdive_cannot_drive(url: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(DATABASE_URL=url, secret_key=SECRET_KEY)
    [line] = settings_problems(caught.value)
    assert line.startswith("DATABASE_URL: ") and "normdive supports SQLite" in line


@pytest.mark.parametrize(
    "url",
    ["sqlite://", "sqlite:///var/x.sqlite3", "postgresql://u@h/db", "postgresql+psycopg://h/d"],
)
def test_settings_take_sqlite_and_postgresql(url: str) -> None:
    assert Settings(DATABASE_URL=url, secret_key=SECRET_KEY).database_url == url


# Keys a server must refuse: blank, one character over and over, two characters alternating,
# a long run of one character with a single other.
WEAK_KEYS = [" " * 32, "\t" * 40, "x" * 64, "ab" * 16, "a" * 63 + "b"]


@pytest.mark.parametrize("key", WEAK_KEYS)
def test_settings_refuse_a_blank_or_guessable_secret(key: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(DATABASE_URL="sqlite://", secret_key=key)
    [line] = settings_problems(caught.value)
    assert line.startswith("NORMDIVE_SECRET_KEY: ")
    assert "blank" in line or "too predictable" in line
    assert line.endswith(SECRET_KEY_HOW_TO)


@pytest.mark.parametrize("token", ["a", " " * 32, *WEAK_KEYS])
def test_settings_refuse_a_short_blank_or_guessable_host_token(token: str) -> None:
    # Whoever holds the host token records 8.5 for any learner: the secret key's rule.
    with pytest.raises(ValidationError) as caught:
        Settings(DATABASE_URL="sqlite://", secret_key=SECRET_KEY, host_token=token)
    [line] = settings_problems(caught.value)
    assert line.startswith("NORMDIVE_HOST_TOKEN: ")
    assert "at least 32" in line or "blank" in line or "too predictable" in line
    assert line.endswith(SECRET_KEY_HOW_TO)


def test_settings_take_a_generated_host_token_or_none() -> None:
    for token in [secrets.token_hex(32), secrets.token_hex(16), secrets.token_urlsafe(32)]:
        given = Settings(DATABASE_URL="sqlite://", secret_key=SECRET_KEY, host_token=token)
        assert given.host_token is not None and given.host_token.get_secret_value() == token
    assert Settings(DATABASE_URL="sqlite://", secret_key=SECRET_KEY).host_token is None


def test_serve_refuses_a_one_letter_host_token() -> None:
    result = CliRunner().invoke(
        app,
        ["serve"],
        env={
            "NORMDIVE_SECRET_KEY": SECRET_KEY,
            "NORMDIVE_HOST_TOKEN": "a",
            "DATABASE_URL": "sqlite://",
        },
    )
    assert result.exit_code == 2
    assert "NORMDIVE_HOST_TOKEN: " in result.output
    assert "secrets.token_hex(32)" in result.output


def test_settings_take_the_test_key_and_generated_keys() -> None:
    # The test suite's key, the Makefile's and bench's (token_hex(32)), and the shortest key
    # `secrets` makes at full length (token_hex(16), 32 characters).
    for key in [
        SECRET_KEY,
        secrets.token_hex(32),
        secrets.token_hex(16),
        secrets.token_urlsafe(32),
    ]:
        assert (
            Settings(DATABASE_URL="sqlite://", secret_key=key).secret_key.get_secret_value() == key
        )


def test_serve_refuses_a_secret_of_32_spaces_and_says_how_to_make_one(tmp_path: Path) -> None:
    result = subprocess.run(
        [NORMDIVE, "serve", "--port", "9"],
        capture_output=True,
        text=True,
        env=clean_environment(
            DATABASE_URL=migrated_sqlite_url(tmp_path), NORMDIVE_SECRET_KEY=" " * 32
        ),
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"  NORMDIVE_SECRET_KEY: blank; {SECRET_KEY_HOW_TO}" in result.stderr.splitlines()


def test_serve_refuses_a_low_entropy_secret() -> None:
    result = CliRunner().invoke(
        app, ["serve"], env={"NORMDIVE_SECRET_KEY": "ab" * 16, "DATABASE_URL": "sqlite://"}
    )
    assert result.exit_code == 2
    assert "NORMDIVE_SECRET_KEY: too predictable" in result.output
    assert "secrets.token_hex(32)" in result.output


def test_serve_help_and_the_readme_name_every_setting() -> None:
    from normdive.config import Settings, environment_variable

    variables = [environment_variable(name) for name in Settings.model_fields]
    shown = " ".join(
        CliRunner().invoke(app, ["serve", "--help"], terminal_width=400).output.split()
    )
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert [v for v in variables if v not in shown] == []
    assert [v for v in variables if f"| `{v}` |" not in readme] == []
