"""Helpers of the operations tests (tests/test_ops_*.py): `normdive serve` run for real as
a separate process on a free 127.0.0.1 port, and a learner's HTTP client that posts as the
lesson page does (Accept: application/json, the form token from GET /api/state).

Every server gets the settings below from a clean environment, so the test run's own
environment never leaks in. The rate limit is set far above anything a test sends: these
tests count writes, they do not test the limit.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from itsdangerous import Signer
from pydantic import SecretStr

from helpers import HOST_TOKEN, SECRET_KEY, UNREACHED_LIMIT
from normdive.web.infrastructure.identity import COOKIE_NAME, SIGNER_SALT, cookie_value
from normdive.web.security.csrf import form_token

# The console script installed beside this interpreter.
NORMDIVE = str(Path(sys.executable).parent / "normdive")
# Two shared cores under a whole test run: a server process can take a while to import.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# Far above what any of these tests sends in a minute.
ATTEMPTS_PER_MINUTE = 1_000_000
# One request's patience; generous for the same reason as START_TIMEOUT_S.
REQUEST_TIMEOUT_S = 60.0
JSON = {"Accept": "application/json"}
# Where the page and GET /api/state carry the form token (web.security.csrf), and the header the
# page script sends it in. Servers without CSRF protection ignore the header.
TOKEN_KEY = "csrf_token"
TOKEN_HEADER = "X-CSRF-Token"
# linux/prctl.h
PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def die_with_parent() -> None:
    """In the child before exec: Linux sends it SIGKILL if the test process dies first, so a
    killed test run leaves no server behind (prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def server_environment(database_url: str, folder: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("NORMDIVE_") and key != "DATABASE_URL"
    }
    env.update(
        DATABASE_URL=database_url,
        NORMDIVE_SECRET_KEY=SECRET_KEY,
        NORMDIVE_HOST_TOKEN=HOST_TOKEN,
        NORMDIVE_DEV_PREREQUISITE_DONE="1",
        NORMDIVE_ATTEMPTS_PER_MINUTE=str(ATTEMPTS_PER_MINUTE),
        NORMDIVE_NEW_LEARNERS_PER_HOUR=str(UNREACHED_LIMIT),
        NORMDIVE_OPEN_LTI_LOGINS_PER_ADDRESS=str(UNREACHED_LIMIT),
        # No recording: the page says the gate cannot close today; nothing here needs it.
        NORMDIVE_RECORDING_PATH=str(folder / "no-recording-here.json"),
    )
    env.update(extra)
    return env


class ServerProcess:
    """`normdive serve` (or any command given, "{port}" in it standing for the port) in its
    own process group, logging to a file.

    `kill()` sends SIGKILL to the whole group (the server and any workers): no shutdown code
    runs, as when a machine's process is killed."""

    def __init__(
        self,
        database_url: str,
        folder: Path,
        *,
        workers: int = 1,
        command: list[str] | None = None,
        **env: str,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        default = [NORMDIVE, "serve", "--port", "{port}", "--workers", str(workers)]
        # "{port}" in the command is the free port picked here.
        self.command = [part.format(port=self.port) for part in command or default]
        self.env = server_environment(database_url, folder, **env)
        self.log_path = folder / f"server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready_path: str = "/healthz") -> ServerProcess:
        """Start and wait until `ready_path` answers (any status: the server is up)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, for kill()
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}): {self.log()}")
            try:
                httpx.get(self.url + ready_path, timeout=5)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"the server did not start: {self.log()}") from None
                time.sleep(0.1)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server's whole process group and reap it."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), or kill it if it does not stop in time."""
        self._signal(signal.SIGTERM)

    def _signal(self, number: int) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is None or number == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, number)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)
        if number != signal.SIGKILL:
            # Workers of a --workers server exit with it; make sure none is left.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class Learner:
    """One learner's browser, as far as HTTP goes: a cookie jar, and posts that carry the form
    token and ask for JSON, as the page script's do. `at` picks the server the next requests
    go to, so one learner (one cookie) can move between servers."""

    def __init__(self, base_url: str, **client_options: Any) -> None:
        self.base_url = base_url
        self.http = httpx.Client(timeout=REQUEST_TIMEOUT_S, **client_options)
        self._token: str | None = None

    def at(self, base_url: str) -> Learner:
        self.base_url = base_url
        return self

    def state(self) -> dict[str, Any]:
        """GET /api/state: the learner's id, state and form token (creating the learner)."""
        answer = self.http.get(self.base_url + "/api/state")
        answer.raise_for_status()
        body: dict[str, Any] = answer.json()
        self._token = body.get(TOKEN_KEY)
        return body

    def carry(self, learner_id: str) -> Learner:
        """Present a cookie and form token for `learner_id`, made with the tests' secret key as
        the server makes them (for requests that must pass the cookie and token checks while
        the server cannot create a learner)."""
        signer = Signer(SECRET_KEY, salt=SIGNER_SALT)
        self.http.cookies.set(COOKIE_NAME, cookie_value(learner_id, signer))
        self._token = form_token(SecretStr(SECRET_KEY), learner_id)
        return self

    @property
    def id(self) -> str:
        return str(self.state()["learner_id"])

    def get(self, path: str, **options: Any) -> httpx.Response:
        return self.http.get(self.base_url + path, **options)

    def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        if self._token is None:
            self.state()
        headers = dict(JSON)
        if self._token is not None:
            headers[TOKEN_HEADER] = self._token
        return self.http.post(self.base_url + path, data=data, headers=headers)

    def close(self) -> None:
        self.http.close()
