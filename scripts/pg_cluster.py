#!/usr/bin/env python3
"""A throwaway PostgreSQL cluster for tests and benchmarks: Debian's server binaries, a data
folder in a fresh temporary directory, a free port on 127.0.0.1, one database.

Standard library only, so any Python can run it. As a module:

    from pg_cluster import PostgresCluster
    with PostgresCluster() as cluster:          # initdb, start, createdb
        cluster.url                             # postgresql+psycopg://postgres@127.0.0.1:P/normdive
        cluster.create_database("other")        # another database's URL
        cluster.stop_server(); cluster.start_server()   # same data, same port
    # leaving the block stops the server and deletes the folder

As a command:

    scripts/pg_cluster.py run [--env NAME] -- CMD ...   start, run CMD with the URL in $NAME
                                                        (default DATABASE_URL), stop whatever
                                                        happens; exits with CMD's status
    scripts/pg_cluster.py start                         start, print the folder and the URL as
                                                        shell assignments (PG_CLUSTER_DIR=...,
                                                        DATABASE_URL=...); it keeps running
    scripts/pg_cluster.py stop DIR                      stop the cluster in DIR, delete DIR

The PostgreSQL server refuses to run as root, so under root the folder is handed to the
`postgres` user (created by Debian's package) and every server command runs through
`runuser -u postgres --`. Authentication is `trust` and the server listens on 127.0.0.1 only:
the cluster is reachable from this machine alone and lives as long as the test run.

"Stop whatever happens": a started cluster is stopped by `stop()`, by the context manager, at
interpreter exit (atexit), and, if this process is killed outright (SIGKILL, where no Python
code runs), by a small guard process that waits for a pipe from this process to close and then
stops the server and deletes the folder.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import glob
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

# The database every cluster gets, and the superuser initdb creates.
DATABASE = "normdive"
SUPERUSER = "postgres"
# The Unix account Debian's postgresql package creates; the server runs as it under root.
SERVER_ACCOUNT = "postgres"
# The driver normdive installs (psycopg 3); normdive.store.db would add it to a bare URL too.
URL_SCHEME = "postgresql+psycopg"
# Where Debian puts each major version's server binaries (postgresql-common's layout).
DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin"
# Starting takes well under a second on an idle machine; two shared cores under a test run
# can take far longer.
START_TIMEOUT_S = 60
# Settings for a cluster whose data is thrown away: no fsync (a crash of the machine, not of
# the server, could lose data; the folder is deleted anyway), so tests do not wait on the disk.
# Each connection's commit still waits for its WAL record (synchronous_commit stays on), so an
# acknowledged commit survives the server being stopped and started again.
SERVER_SETTINGS = {
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


class ClusterError(RuntimeError):
    """The cluster could not be set up; the message says what to install or fix."""


def find_binaries() -> Path:
    """The folder with initdb, pg_ctl and createdb: the newest Debian major version, else PATH."""
    candidates = sorted(
        (Path(folder) for folder in glob.glob(DEBIAN_BINARIES)),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
    )
    for folder in reversed(candidates):
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    raise ClusterError(
        "PostgreSQL's server programs (initdb, pg_ctl) were not found. Install Debian's "
        "package: apt-get install postgresql (`make test` does this when it can)."
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_account() -> list[str]:
    """The prefix that runs a command as the server's account (empty unless we are root)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ClusterError("running as root, but `runuser` is missing (package util-linux)")
    return [runuser, "-u", SERVER_ACCOUNT, "--"]


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        raise ClusterError(f"{what} failed (exit {result.returncode}): {output}")


