"""`normdive db upgrade` and `normdive prerequisite done`, and how every command that opens the
store fails, run through the real CLI on a real SQLite file (Typer's in-process runner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from normdive.cli import app
from normdive.progress.events import EventKind
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.store.tables import LearnerSnapshot

runner = CliRunner()
# The console script installed beside this interpreter.
NORMDIVE = str(Path(sys.executable).parent / "normdive")


@pytest.fixture
def url(tmp_path: Path) -> str:
    # A folder that does not exist yet: `db upgrade` creates it for a SQLite file.
    return f"sqlite:///{tmp_path / 'var' / 'progress.sqlite3'}"


def _invoke(url: str, *args: str) -> tuple[int, str]:
    # No NORMDIVE_SECRET_KEY on purpose: these commands must not need it.
    result = runner.invoke(app, list(args), env={"DATABASE_URL": url, "NORMDIVE_SECRET_KEY": None})
    return result.exit_code, result.output


def _upgraded_store(url: str) -> Store:
    assert _invoke(url, "db", "upgrade")[0] == 0
    return Store(make_engine(url))


def test_db_upgrade_creates_the_store_and_can_run_again(url: str) -> None:
    code, output = _invoke(url, "db", "upgrade")
    assert code == 0, output
    assert "up to date" in output
    assert _invoke(url, "db", "upgrade")[0] == 0
    store = Store(make_engine(url))
    assert store.learner_exists(store.create_learner())


def test_db_upgrade_keeps_the_snapshots_a_script_left_behind(url: str) -> None:
    assert _invoke(url, "db", "upgrade")[0] == 0
    engine = make_engine(url)
    store = Store(engine)
    learner = store.create_learner()
    store.append(learner, EventKind.HINT_OPENED, {"rung": 1})  # no snapshot kept
    code, output = _invoke(url, "db", "upgrade")
    assert code == 0, output
    assert "Kept the snapshots of 1 learner(s)" in output
    with engine.connect() as connection:
        kept = connection.execute(select(LearnerSnapshot.last_event_id)).scalars().all()
    assert kept == [store.events_for(learner)[-1].id]
    assert "Kept" not in _invoke(url, "db", "upgrade")[1]  # nothing left behind
    engine.dispose()


def test_db_upgrade_refuses_a_malformed_url() -> None:
    code, output = _invoke("not a url", "db", "upgrade")
    assert code == 1
    assert "DATABASE_URL: not a database URL" in output


MYSQL_URL = "mysql://normdive:pw@127.0.0.1/normdive"
SUPPORTED = (
    "DATABASE_URL: mysql is not supported; normdive supports SQLite "
    "(sqlite:///path/to/file.sqlite3) and PostgreSQL (postgresql://user:password@host/database)"
)


@pytest.mark.parametrize(
    "args", [("db", "upgrade"), ("prerequisite", "done", "--learner", "ab" * 16)]
)
def test_a_mysql_url_gets_one_line_naming_the_supported_databases(args: tuple[str, ...]) -> None:
    # A real process, as an operator runs it: no traceback, one line, exit 1.
    result = subprocess.run(
        [NORMDIVE, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": MYSQL_URL},
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == SUPPORTED
    assert result.stdout == ""


def test_prerequisite_done_records_it_once(url: str) -> None:
    store = _upgraded_store(url)
    learner = store.create_learner()
    code, output = _invoke(url, "prerequisite", "done", "--learner", learner)
    assert code == 0, output
    assert "now recorded as done" in output
    code, output = _invoke(url, "prerequisite", "done", "--learner", learner.upper())
    assert code == 0, output
    assert "already recorded as done" in output
    events = store.events_for(learner)
    assert [(e.kind, e.payload) for e in events] == [
        (EventKind.PREREQUISITE_DONE, {"source": "operator"})
    ]


def test_prerequisite_done_for_a_learner_not_stored_yet_stores_them(url: str) -> None:
    # A learner who only opened the locked page has a signed id but no row.
    store = _upgraded_store(url)
    other = store.create_learner()
    code, _ = _invoke(url, "prerequisite", "done", "--learner", "ab" * 16)
    assert code == 0
    assert store.learner_exists("ab" * 16)
    assert [e.kind for e in store.events_for("ab" * 16)] == [EventKind.PREREQUISITE_DONE]
    assert store.events_for(other) == []


@pytest.mark.parametrize("learner", ["abc", "z" * 32, ""])
def test_prerequisite_done_refuses_what_is_not_a_learner_id(url: str, learner: str) -> None:
    code, output = _invoke(url, "prerequisite", "done", "--learner", learner)
    assert code == 1
    assert "is not a learner id" in output


def test_prerequisite_done_on_a_database_never_upgraded_says_what_to_run(url: str) -> None:
    Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True)
    code, output = _invoke(url, "prerequisite", "done", "--learner", "ab" * 16)
    assert code == 1
    assert "normdive db upgrade" in output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("db", "upgrade", "--help"), "alembic upgrade head"),
        (("prerequisite", "done", "--help"), "--learner"),
    ],
)
def test_both_commands_explain_themselves(url: str, args: tuple[str, ...], expected: str) -> None:
    code, output = _invoke(url, *args)
    assert code == 0
    assert expected in output
    assert "DATABASE_URL" in output


CONTEXT_KEY = "c" * 64
SECRET = "a secret key for the cli tests, long enough and not guessable at all"


@pytest.mark.parametrize(
    "args",
    [
        ("prerequisite", "done", "--learner", "ab" * 16),
        ("lti", "list"),
        ("lti", "remove", "--issuer", "https://lms.example.edu", "--client-id", "c1"),
        (
            "lti",
            "register",
            *("--issuer", "https://lms.example.edu", "--client-id", "c1"),
            *("--auth-login-url", "https://lms.example.edu/auth"),
            *("--token-url", "https://lms.example.edu/token"),
            *("--jwks-url", "https://lms.example.edu/jwks", "--deployment-id", "d1"),
        ),
        ("lti", "rotate-key"),
        ("lti", "outbox"),
        ("lti", "resend", "--context", CONTEXT_KEY),
        ("lti", "roster", "--context", CONTEXT_KEY),
        ("lti", "passback", "--once"),
        ("report", "--output", "learners.csv"),
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_every_store_command_on_a_database_never_upgraded_says_what_to_run(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    folder = tmp_path / "var"
    folder.mkdir()
    url = f"sqlite:///{folder / 'progress.sqlite3'}"
    result = runner.invoke(
        app,
        [arg if arg != "learners.csv" else str(tmp_path / arg) for arg in args],
        env={"DATABASE_URL": url, "NORMDIVE_SECRET_KEY": SECRET},
    )
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Could not use the store at sqlite:///" in result.output
    assert "Has `normdive db upgrade` run on it?" in result.output


def test_report_names_the_file_it_could_not_write(url: str, tmp_path: Path) -> None:
    assert _invoke(url, "db", "upgrade")[0] == 0
    output = tmp_path / "learners.json"
    (tmp_path / "learners.aggregate.json").mkdir()  # where the aggregate goes: no file there
    code, said = _invoke(url, "report", "--format", "json", "--output", str(output))
    assert code == 1
    assert f"Could not write {tmp_path / 'learners.aggregate.json'}: Is a directory." in said
    assert output.read_text(encoding="utf-8") == "[\n]\n"  # the pool is empty
