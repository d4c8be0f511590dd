#!/usr/bin/env python3
"""A throwaway Ralph LRS for tests and benchmarks: ralph-malph (pinned in the Makefile, in a
virtual environment of its own, .venv-ralph, as its extras pin click and importlib-metadata
below ours) with its file-system back end, on a free port of 127.0.0.1, with credentials of
its own, its statements in a fresh temporary folder.

The class needs only the standard library, so any Python can run it:

    from ralph_lrs import RalphServer
    with RalphServer() as lrs:                  # start, wait until it answers
        lrs.statements_url, lrs.key, lrs.secret
        lrs.statements()                        # every statement it holds (GET, all pages)
        lrs.stop_server(); lrs.start_server()   # same statements, same port
    # leaving the block stops the server and deletes the folder

"Stop whatever happens": the server is stopped by `stop()`, by the context manager, at
interpreter exit (atexit), and, if the process that started it is killed outright, by the
kernel (the server asks for SIGKILL when its parent dies: PR_SET_PDEATHSIG).

Ralph 5.1.0's file-system LRS back end writes its statements file with the operation "create",
which refuses a file that exists: every POST after the first that stores a statement answers
500 ("... already exists and overwrite is not allowed"). The server run here appends instead
(its one change to Ralph, made as it starts); everything else is Ralph's own: its
authentication, its validation of each statement, its answer to a duplicate id.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The virtual environment `make test` makes for Ralph (see the Makefile's RALPH_VERSION).
RALPH_PYTHON = REPO / ".venv-ralph" / "bin" / "python"
# Starting takes about 2 s on an idle machine; two shared cores under a test run, longer.
START_TIMEOUT_S = 60.0
# Statements one GET returns at most (Ralph's RUNSERVER_MAX_SEARCH_HITS_COUNT).
PAGE_SIZE = 1000
# bcrypt's cost for the throwaway credentials: Ralph checks the hash on a client's first
# request, and the default cost (12) takes a quarter second of a shared core.
BCRYPT_ROUNDS = 4
XAPI_VERSION = "1.0.3"


class RalphError(RuntimeError):
    """Ralph could not be started; the message says what to install or where its log is."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RalphServer:
    """One throwaway Ralph LRS. `start()` makes it; `stop()` removes every trace."""

    def __init__(self, python: Path = RALPH_PYTHON) -> None:
        self.python = python
        self.folder: Path | None = None
        self.port = 0
        self.key = "normdive-tests"
        self.secret = ""
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def statements_url(self) -> str:
        return f"{self.origin}/xAPI/statements"

    @property
    def log(self) -> Path:
        if self.folder is None:
            raise RalphError("Ralph has not been started")
        return self.folder / "ralph.log"

    def start(self) -> RalphServer:
        if self.folder is not None:
            raise RalphError("Ralph is already started")
        if not self.python.exists():
            raise RalphError(f"no Ralph at {self.python}: `make .venv-ralph` installs it")
        self.folder = Path(tempfile.mkdtemp(prefix="normdive-ralph-"))
        atexit.register(self.stop)
        self.secret = secrets.token_hex(16)
        self.port = free_port()
        try:
            self.start_server()
        except BaseException:
            self.stop()
            raise
        return self

    def start_server(self) -> None:
        """Start the server on the folder's statements and the port (again, after
        `stop_server`), and wait until it answers."""
        if self.folder is None:
            raise RalphError("Ralph has not been started")
        # Python writes the server's bytecode into .venv-ralph, so later starts skip compiling
        # Ralph (about half of a start), whatever the environment says.
        environment = {
            **{
                name: value
                for name, value in os.environ.items()
                if name != "PYTHONDONTWRITEBYTECODE"
            },
            "RALPH_LRS_KEY": self.key,
            "RALPH_LRS_SECRET": self.secret,
            "RALPH_LRS_PARENT": str(os.getpid()),
        }
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [str(self.python), __file__, "serve", str(self.folder), str(self.port)],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RalphError(f"Ralph stopped as it started; its log: {self.log}")
            heartbeat = f"{self.origin}/__heartbeat__"
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(heartbeat, timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.1)
        raise RalphError(f"Ralph did not answer within {START_TIMEOUT_S:g} s; its log: {self.log}")

    def stop_server(self) -> None:
        """Stop the server, keep its statements."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self) -> None:
        """Stop the server and delete the folder. Safe to call more than once."""
        self.stop_server()
        folder, self.folder = self.folder, None
        if folder is None:
            return
        atexit.unregister(self.stop)
        shutil.rmtree(folder, ignore_errors=True)

    def request(self, path_and_query: str) -> Any:
        """GET a resource of the LRS with its credentials; its JSON."""
        credentials = base64.b64encode(f"{self.key}:{self.secret}".encode()).decode()
        request = urllib.request.Request(
            self.origin + path_and_query,
            headers={
                "Authorization": f"Basic {credentials}",
                "X-Experience-API-Version": XAPI_VERSION,
            },
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def statements(self) -> list[dict[str, Any]]:
        """Every statement the LRS holds (voided ones left out, as xAPI's GET does), following
        the `more` links."""
        found: list[dict[str, Any]] = []
        page = self.request(f"/xAPI/statements?limit={PAGE_SIZE}")
        while True:
            found.extend(page["statements"])
            more = page.get("more")
            if not more:
                return found
            page = self.request(more)

    def __enter__(self) -> RalphServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


# --- the server, run by Ralph's own Python ---------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Ask the kernel for SIGKILL when the process that started this one dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)


def _serve(folder: Path, port: int) -> None:
    _die_with_parent(int(os.environ["RALPH_LRS_PARENT"]))
    import bcrypt

    secret = os.environ["RALPH_LRS_SECRET"].encode()
    hashed = bcrypt.hashpw(secret, bcrypt.gensalt(rounds=BCRYPT_ROUNDS)).decode()
    auth = [
        {
            "agent": {"mbox": "mailto:lrs-tests@example.org", "objectType": "Agent"},
            "scopes": ["all"],
            "hash": hashed,
            "username": os.environ["RALPH_LRS_KEY"],
        }
    ]
    (folder / "auth.json").write_text(json.dumps(auth))
    (folder / "statements").mkdir(exist_ok=True)
    os.environ.update(
        {
            "RALPH_APP_DIR": str(folder / "app"),
            "RALPH_AUTH_FILE": str(folder / "auth.json"),
            "RALPH_HISTORY_FILE": str(folder / "history.json"),
            "RALPH_RUNSERVER_BACKEND": "fs",
            "RALPH_RUNSERVER_MAX_SEARCH_HITS_COUNT": str(PAGE_SIZE),
            "RALPH_BACKENDS__LRS__FS__DEFAULT_DIRECTORY_PATH": str(folder / "statements"),
        }
    )
    import uvicorn
    from ralph.backends.data.base import BaseOperationType
    from ralph.backends.lrs.fs import FSLRSBackend

    # Append to the statements file instead of refusing it once it exists (see above).
    FSLRSBackend.default_operation_type = BaseOperationType.APPEND
    uvicorn.run("ralph.api:app", host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        _serve(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        with RalphServer() as lrs:
            print(f"Ralph at {lrs.statements_url} (key {lrs.key}, secret {lrs.secret}); Ctrl-C")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
