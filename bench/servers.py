"""Real servers for the web benchmarks (bench/load.py, bench/phone.py): `normdive serve` on a
migrated database, and a bare Starlette endpoint served by uvicorn the same way, each in its own
process group on a free 127.0.0.1 port, stopped (SIGTERM, then SIGKILL) whatever happens.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bare_app import DATABASE_PATH_VARIABLE

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SHIPPED_RECORDING = REPO / "recordings" / "the-transformer-block.json"
# Starting takes a second or two; on two shared cores under load it can take far longer.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
# A started server counts as idle once it uses at most this share of a core over a probe.
IDLE_PROBE_S = 0.5
IDLE_CPU_SHARE = 0.05
# The bare endpoint's app, served exactly as `normdive serve` serves ours.
BARE_APP_DIR = Path(__file__).resolve().parent
BARE_APP = "bare_app:create_app"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def lesson_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a benchmark server: a fresh secret, the prerequisite treated as done
    (the page is open to every learner), the shipped recording."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "NORMDIVE_SECRET_KEY": secrets.token_hex(32),
        "NORMDIVE_DEV_PREREQUISITE_DONE": "1",
        "NORMDIVE_RECORDING_PATH": str(SHIPPED_RECORDING),
        # Every simulated learner comes from 127.0.0.1: no new-learner limit in the way.
        "NORMDIVE_NEW_LEARNERS_PER_HOUR": str(10**9),
        **extra,
    }


def migrate(database_url: str) -> None:
    subprocess.run(
        [str(BIN / "normdive"), "db", "upgrade"],
        env={**os.environ, "DATABASE_URL": database_url},
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _wait_until_up(process: subprocess.Popen[bytes], port: int, path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        with contextlib.suppress(OSError):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", path)
            if connection.getresponse().status == 200:
                connection.close()
                return
        time.sleep(0.1)
    raise RuntimeError(f"the server did not answer on port {port} within {START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def serving(
    command: list[str], env: dict[str, str], port: int, ready_path: str
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` (a server listening on `port`) until the block ends."""
    process = subprocess.Popen(
        command,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the workers stop with it
    )
    try:
        _wait_until_up(process, port, ready_path)
        yield process
    finally:
        _stop(process)


@contextlib.contextmanager
def normdive_server(
    database_url: str, workers: int = 1, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`normdive serve` on a migrated database; yields its base URL and process."""
    migrate(database_url)
    port = free_port()
    command = [str(BIN / "normdive"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(workers)]
    with serving(command, lesson_env(database_url, **env), port, "/healthz") as process:
        yield f"http://127.0.0.1:{port}", process


@contextlib.contextmanager
def bare_server(
    workers: int = 1, database: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """bench/bare_app.py through normdive.web.infrastructure.serving.run, the function `normdive
    serve` uses; with `database`, a SQLite file, its POST /write route (the write floor) inserts
    into it."""
    port = free_port()
    code = (
        "from normdive.web.infrastructure.serving import run; "
        f"run({BARE_APP!r}, host='127.0.0.1', port={port}, workers={workers})"
    )
    # bare_app's folder first, then any PYTHONPATH given (a before-and-after run names the
    # code to measure there: the bare endpoint must be served by that code's run() too).
    given = os.environ.get("PYTHONPATH")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(BARE_APP_DIR), *([given] if given else [])]),
    }
    if database is not None:
        env[DATABASE_PATH_VARIABLE] = str(database)
    with serving([str(BIN / "python"), "-c", code], env, port, "/") as process:
        yield f"http://127.0.0.1:{port}", process


def group_cpu_s(group: int) -> float:
    """User + system CPU seconds of every live process in a process group (from /proc): a
    server and its workers, each started by `serving` in a group of its own."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # After the command name: state, ppid, pgrp, ..., utime (14th field), stime (15th).
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group:
                total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def tree_cpu_s(root: int) -> float:
    """User + system CPU seconds of process `root` and its children (a PostgreSQL server and
    its backends, which run under their own account and process group), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(stat.parent.name) == root or int(fields[1]) == root:
                total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def wait_until_idle(group: int) -> None:
    """Wait until a server's process group, just started, has stopped using the CPU: its first
    worker answers while the others may still be importing, and that start-up would count as
    the first cell's CPU. Gives up after START_TIMEOUT_S (a busy machine) and goes on."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        before = group_cpu_s(group)
        time.sleep(IDLE_PROBE_S)
        if group_cpu_s(group) - before <= IDLE_CPU_SHARE * IDLE_PROBE_S:
            return
