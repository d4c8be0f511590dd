"""Group commit, measured against the durable-write floor: does letting concurrent writers share
one fsync make a durable write cheaper here? Every variant acknowledges a write only once its
commit has returned (durable: SQLite synchronous=FULL in WAL mode, PostgreSQL fsync on with
synchronous_commit on), side by side in one run:

    .venv/bin/python bench/group_commit.py [--seconds 5] [--writers 8 32] [--think-ms 5]

The writers are threads spread over PROCESSES processes (--processes), as a server's request
threads are over its workers; with --think-ms each does that much Python work (holding the
GIL, as a request's render does) before each write.

- SQLite "each its own": the writers, each with its own connection, each write one
  autocommit INSERT (its own transaction, its own WAL fsync): the floor (bench/bare_app.py's
  POST /write) and what normdive's store does (Store._writing).
- SQLite "one writer thread": the prototype. Writers hand their row to one thread per file
  and process, which takes every row waiting, inserts them in one transaction (BEGIN
  IMMEDIATE ... COMMIT: one fsync for all), and only then answers each writer.
- PostgreSQL, commit_delay 0 and more (COMMIT_DELAYS_US; commit_siblings COMMIT_SIBLINGS): the
  writers, each with its own connection, each write one autocommit INSERT, on a throwaway
  cluster started with fsync on (load.POSTGRES_DURABLE, as bench/load.py's; pg_cluster's
  default for tests has fsync off). PostgreSQL already lets a commit's WAL flush cover the
  commits queued behind it; commit_delay makes the flushing backend wait for more first.

Printed per variant and writer count: writes/s, p50/p99 latency, the fsyncs each write cost
(SQLite: commits, one per transaction; PostgreSQL: pg_stat_wal's wal_sync), and CPU per write
(the writers' processes, plus the PostgreSQL server's), with the load average.
"""

from __future__ import annotations

import argparse
import os
import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from bare_app import SCHEMA, SQLITE_PRAGMAS
from load import POSTGRES_DURABLE
from servers import REPO, tree_cpu_s

sys.path.insert(0, str(REPO / "scripts"))

WRITERS = (8, 32)
PROCESSES = 2  # as `normdive serve --workers 2`
MEASURE_S = 5.0
PROCESS_START_S = 3.0  # spawned processes start Python and import before the common start
STATS_DELAY_S = 1.1  # backends send pg_stat_wal's counts as they go idle, at most once a second
COMMIT_DELAYS_US = (0, 100, 1000)  # PostgreSQL's commit_delay (its maximum is 100,000)
COMMIT_SIBLINGS = 2  # other open transactions needed before a commit waits commit_delay
PAYLOAD = "x" * 64
INSERT = "INSERT INTO writes (payload) VALUES ({0})"


@dataclass
class Result:
    variant: str
    writers: int
    writes: int
    seconds: float
    latencies: list[float]
    fsyncs: int
    cpu_s: float
    load: float

    def row(self) -> str:
        ordered = sorted(self.latencies)

        def at(q: float) -> float:
            return 1000 * ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

        return (
            f"| {self.variant} | {self.writers} | {self.writes / self.seconds:,.0f} "
            f"| {at(0.5):.2f} | {at(0.99):.2f} | {self.fsyncs / max(1, self.writes):.3f} "
            f"| {1000 * self.cpu_s / max(1, self.writes):.3f} ms | {self.load:.2f} |"
        )


def own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def drive(
    writers: int, seconds: float, think_s: float, write: Callable[[], None], start_at: float
) -> tuple[int, list[float]]:
    """`writers` threads, from `start_at` (time.time) for `seconds`, each working `think_s`
    (Python holding the GIL, as a request's render does) then calling `write`; (writes,
    latencies of the writes in seconds)."""
    latencies: list[list[float]] = [[] for _ in range(writers)]
    time.sleep(max(0.0, start_at - time.time()))
    end = time.perf_counter() + seconds

    def loop(mine: list[float]) -> None:
        while time.perf_counter() < end:
            thought = time.perf_counter() + think_s
            while time.perf_counter() < thought:
                pass
            began = time.perf_counter()
            write()
            mine.append(time.perf_counter() - began)

    threads = [threading.Thread(target=loop, args=(mine,)) for mine in latencies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for mine in latencies for value in mine]
    return len(every), every


