"""scripts/pg_cluster.py: a throwaway PostgreSQL cluster that leaves nothing behind, whether it
is stopped, its command ends, or the process that started it is killed outright."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from pg_cluster import PostgresCluster, free_port

pytestmark = pytest.mark.postgresql

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pg_cluster.py"
# Generous: two cores are shared by the whole test run.
WAIT_S = 60.0


def _answers(url: str) -> bool:
    """Whether a PostgreSQL server answers at this SQLAlchemy URL."""
    try:
        with psycopg.connect(url.replace("+psycopg", ""), connect_timeout=5) as connection:
            return connection.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def _wait_until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)


def test_a_cluster_serves_one_database_on_loopback_and_leaves_nothing() -> None:
    with PostgresCluster() as cluster:
        folder = cluster.folder
        assert folder is not None and folder.exists()
        assert cluster.url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
        assert cluster.url.endswith("/normdive")
        assert _answers(cluster.url)
        other = cluster.create_database("another")
        assert _answers(other)
        # Stopped and started again: same port, same data.
        cluster.stop_server()
        assert not cluster.server_running() and not _answers(cluster.url)
        cluster.start_server()
        assert _answers(other)
    assert not folder.exists()
    assert not _answers(cluster.url)


def test_stop_is_safe_to_call_twice() -> None:
    cluster = PostgresCluster().start()
    cluster.stop()
    cluster.stop()
    assert cluster.folder is None


def test_run_hands_the_url_to_the_command_and_returns_its_status(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    command = f'printf %s "$TEST_PG" > {seen}; exit 3'
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "run", "--env", "TEST_PG", "--", "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert result.returncode == 3, result.stderr
    url = seen.read_text()
    assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
    assert not _answers(url)  # stopped once the command ended
    folder = result.stderr.split("(")[-1].split(")")[0]
    assert folder.startswith("/") and not Path(folder).exists()


def test_start_and_stop_from_the_command_line() -> None:
    started = subprocess.run(
        [sys.executable, str(SCRIPT), "start"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    values = dict(line.split("=", 1) for line in started.stdout.split())
    folder, url = Path(values["PG_CLUSTER_DIR"]), values["DATABASE_URL"]
    try:
        assert _answers(url)  # it outlived the command that started it
    finally:
        stopped = subprocess.run(
            [sys.executable, str(SCRIPT), "stop", str(folder)], timeout=WAIT_S, check=False
        )
    assert stopped.returncode == 0
    assert not folder.exists() and not _answers(url)


def test_stop_refuses_a_folder_without_a_cluster(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "stop", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert result.returncode == 1
    assert "holds no cluster" in result.stderr
    assert tmp_path.exists()


def test_a_sigkilled_starter_still_leaves_nothing(tmp_path: Path) -> None:
    # `run` starts a cluster and a long command; SIGKILL gives it no chance to clean up, so
    # the guard process must stop the server and delete the folder.
    seen = tmp_path / "seen"
    script = f'printf %s "$TEST_PG" > {seen}; exec sleep 120'
    runner = subprocess.Popen(
        [sys.executable, str(SCRIPT), "run", "--env", "TEST_PG", "--", "sh", "-c", script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so the test can end the command too
    )
    try:
        _wait_until(lambda: seen.exists() and seen.read_text(), "the command started")
        url = seen.read_text()
        assert _answers(url)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=WAIT_S)
        _wait_until(lambda: not _answers(url), "the guard stopped the server")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)  # the orphaned `sleep`
    assert runner.stderr is not None
    said = runner.stderr.read()
    runner.stderr.close()
    folder = Path(said.split("(")[-1].split(")")[0])
    assert folder.name.startswith("normdive-pg-")
    _wait_until(lambda: not folder.exists(), "the guard deleted the folder")


def test_free_port_is_free_on_loopback() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", port))
