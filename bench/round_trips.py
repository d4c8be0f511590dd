"""What one request sends the database, PostgreSQL beside SQLite: the app in-process (one
learner, one request at a time, Starlette's TestClient), each request kind repeated, and every
statement the database received counted and timed:

    .venv/bin/python bench/round_trips.py [--requests 40]

PostgreSQL: a throwaway cluster (scripts/pg_cluster.py) whose database logs every statement it
receives (log_statement = all, set on the database for this run only), read back from the
server's log: BEGIN, COMMIT and ROLLBACK, the pool's ping (SELECT 1) and the queries, each a
round trip of psycopg's (it sends one statement per message exchange outside pipeline mode).
SQLite: the statements SQLite ran (sqlite3's trace callback on every pooled connection), BEGIN
and COMMIT included; they cost no round trip (the database is in the process).

Printed per request kind: statements per request by kind of statement (counted in a first
pass), then, with the log and the trace off (a second pass, new connections), the request's
wall time p50 in the process (client and app together, one at a time: no queueing) and its
CPU: this process's (the app and the test client) and PostgreSQL's (the server's processes).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool
from starlette.testclient import TestClient

from load import ATTEMPTS_PER_MINUTE, PREDICTION, wrong_numbers
from servers import REPO, lesson_env, migrate, tree_cpu_s

sys.path.insert(0, str(REPO / "scripts"))

REQUESTS = 40
# A statement line of PostgreSQL's log (log_statement = all): simple protocol ("statement:")
# or the execute step of the extended protocol ("execute <unnamed>:", "execute _pg3_0:").
LOGGED = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*)$")
ORIGIN = "http://testserver"
# The pool's pre-ping as each driver's dialect sends it (psycopg's: an empty statement).
PINGS = frozenset({";", "SELECT 1", "SELECT 1;"})


def kind_of(sql: str) -> str:
    """A statement's kind as the table shows it."""
    text = " ".join(sql.split()).upper()
    if text in PINGS:
        return "ping"
    if text.startswith("SELECT PG_ADVISORY_XACT_LOCK"):
        return "lock"
    return text.split(" ", 1)[0].lower()


class SqliteCounter:
    """Every statement SQLite runs on the pool's connections, counted by kind."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.enabled = True  # for connections made from now on
        event.listen(Pool, "connect", self._trace)

    def _trace(self, dbapi_connection: Any, _record: object) -> None:
        if self.enabled and hasattr(dbapi_connection, "set_trace_callback"):
            dbapi_connection.set_trace_callback(lambda sql: self.kinds.update([kind_of(sql)]))

    def take(self) -> Counter[str]:
        taken, self.kinds = self.kinds, Counter()
        return taken


class PostgresLog:
    """Statements PostgreSQL logged since the last `take`, counted by kind."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = log.stat().st_size

    def take(self) -> Counter[str]:
        time.sleep(0.2)  # the logger process writes behind
        with self.log.open("rb") as handle:
            handle.seek(self.offset)
            text = handle.read().decode("utf-8", "replace")
            self.offset = handle.tell()
        return Counter(
            kind_of(m.group(1)) for line in text.splitlines() if (m := LOGGED.search(line))
        )


@contextmanager
def app_on(url: str) -> Iterator[TestClient]:
    os.environ.update(lesson_env(url, NORMDIVE_ATTEMPTS_PER_MINUTE=ATTEMPTS_PER_MINUTE))
    from normdive.config import Settings
    from normdive.web.app import create_app

    with TestClient(create_app(Settings()), base_url=ORIGIN) as client:
        yield client


@dataclass
class Measured:
    """One request kind on one database, over `requests` of them."""

    statements: Counter[str]  # counted with the statement log or trace on
    wall_s: float  # p50, timed with it off
    client_cpu_s: float  # this process (the app and the test client), per request
    server_cpu_s: float  # PostgreSQL's processes, per request (0 for SQLite)