# --- SQLite ----------------------------------------------------------------------------------


def sqlite_connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in SQLITE_PRAGMAS:
        connection.execute(pragma)
    connection.execute(SCHEMA)
    return connection


class GroupWriter:
    """One thread per SQLite file that commits every row waiting in one transaction; a writer's
    future is answered only after that COMMIT returned (the WAL is synced: synchronous=FULL)."""

    def __init__(self, path: Path) -> None:
        self._connection = sqlite_connect(path)
        self._waiting: queue.SimpleQueue[tuple[str, Future[int]] | None] = queue.SimpleQueue()
        self.commits = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def write(self, payload: str) -> int:
        done: Future[int] = Future()
        self._waiting.put((payload, done))
        return done.result()

    def _run(self) -> None:
        while (first := self._waiting.get()) is not None:
            batch = [first]
            while True:
                try:
                    more = self._waiting.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._waiting.put(None)
                    break
                batch.append(more)
            try:
                self._connection.execute("BEGIN IMMEDIATE")
                ids = [
                    self._connection.execute(INSERT.format("?"), (payload,)).lastrowid or 0
                    for payload, _ in batch
                ]
                self._connection.execute("COMMIT")
            except sqlite3.Error as error:
                if self._connection.in_transaction:
                    self._connection.execute("ROLLBACK")
                for _, done in batch:
                    done.set_exception(error)
                continue
            self.commits += 1
            for (_, done), row_id in zip(batch, ids, strict=True):
                done.set_result(row_id)

    def close(self) -> None:
        self._waiting.put(None)
        self._thread.join()
        self._connection.close()


# --- one process's writers -------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    variant: str  # one of VARIANTS
    target: str  # a SQLite file's path, or a PostgreSQL URL (libpq's form)
    writers: int  # threads in this process
    seconds: float
    think_s: float
    delay_us: int  # PostgreSQL's commit_delay
    start_at: float  # time.time() when every process starts writing


SQLITE_EACH, SQLITE_ONE_WRITER, POSTGRESQL = "sqlite-each", "sqlite-one-writer", "postgresql"
VARIANTS = (SQLITE_EACH, SQLITE_ONE_WRITER, POSTGRESQL)


def run_job(job: Job) -> tuple[int, list[float], float, int]:
    """(writes, latencies, this process's CPU seconds, SQLite commits) of one process."""
    local = threading.local()
    group: GroupWriter | None = None
    opened: list[Any] = []
    lock = threading.Lock()
    if job.variant == SQLITE_EACH:

        def write() -> None:
            if not hasattr(local, "connection"):
                local.connection = sqlite_connect(Path(job.target))
            local.connection.execute(INSERT.format("?"), (PAYLOAD,))

    elif job.variant == SQLITE_ONE_WRITER:
        writer = group = GroupWriter(Path(job.target))

        def write() -> None:
            writer.write(PAYLOAD)

    elif job.variant == POSTGRESQL:
        import psycopg

        def write() -> None:
            if not hasattr(local, "connection"):
                local.connection = psycopg.connect(job.target, autocommit=True)
                local.connection.execute(f"SET commit_delay = {job.delay_us}")
                local.connection.execute(f"SET commit_siblings = {COMMIT_SIBLINGS}")
                with lock:
                    opened.append(local.connection)
            local.connection.execute(INSERT.format("%s"), (PAYLOAD,))

    else:
        raise ValueError(f"no variant {job.variant!r} (one of {', '.join(VARIANTS)})")
    cpu = own_cpu_s()
    writes, latencies = drive(job.writers, job.seconds, job.think_s, write, job.start_at)
    cpu = own_cpu_s() - cpu
    commits = writes
    if group is not None:
        group.close()
        commits = group.commits
    for connection in opened:
        connection.close()
    return writes, latencies, cpu, commits


