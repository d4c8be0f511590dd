"""`normdive serve`: help text, and a loud, clear refusal when the settings are invalid."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from conftest import SECRET_KEY, migrated_sqlite_url
from normdive.cli import app

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


@pytest.mark.slow
def test_serve_serves_the_page(tmp_path: Path) -> None:
    url = migrated_sqlite_url(tmp_path)
    port = free_port()
    process = subprocess.Popen(
        [NORMDIVE, "serve", "--port", str(port)],
        env=clean_environment(
            DATABASE_URL=url, NORMDIVE_SECRET_KEY=SECRET_KEY, NORMDIVE_DEV_PREREQUISITE_DONE="1"
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        response = wait_for(f"http://127.0.0.1:{port}/", process)
        assert response.status_code == 200
        assert "normdive_learner" in response.headers["set-cookie"]
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert process.stderr is not None
        process.stderr.close()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(url: str, process: subprocess.Popen[bytes]) -> httpx2.Response:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        try:
            return httpx2.get(url)
        except httpx2.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                assert process.stderr is not None
                raise AssertionError(process.stderr.read().decode()) from None
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


def test_serve_refuses_a_database_it_cannot_reach(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'folder.sqlite3'}"
    result = CliRunner().invoke(
        app, ["serve"], env={"NORMDIVE_SECRET_KEY": SECRET_KEY, "DATABASE_URL": url}
    )
    assert result.exit_code == 2
    assert "DATABASE_URL: the database cannot be reached" in result.output