def measure(
    client: TestClient, take: Callable[[], Counter[str]], server_cpu: Callable[[], float], n: int
) -> dict[str, Measured]:
    found: dict[str, Measured] = {}
    state = client.get("/api/state").json()
    headers = {"X-CSRF-Token": state["csrf_token"], "Origin": ORIGIN, "Accept": "application/json"}
    assert client.post("/predict", data={"choice": PREDICTION}, headers=headers).status_code == 200
    checks = iter(range(1, 10**6))

    def numbers() -> int:
        return client.post(
            "/numbers", data=wrong_numbers(next(checks)), headers=headers
        ).status_code

    def new_page() -> int:
        client.cookies.clear()
        return client.get("/", headers={"Accept": "text/html"}).status_code

    for name, send in (
        ("GET / (returning)", lambda: client.get("/", headers={"Accept": "text/html"}).status_code),
        ("POST /numbers", numbers),
        ("GET /api/state", lambda: client.get("/api/state").status_code),
        ("GET / (new learner)", new_page),
    ):
        send()  # the first of a kind compiles and caches what later ones reuse
        take()
        walls = []
        cpu, server = own_cpu_s(), server_cpu()
        for _ in range(n):
            began = time.perf_counter()
            status = send()
            walls.append(time.perf_counter() - began)
            assert status == 200, (name, status)
        cpu, server = own_cpu_s() - cpu, server_cpu() - server
        found[name] = Measured(take(), statistics.median(walls), cpu / n, server / n)
    return found


def own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def report(results: dict[str, dict[str, Measured]], requests: int) -> None:
    kinds = sorted({k for rows in results.values() for m in rows.values() for k in m.statements})
    print(
        f"| database | request | statements per request | {' | '.join(kinds)} | wall p50 ms "
        "| CPU per request: app + client | database server | together |"
    )
    print("|---|---|---|" + "---|" * len(kinds) + "---|---|---|---|")
    for backend, rows in results.items():
        for name, m in rows.items():
            per = " | ".join(f"{m.statements[k] / requests:.2f}" for k in kinds)
            total = sum(m.statements.values()) / requests
            print(
                f"| {backend} | {name} | {total:.2f} | {per} | {1000 * m.wall_s:.2f} "
                f"| {1000 * m.client_cpu_s:.2f} ms | {1000 * m.server_cpu_s:.2f} ms "
                f"| {1000 * (m.client_cpu_s + m.server_cpu_s):.2f} ms |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    args = parser.parse_args()
    from pg_cluster import PostgresCluster

    print(f"load average {os.getloadavg()[0]:.2f}; {args.requests} requests of each kind")
    results: dict[str, dict[str, Measured]] = {}
    with TemporaryDirectory(prefix="normdive-trips-") as folder, PostgresCluster() as cluster:
        sqlite_url = f"sqlite:///{Path(folder) / 'trips.sqlite3'}"
        for url in (sqlite_url, cluster.url):
            migrate(url)
        import psycopg

        postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
        counter = SqliteCounter()
        log = PostgresLog(cluster.log)
        for backend, url, take, server_cpu in (
            ("sqlite", sqlite_url, counter.take, lambda: 0.0),
            ("postgresql", cluster.url, log.take, lambda: tree_cpu_s(postmaster)),
        ):
            # Counted with the log (or trace) on, timed with it off: each costs CPU.
            counted: dict[str, Measured] = {}
            for logging in (True, False):
                counter.enabled = logging
                with psycopg.connect(cluster.url.replace("+psycopg", ""), autocommit=True) as db:
                    setting = "all" if logging else "none"
                    db.execute(f"ALTER DATABASE normdive SET log_statement = '{setting}'")
                with app_on(url) as client:
                    got = measure(client, take, server_cpu, args.requests)
                if logging:
                    counted = got
                    continue
                for name, timed in got.items():
                    timed.statements = counted[name].statements
                results[backend] = got
    report(results, args.requests)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