def run_variant(
    variant: str,
    target: str,
    args: argparse.Namespace,
    writers: int,
    delay_us: int = 0,
    cluster: Any = None,
) -> Result:
    """`writers` threads over args.processes processes; with `cluster` (a started
    scripts/pg_cluster.PostgresCluster), its server's CPU and WAL fsyncs counted too."""
    import multiprocessing

    mine = [
        writers // args.processes + (i < writers % args.processes) for i in range(args.processes)
    ]
    start_at = time.time() + PROCESS_START_S
    jobs = [
        Job(variant, target, n, args.seconds, args.think_ms / 1000, delay_us, start_at)
        for n in mine
        if n
    ]
    admin: Any = None
    postmaster, server_cpu, synced = 0, 0.0, 0
    if cluster is not None:
        import psycopg

        admin = psycopg.connect(target, autocommit=True)
        postmaster = int((Path(cluster.data) / "postmaster.pid").read_text().split()[0])

    def syncs() -> int:
        row = admin.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
        return int(row[0]) if row else 0

    load = os.getloadavg()[0]
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        if admin is not None:
            server_cpu, synced = tree_cpu_s(postmaster), syncs()
        parts = pool.map(run_job, jobs)
    fsyncs = sum(part[3] for part in parts)
    cpu = sum(part[2] for part in parts)
    if admin is not None:
        cpu += tree_cpu_s(postmaster) - server_cpu
        time.sleep(STATS_DELAY_S)
        fsyncs = syncs() - synced
        admin.close()
    name = {
        SQLITE_EACH: "sqlite, each its own",
        SQLITE_ONE_WRITER: "sqlite, one writer thread per process",
        POSTGRESQL: f"postgresql, commit_delay {delay_us} us",
    }[variant]
    latencies = [value for part in parts for value in part[1]]
    return Result(
        name, writers, sum(p[0] for p in parts), args.seconds, latencies, fsyncs, cpu, load
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=MEASURE_S)
    parser.add_argument("--writers", type=int, nargs="+", default=list(WRITERS))
    parser.add_argument("--processes", type=int, default=PROCESSES, help="the writers' processes")
    parser.add_argument("--think-ms", type=float, default=0.0, help="work before each write")
    parser.add_argument(
        "--commit-delays", type=int, nargs="+", default=list(COMMIT_DELAYS_US), metavar="US"
    )
    parser.add_argument("--no-postgres", dest="postgres", action="store_false")
    args = parser.parse_args()
    from pg_cluster import PostgresCluster

    print(
        f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; {args.seconds:g} s "
        f"each; writers over {args.processes} processes, {args.think_ms:g} ms of work before "
        f"each write"
    )
    results: list[Result] = []
    with TemporaryDirectory(prefix="normdive-group-") as folder:
        for writers in args.writers:
            for variant in (SQLITE_EACH, SQLITE_ONE_WRITER):
                path = Path(folder) / f"floor-{writers}-{variant}.sqlite3"
                sqlite_connect(path).close()  # the schema, before the processes race to it
                results.append(run_variant(variant, str(path), args, writers))
                print(f"  {results[-1].variant} x{writers}", file=sys.stderr)
        if args.postgres:
            with PostgresCluster(settings=POSTGRES_DURABLE) as cluster:
                url = cluster.url.replace("+psycopg", "")
                import psycopg

                with psycopg.connect(url, autocommit=True) as admin:
                    admin.execute(SCHEMA.replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY"))
                for writers in args.writers:
                    for delay in args.commit_delays:
                        results.append(run_variant(POSTGRESQL, url, args, writers, delay, cluster))
                        print(f"  {results[-1].variant} x{writers}", file=sys.stderr)
    print(
        "| variant | writers | writes/s | p50 ms | p99 ms | fsyncs per write "
        "| CPU per write (client + server) | load average |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        print(result.row())
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
