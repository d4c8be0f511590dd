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

Printed per request kind: statements per request by kind of statement, and the request's
wall time p50 in the process (client and app together, one at a time: no queueing).
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
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool
from starlette.testclient import TestClient

from load import ATTEMPTS_PER_MINUTE, PREDICTION, wrong_numbers
from servers import REPO, lesson_env, migrate

sys.path.insert(0, str(REPO / "scripts"))

REQUESTS = 40
# A statement line of PostgreSQL's log (log_statement = all): simple protocol ("statement:")
# or the execute step of the extended protocol ("execute <unnamed>:", "execute _pg3_0:").
LOGGED = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*)$")
ORIGIN = "http://testserver"


def kind_of(sql: str) -> str:
    """A statement's kind as the table shows it."""
    text = " ".join(sql.split()).upper()
    if text.startswith("SELECT 1") and len(text) <= len("SELECT 1;"):
        return "ping"
    if text.startswith("SELECT PG_ADVISORY_XACT_LOCK"):
        return "lock"
    return text.split(" ", 1)[0].lower()


class SqliteCounter:
    """Every statement SQLite runs on the pool's connections, counted by kind."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        event.listen(Pool, "connect", self._trace)

    def _trace(self, dbapi_connection: Any, _record: object) -> None:
        if hasattr(dbapi_connection, "set_trace_callback"):
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


def measure(
    client: TestClient, take: Callable[[], Counter[str]], requests: int
) -> dict[str, tuple[Counter[str], float]]:
    """{request kind: (statements over `requests` of them, p50 wall seconds)}."""
    found: dict[str, tuple[Counter[str], float]] = {}
    state = client.get("/api/state").json()
    headers = {"X-CSRF-Token": state["csrf_token"], "Origin": ORIGIN, "Accept": "application/json"}
    assert client.post("/predict", data={"choice": PREDICTION}, headers=headers).status_code == 200
    checks = iter(range(1, 10**6))

    def numbers() -> int:
        return client.post(
            "/numbers", data=wrong_numbers(next(checks)), headers=headers
        ).status_code

    def new_page() -> int:
        return client.get("/", cookies={}, headers={"Accept": "text/html"}).status_code

    cookie = dict(client.cookies)
    for name, send in (
        ("GET / (returning)", lambda: client.get("/", headers={"Accept": "text/html"}).status_code),
        ("POST /numbers", numbers),
        ("GET /api/state", lambda: client.get("/api/state").status_code),
    ):
        send()  # the first of a kind compiles and caches what later ones reuse
        take()
        walls = []
        for _ in range(requests):
            began = time.perf_counter()
            status = send()
            walls.append(time.perf_counter() - began)
            assert status == 200, (name, status)
        found[name] = (take(), statistics.median(walls))
    client.cookies.clear()
    walls = []
    take()
    for _ in range(requests):
        client.cookies.clear()
        began = time.perf_counter()
        assert new_page() == 200
        walls.append(time.perf_counter() - began)
    found["GET / (new learner)"] = (take(), statistics.median(walls))
    client.cookies.update(cookie)
    return found


def report(results: dict[str, dict[str, tuple[Counter[str], float]]], requests: int) -> None:
    kinds = sorted({k for rows in results.values() for c, _ in rows.values() for k in c})
    print(f"| database | request | statements per request | {' | '.join(kinds)} | wall p50 ms |")
    print("|---|---|---|" + "---|" * len(kinds) + "---|")
    for backend, rows in results.items():
        for name, (counted, wall) in rows.items():
            per = " | ".join(f"{counted[k] / requests:.2f}" for k in kinds)
            total = sum(counted.values()) / requests
            print(f"| {backend} | {name} | {total:.2f} | {per} | {1000 * wall:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    args = parser.parse_args()
    from pg_cluster import PostgresCluster

    print(f"load average {os.getloadavg()[0]:.2f}; {args.requests} requests of each kind")
    results: dict[str, dict[str, tuple[Counter[str], float]]] = {}
    with TemporaryDirectory(prefix="normdive-trips-") as folder, PostgresCluster() as cluster:
        sqlite_url = f"sqlite:///{Path(folder) / 'trips.sqlite3'}"
        for url in (sqlite_url, cluster.url):
            migrate(url)
        import psycopg

        with psycopg.connect(cluster.url.replace("+psycopg", ""), autocommit=True) as admin:
            admin.execute("ALTER DATABASE normdive SET log_statement = 'all'")
        sqlite_counter = SqliteCounter()
        with app_on(sqlite_url) as client:
            results["sqlite"] = measure(client, sqlite_counter.take, args.requests)
        log = PostgresLog(cluster.log)
        with app_on(cluster.url) as client:
            results["postgresql"] = measure(client, log.take, args.requests)
    report(results, args.requests)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