class PostgresCluster:
    """One throwaway PostgreSQL cluster. `start()` makes it; `stop()` removes every trace."""

    def __init__(
        self,
        *,
        database: str = DATABASE,
        guard: bool = True,
        settings: dict[str, str] | None = None,
    ) -> None:
        """`settings`: server settings over SERVER_SETTINGS (a benchmark's: fsync on, to
        measure what a durable commit costs)."""
        self.database = database
        self.settings = {**SERVER_SETTINGS, **(settings or {})}
        self._guard_wanted = guard
        self.bin = find_binaries()
        self.folder: Path | None = None
        self.port = 0
        self._guard: subprocess.Popen[bytes] | None = None
        self._guard_pipe: int | None = None

    # --- where things are ---------------------------------------------------------------------

    @property
    def data(self) -> Path:
        return self._folder() / "data"

    @property
    def log(self) -> Path:
        return self._folder() / "server.log"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the cluster's database."""
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        return f"{URL_SCHEME}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _folder(self) -> Path:
        if self.folder is None:
            raise ClusterError("the cluster has not been started")
        return self.folder

    # --- life cycle ---------------------------------------------------------------------------

    def start(self) -> PostgresCluster:
        """initdb into a new temporary folder, start the server, create the database."""
        if self.folder is not None:
            raise ClusterError("the cluster is already started")
        as_server = _as_server_account()
        # A new folder outside any private (0700) temp folder, so the server's account reaches it.
        self.folder = Path(tempfile.mkdtemp(prefix="normdive-pg-"))
        atexit.register(self.stop)
        try:
            if as_server:
                shutil.chown(self.folder, user=SERVER_ACCOUNT, group=SERVER_ACCOUNT)
            _run(
                [
                    *as_server,
                    str(self.bin / "initdb"),
                    "--pgdata",
                    str(self.data),
                    "--username",
                    SUPERUSER,
                    "--auth",
                    "trust",
                    "--encoding",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                    "--no-instructions",
                ],
                "initdb",
            )
            if self._guard_wanted:
                self._start_guard()
            self.port = free_port()
            self.start_server()
            _run(
                [
                    *as_server,
                    str(self.bin / "createdb"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--username",
                    SUPERUSER,
                    self.database,
                ],
                "createdb",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def start_server(self) -> None:
        """Start the server on the cluster's data and port (again, after `stop_server`)."""
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-c port={self.port}",
            # The socket folder inside ours: Debian's default (/var/run/postgresql) may not exist.
            f"-c unix_socket_directories={self._folder()}",
            *(f"-c {name}={value}" for name, value in self.settings.items()),
        ]
        _run(
            [
                *_as_server_account(),
                str(self.bin / "pg_ctl"),
                "start",
                "--pgdata",
                str(self.data),
                "--log",
                str(self.log),
                "--wait",
                "--timeout",
                str(START_TIMEOUT_S),
                "--options",
                " ".join(options),
            ],
            f"starting the PostgreSQL server (log: {self.log})",
        )

    def stop_server(self, mode: str = "fast") -> None:
        """Stop the server, keep the data (`fast`: disconnect clients and shut down cleanly)."""
        _run(
            [
                *_as_server_account(),
                str(self.bin / "pg_ctl"),
                "stop",
                "--pgdata",
                str(self.data),
                "--mode",
                mode,
                "--wait",
            ],
            "stopping the PostgreSQL server",
        )

    def server_running(self) -> bool:
        status = subprocess.run(
            [*_as_server_account(), str(self.bin / "pg_ctl"), "status", "--pgdata", str(self.data)],
            capture_output=True,
            check=False,
        )
        return status.returncode == 0

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create another database (optionally copied from `template`); its URL."""
        command = [
            *_as_server_account(),
            str(self.bin / "createdb"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--username",
            SUPERUSER,
        ]
        if template:
            command += ["--template", template]
        _run([*command, name], f"createdb {name}")
        return self.url_for(name)

    def stop(self) -> None:
        """Stop the server (if it runs) and delete the folder. Safe to call more than once."""
        folder, self.folder = self.folder, None
        if folder is None:
            return
        atexit.unregister(self.stop)
        stop_folder(folder, self.bin)
        if self._guard is not None and self._guard_pipe is not None:
            os.close(self._guard_pipe)  # the guard finds nothing left to do and exits
            self._guard.wait(timeout=START_TIMEOUT_S)
            self._guard = self._guard_pipe = None

    def _start_guard(self) -> None:
        """A process that outlives a SIGKILL of this one and then stops the cluster."""
        read_end, write_end = os.pipe()  # both not inherited by other children (PEP 446)
        self._guard = subprocess.Popen(
            [sys.executable, __file__, "guard", str(self._folder())],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the test run's process group spares it
        )
        os.close(read_end)
        self._guard_pipe = write_end

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def stop_folder(folder: Path, binaries: Path | None = None) -> None:
    """Stop a cluster's server (immediately: its data is about to go) and delete its folder."""
    data = folder / "data"
    if (data / "postmaster.pid").exists():
        binaries = binaries or find_binaries()
        subprocess.run(
            [
                *_as_server_account(),
                str(binaries / "pg_ctl"),
                "stop",
                "--pgdata",
                str(data),
                "--mode",
                "immediate",
                "--wait",
            ],
            capture_output=True,
            check=False,
        )
    shutil.rmtree(folder, ignore_errors=True)


# --- command line -------------------------------------------------------------------------------


def _guard(folder: Path) -> int:
    # Block until the starter closes the pipe or dies (the kernel closes it either way).
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(1):
            pass
    if folder.exists():
        stop_folder(folder)
    return 0


def _run_command(variable: str, command: list[str]) -> int:
    if not command:
        print("pg_cluster run: give the command to run after --", file=sys.stderr)
        return 2
    # SIGTERM and SIGHUP become an exception, so the finally clause stops the cluster.
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, lambda signum, _frame: sys.exit(128 + signum))
    with PostgresCluster() as cluster:
        print(f"pg_cluster: PostgreSQL on {cluster.url} ({cluster.folder})", file=sys.stderr)
        env = {**os.environ, variable: cluster.url}
        child = subprocess.Popen(command, env=env)
        try:
            return child.wait()
        except BaseException:
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=START_TIMEOUT_S)
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start, run a command, stop whatever happens")
    run.add_argument("--env", default="DATABASE_URL", help="variable that gets the URL")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command")
    commands.add_parser("start", help="start one and leave it running")
    stop = commands.add_parser("stop", help="stop one started by `start`, delete its folder")
    stop.add_argument("folder", type=Path)
    guard = commands.add_parser("guard", help=argparse.SUPPRESS)
    guard.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            return _run_command(args.env, command)
        if args.command == "start":
            cluster = PostgresCluster(guard=False).start()
            atexit.unregister(cluster.stop)  # it outlives this command on purpose
            print(f"PG_CLUSTER_DIR={shlex.quote(str(cluster.folder))}")
            print(f"DATABASE_URL={shlex.quote(cluster.url)}")
            return 0
        if args.command == "stop":
            if not (args.folder / "data" / "PG_VERSION").exists():
                print(f"pg_cluster stop: {args.folder} holds no cluster", file=sys.stderr)
                return 1
            stop_folder(args.folder)
            return 0
        return _guard(args.folder)
    except ClusterError as error:
        print(f"pg_cluster: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
