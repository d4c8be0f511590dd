"""Load benchmark: simulated learners against a real `normdive serve`, on SQLite and on
PostgreSQL, beside a bare Starlette endpoint and a write floor served the same way, in one run:

    .venv/bin/python bench/load.py                      # closed loop, every server
    .venv/bin/python bench/load.py --open-loop 250 500 1000 --search   # open loop too
    .venv/bin/python bench/load.py --learners 100 100000 --events 10 1000 --seed-dir var/seeds
    .venv/bin/python bench/load.py --page-cpu           # GET / alone, returning and new
    .venv/bin/python bench/load.py --skip-closed ...    # only the modes named

Closed loop (always, unless --skip-closed). Each connection is one learner on one HTTP/1.1
keep-alive connection (a small asyncio client, 127.0.0.1 only): the next request leaves as soon
as the last answer is in. A learner first takes its cookie and form token (GET /api/state) and
commits the opening prediction; then, timed, it checks the six numbers (POST /numbers,
`Accept: application/json`, wrong answers, so every check is an evaluated run and the fields
stay open) CHECKS_PER_PAGE times for every page it loads (GET /), like a learner working at the
hand computation. The ceilings, bench/bare_app.py served by the same function with the same
workers: "bare" (GET / that only answers) and "floor" (POST /write: one durable SQLite insert,
WAL and synchronous=FULL as the store; the ceiling of a request that must write). Per cell: a
warm-up, then a fixed window; requests/s and p50/p99 latency of the answers completed in the
window, the ratios to bare and floor at the same concurrency, the CPU the server and this
client used (from /proc), and Little's law's reading of the figures.

Open loop (--open-loop RATE ..., --search). Arrivals are a Poisson process at a set total rate,
as real learners arrive, whatever the server's speed: CLIENT_PROCESSES processes (--clients)
each schedule their share of the rate over their share of a pool of OPEN_POOL learners (--pool),
new ones prepared for each rate, each on its own keep-alive connection. An arrival takes the
longest-idle learner, whose next request is GET / or POST /numbers in the closed loop's 1:3
order; with no learner idle the arrival is dropped (counted). Latency is measured from the
arrival's scheduled time, not from when the client got round to sending it, so a late client or
a slow server shows in the figures (coordinated omission is not hidden); an arrival sent more
than LATE_MS after its time counts as late, one unanswered DRAIN_S after the window as
unfinished (infinitely slow in the percentiles). Reported per rate: requests sent per second,
p50/p99/p99.9, server CPU per request, each client process's CPU (a process near one core is the
bottleneck, not the server), the p99 of the send lag and of the latency from the send (what the
server alone took), late, dropped, unfinished. The rates of --open-loop are run on the ceilings
first ("bare+floor": bare_app's GET / and POST /write in the same 1:3 order), to show what this
client and machine can do at all. --search steps the rate up from SEARCH_START_RATE by
SEARCH_STEP until p99 exceeds GOAL_P99_MS (or arrivals are dropped or unfinished; when the start
already fails, it steps down instead, to SEARCH_MIN_RATE) and prints the highest rate that met
it, on each database, as concurrent learners at one write per WRITE_INTERVAL_S s: rate x share
of writes (3/4) x 15 s.

Seeded (--learners N ... --events E ...). Databases filled by bench/seed.py (learners and their
events written through normdive's Store; --seed-fast: its bulk path; --seed-dir DIR keeps the
seeded SQLite files there and reuses them, each run working on a copy) with the first N and each
E, and with each N and the first E (not every pair: 100,000 learners of 1,000 events is 10^8
events), on each database of --seeded-on, each served by its own `normdive serve`. The simulated
learners ARE seeded learners: the bench starts the server, so it knows the secret and signs
their cookies and form tokens with normdive's own functions. Closed loop at the first
--connections; each connection takes a random idle learner from SEEDED_ACTIVE (--active)
learners drawn from the N for each page load and its checks. Printed: server CPU per request per
database, "flat in events" (largest E over first E) and "flat in learners" (largest N over first
N) as ratios side by side, and how many events the cell itself added per active learner (the
learners grow while they are measured).

Page CPU (--page-cpu): closed-loop cells of GET / alone, by a returning learner (cookie, opening
prediction committed) and by a new one (no cookie on any request), each with its server CPU per
request.

Burst (--burst [N] --burst-seconds S; N defaults to BURST_LEARNERS, S to BURST_S): a lecture
hall pressing "Check" at once. N new learners are prepared first (cookie, form token, opening
prediction committed; not timed, PREPARE_AT_ONCE at a time), then each posts one POST /numbers
(the six wrong answers) at a uniformly random moment within S seconds, each on a connection of
its own opened for it (a phone back from a pause: the prepared connections are closed, so the
timed post includes its TCP connect). Latency runs from the scheduled moment, as in the open
loop; a post unanswered BURST_TIMEOUT_S after its moment counts as unfinished. Printed per
database: p50/p99/max latency, answers by status, and "nothing lost": the learners'
numbers_checked events counted in the database after the run against the 2xx answers (every
acknowledged check stored once, none stored twice).

PostgreSQL comes from scripts/pg_cluster.py (a throwaway cluster, started with fsync on:
POSTGRES_DURABLE); `--no-postgres` skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import math
import multiprocessing
import os
import queue
import random
import secrets
import shutil
import statistics
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from urllib.parse import urlencode, urlsplit

from servers import REPO, bare_server, group_cpu_s, normdive_server, tree_cpu_s, wait_until_idle

sys.path.insert(0, str(REPO / "scripts"))

CONNECTIONS = (50, 200)
WORKERS = 2  # one per core of this machine
WARMUP_S = 2.0
MEASURE_S = 10.0
CHECKS_PER_PAGE = 3
# The goal: at least half the bare endpoint's requests/s with p99 <= 50 ms, on SQLite.
GOAL_RATIO = 0.5
GOAL_P99_MS = 50.0
# The goals of "one millisecond per request".
GOAL_CPU_MS = 1.0  # server CPU per request in the mix, SQLite
# The mix's CPU per request within this factor of the ceilings' in the same order and run.
GOAL_FLOOR_MIX_FACTOR = 2.0
# PostgreSQL's CPU per request (the app's and its server's) within this factor of SQLite's.
GOAL_POSTGRES_CPU_FACTOR = 1.3
GOAL_FLOOR_RATIO = 0.5  # requests/s against the write floor's
GOAL_FLAT = 1.2  # CPU per request, most events (learners) over fewest
GOAL_OPEN_RATE = 1000.0  # requests/s at p99 <= GOAL_P99_MS, open loop, SQLite
GOAL_PAGE_CPU_MS = 2.0  # GET / for a returning and for a new learner
# The writes of these learners are the benchmark, not a script to brake (web.security).
ATTEMPTS_PER_MINUTE = "100000000"
PREDICTION = "residual"
# Six well-formed wrong answers (the right ones would land and close the fields).
WRONG_NUMBERS = {
    "row1_mean": "2.5",
    "row1_variance": "1",
    "row1_denominator": "1.5",
    "row2_mean": "0.5",
    "row2_variance": "2.5",
    "row2_denominator": "0.25",
}
# Told apart per process (9 digits of the clock at import), so a learner checked by an earlier
# cell or run never gets an answer it already sent.
CHECK_NONCE = f"{time.time_ns() % 10**9:09d}"

# Open loop.
OPEN_POOL = 400  # prepared learners per server, over all client processes
CLIENT_PROCESSES = 2
LATE_MS = 5.0
DRAIN_S = 10.0
COMMAND_LEAD_S = 0.5  # time for a cell's start to reach every client process before it begins
SETUP_TIMEOUT_S = 300.0
PREPARE_AT_ONCE = 20  # learners a client process prepares concurrently
CLIENT_BUSY_CORES = 0.8  # a client process busier than this may hold the rate back
SEARCH_START_RATE = 100.0
SEARCH_STEP = 1.25
SEARCH_MAX_RATE = 8000.0
SEARCH_MIN_RATE = 10.0
WRITE_INTERVAL_S = 15.0
WRITE_SHARE = CHECKS_PER_PAGE / (CHECKS_PER_PAGE + 1)

# Burst.
BURST_LEARNERS = 500
BURST_S = 2.0
BURST_LEAD_S = 0.5  # from the last learner prepared to the burst's first possible moment
BURST_TIMEOUT_S = 60.0
GOAL_BURST_P99_MS = 500.0

# PostgreSQL's server settings here: its data is thrown away, but its commits are measured as
# durable ones, as SQLite's are (synchronous=FULL), not with pg_cluster's fsync off for tests.
POSTGRES_DURABLE = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}

# Seeded.
SEEDED_ACTIVE = 1000
BACKENDS = ("sqlite", "postgresql")


def wrong_numbers(n: int) -> dict[str, str]:
    """WRONG_NUMBERS told apart by trailing digits ("2.5000<nonce>7"), still as wrong: an answer
    unchanged since a field's last check is not checked again, so a repeated one is a 409."""
    return {
        field: f"{value}{'' if '.' in value else '.'}000{CHECK_NONCE}{n}"
        for field, value in WRONG_NUMBERS.items()
    }


COOKIE_NAME = "normdive_learner"
READ_LIMIT = 1 << 20


# --- a small HTTP/1.1 keep-alive client ------------------------------------------------------


class HttpError(RuntimeError):
    pass


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        body = self.body
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body)


class Connection:
    """One keep-alive connection with one learner's cookie. Answers are taken as they come
    (gzip stays compressed unless read with Reply.json)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.cookie = ""
        self.reconnects = -1  # the first connect is not a reconnect
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        await self.close()
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, limit=READ_LIMIT
        )
        self.reconnects += 1

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None

    def _head(self, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines.append("Accept-Encoding: gzip")
        if self.cookie:
            lines.append(f"Cookie: {self.cookie}")
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def request(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> Reply:
        data = self._head(method, path, headers or {}, body)
        for attempt in (1, 2):
            if self._writer is None:
                await self._connect()
            assert self._reader is not None and self._writer is not None
            try:
                self._writer.write(data)
                head = await self._reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as error:
                # The server closed an idle keep-alive connection before reading this request:
                # send it again on a new one (once).
                await self.close()
                if attempt == 2 or (
                    isinstance(error, asyncio.IncompleteReadError) and error.partial
                ):
                    raise HttpError(f"{method} {path}: connection lost") from error
                continue
            return await self._read_reply(head)
        raise AssertionError("unreachable")

    async def _read_reply(self, head: bytes) -> Reply:
        assert self._reader is not None
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in header_lines:
            if not line:
                continue
            name, _, value = line.partition(":")
            name = name.strip().lower()
            value = value.strip()
            if name == "set-cookie" and value.startswith(COOKIE_NAME + "="):
                self.cookie = value.split(";", 1)[0]
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if "content-length" in headers:
            body = await self._reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self._read_chunked()
        else:
            body = b""
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return Reply(status, headers, body)

    async def _read_chunked(self) -> bytes:
        assert self._reader is not None
        parts = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)


# --- learners --------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the learners of one cell saw inside the measured window."""

    start: float
    end: float
    latencies: dict[str, list[float]] = field(default_factory=dict)
    unexpected: dict[str, int] = field(default_factory=dict)
    prepared: int = 0  # learners through their untimed set-up

    def record(self, kind: str, sent: float, done: float, ok: bool, status: int) -> None:
        if not self.start <= sent or done > self.end:
            return
        self.latencies.setdefault(kind, []).append(done - sent)
        if not ok:
            key = f"{kind} {status}"
            self.unexpected[key] = self.unexpected.get(key, 0) + 1


# One simulated learner: set up (untimed), count itself prepared, wait for the start, work.
LearnerLoop = Callable[[Connection, Tally, asyncio.Event], Coroutine[Any, Any, None]]


def form_headers(connection: Connection, token: str) -> dict[str, str]:
    return {
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-CSRF-Token": token,
        "Origin": f"http://{connection.host}:{connection.port}",
    }


async def prepare_learner(connection: Connection) -> dict[str, str]:
    """A new learner on `connection`: cookie and form token taken, the opening prediction
    committed. Returns the headers of their form posts."""
    return (await prepared_learner(connection))[1]


async def prepared_learner(connection: Connection) -> tuple[str, dict[str, str]]:
    """prepare_learner's learner: (their id, the headers of their form posts)."""
    state = (await connection.request("GET", "/api/state")).json()
    fields = state if isinstance(state, dict) else {}
    headers = form_headers(connection, str(fields.get("csrf_token", "")))
    predicted = await connection.request(
        "POST", "/predict", headers=headers, body=urlencode({"choice": PREDICTION}).encode()
    )
    if predicted.status != 200:
        raise HttpError(f"POST /predict answered {predicted.status}: {predicted.body[:200]!r}")
    return str(fields.get("learner_id", "")), headers


async def work_page(
    connection: Connection, tally: Tally, headers: dict[str, str], checks: list[int]
) -> None:
    """One page load (GET /) and its CHECKS_PER_PAGE checks; `checks` counts this learner's."""
    now = time.perf_counter()
    reply = await connection.request("GET", "/", headers={"Accept": "text/html"})
    tally.record("GET /", now, time.perf_counter(), reply.status == 200, reply.status)
    for _ in range(CHECKS_PER_PAGE):
        sent = time.perf_counter()
        if sent >= tally.end:
            break
        checks[0] += 1
        numbers = urlencode(wrong_numbers(checks[0])).encode()
        reply = await connection.request("POST", "/numbers", headers=headers, body=numbers)
        tally.record("POST /numbers", sent, time.perf_counter(), reply.status == 200, reply.status)


async def lesson_learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
    headers = await prepare_learner(connection)
    checks = [0]
    tally.prepared += 1
    await ready.wait()
    while time.perf_counter() < tally.end:
        await work_page(connection, tally, headers, checks)


class IdleLearners:
    """Seeded learners (cookie, form token) not being worked by a connection right now; a
    connection takes a random one for each page load, so no learner races themselves."""

    def __init__(self, identities: list[tuple[str, str]], rng: random.Random) -> None:
        self._idle = list(identities)
        self._rng = rng
        self._checks = dict.fromkeys(identities, 0)

    def take(self) -> tuple[str, str]:
        index = self._rng.randrange(len(self._idle))
        self._idle[index], self._idle[-1] = self._idle[-1], self._idle[index]
        return self._idle.pop()

    def give_back(self, identity: tuple[str, str]) -> None:
        self._idle.append(identity)

    def checks(self, identity: tuple[str, str]) -> list[int]:
        return [self._checks[identity]]

    def count_checks(self, identity: tuple[str, str], checks: list[int]) -> None:
        self._checks[identity] = checks[0]


def seeded_learner(idle: IdleLearners) -> LearnerLoop:
    async def learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
        tally.prepared += 1
        await ready.wait()
        while time.perf_counter() < tally.end:
            identity = idle.take()
            connection.cookie, token = identity
            checks = idle.checks(identity)
            try:
                await work_page(connection, tally, form_headers(connection, token), checks)
            finally:
                idle.count_checks(identity, checks)
                idle.give_back(identity)

    return learner


async def returning_page_learner(
    connection: Connection, tally: Tally, ready: asyncio.Event
) -> None:
    """GET / alone, by a learner who has a cookie and committed the opening prediction."""
    await prepare_learner(connection)
    tally.prepared += 1
    await ready.wait()
    while (sent := time.perf_counter()) < tally.end:
        reply = await connection.request("GET", "/", headers={"Accept": "text/html"})
        ok = reply.status == 200
        tally.record("GET / returning", sent, time.perf_counter(), ok, reply.status)


async def new_page_learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
    """GET / alone, every time by a new learner: no cookie is sent (the one set is dropped)."""
    tally.prepared += 1
    await ready.wait()
    while (sent := time.perf_counter()) < tally.end:
        connection.cookie = ""
        reply = await connection.request("GET", "/", headers={"Accept": "text/html"})
        ok = reply.status == 200 and COOKIE_NAME in reply.headers.get("set-cookie", "")
        tally.record("GET / new", sent, time.perf_counter(), ok, reply.status)


async def bare_learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
    await connection.request("GET", "/")
    tally.prepared += 1
    await ready.wait()
    while (sent := time.perf_counter()) < tally.end:
        reply = await connection.request("GET", "/")
        tally.record("GET /", sent, time.perf_counter(), reply.status == 200, reply.status)


async def floor_learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
    await connection.request("POST", "/write")
    tally.prepared += 1
    await ready.wait()
    while (sent := time.perf_counter()) < tally.end:
        reply = await connection.request("POST", "/write")
        tally.record("POST /write", sent, time.perf_counter(), reply.status == 200, reply.status)


# --- one closed-loop cell --------------------------------------------------------------------


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def process_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


@dataclass
class Cell:
    server: str
    connections: int
    requests: int
    seconds: float
    latencies: dict[str, list[float]]
    unexpected: dict[str, int]
    server_cpu_s: float
    client_cpu_s: float
    machine_busy: float  # share of all cores busy, 0..1
    reconnects: int
    database_cpu_s: float = 0.0  # PostgreSQL's processes (0 for SQLite, in the server's)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_ms(self) -> float:
        """Server CPU per request, milliseconds."""
        return 1000 * self.server_cpu_s / max(1, self.requests)

    @property
    def with_database_ms(self) -> float:
        """Server and database CPU per request, milliseconds."""
        return 1000 * (self.server_cpu_s + self.database_cpu_s) / max(1, self.requests)

    def all_latencies(self) -> list[float]:
        return [value for values in self.latencies.values() for value in values]


def percentile_ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_cell(
    name: str,
    url: str,
    server_group: int,
    connections: int,
    learner: LearnerLoop,
    measure_s: float,
    database: int = 0,
) -> Cell:
    """One closed-loop cell; `database`: the PostgreSQL server's process id (its CPU and its
    backends' is counted apart), 0 for none."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    pool = [Connection(host, port) for _ in range(connections)]
    ready = asyncio.Event()
    # The window is fixed once every learner has its cookie; `end` is set then.
    tally = Tally(start=float("inf"), end=float("inf"))
    tasks = [asyncio.create_task(learner(c, tally, ready)) for c in pool]
    # Set-up (cookies, tokens, predictions) is not timed; wait for all of it.
    while tally.prepared < connections:
        for task in tasks:
            if task.done():
                task.result()  # a set-up failure stops the run at once
        await asyncio.sleep(0.05)
    begin = time.perf_counter()
    tally.start, tally.end = begin + WARMUP_S, begin + WARMUP_S + measure_s
    ready.set()
    await asyncio.sleep(WARMUP_S)
    cpu_server, cpu_client, busy = group_cpu_s(server_group), process_cpu_s(), machine_busy()
    cpu_database = tree_cpu_s(database) if database else 0.0
    await asyncio.sleep(measure_s)
    server_cpu = group_cpu_s(server_group) - cpu_server
    database_cpu = tree_cpu_s(database) - cpu_database if database else 0.0
    client_cpu = process_cpu_s() - cpu_client
    busy_after = machine_busy()
    await asyncio.gather(*tasks)
    for connection in pool:
        await connection.close()
    share = (busy_after[0] - busy[0]) / max(1, busy_after[1] - busy[1])
    latencies = tally.latencies
    return Cell(
        server=name,
        connections=connections,
        requests=sum(len(values) for values in latencies.values()),
        seconds=measure_s,
        latencies=latencies,
        unexpected=tally.unexpected,
        server_cpu_s=server_cpu,
        client_cpu_s=client_cpu,
        machine_busy=share,
        reconnects=sum(max(0, c.reconnects) for c in pool),
        database_cpu_s=database_cpu,
    )


# --- burst -----------------------------------------------------------------------------------


@dataclass
class BurstLearner:
    """One learner of a burst: prepared, then their one check's answer."""

    learner_id: str
    cookie: str
    headers: dict[str, str]
    status: int = 0  # 0: no answer (the connection failed, or none within BURST_TIMEOUT_S)
    latency: float = math.inf  # seconds from the scheduled moment to the answer


async def prepare_burst(url: str, count: int) -> list[BurstLearner]:
    """`count` new learners, prepared PREPARE_AT_ONCE at a time; their connections closed."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    gate = asyncio.Semaphore(PREPARE_AT_ONCE)

    async def one() -> BurstLearner:
        async with gate:
            connection = Connection(host, port)
            try:
                learner_id, headers = await prepared_learner(connection)
            finally:
                await connection.close()
            return BurstLearner(learner_id, connection.cookie, headers)

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _burst_post(learner: BurstLearner, host: str, port: int, moment: float) -> None:
    """The learner's one check, sent at `moment` (the loop's clock) on a new connection."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, moment - loop.time()))
    connection = Connection(host, port)
    connection.cookie = learner.cookie
    body = urlencode(wrong_numbers(1)).encode()
    posting = connection.request("POST", "/numbers", headers=learner.headers, body=body)
    try:
        reply = await asyncio.wait_for(posting, moment + BURST_TIMEOUT_S - loop.time())
    except (TimeoutError, HttpError, OSError, asyncio.IncompleteReadError):
        learner.status = 0
    else:
        learner.status, learner.latency = reply.status, loop.time() - moment
    finally:
        await connection.close()


async def run_burst(url: str, learners: list[BurstLearner], seconds: float, seed: int) -> None:
    """Each of `learners` posts their check at a uniformly random moment within `seconds`."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    rng = random.Random(seed)
    t0 = asyncio.get_running_loop().time() + BURST_LEAD_S
    await asyncio.gather(
        *(_burst_post(one, host, port, t0 + rng.uniform(0.0, seconds)) for one in learners)
    )


def stored_checks(database_url: str, learner_ids: list[str]) -> dict[str, int]:
    """How many numbers_checked events the database holds for each of `learner_ids`."""
    from sqlalchemy import func, select

    from normdive.progress.events import EventKind
    from normdive.store.db import make_engine
    from normdive.store.tables import EventRecord

    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(EventRecord.learner_id, func.count())
                .where(
                    EventRecord.kind == EventKind.NUMBERS_CHECKED.value,
                    EventRecord.learner_id.in_(learner_ids),
                )
                .group_by(EventRecord.learner_id)
            ).all()
    finally:
        engine.dispose()
    return {learner_id: int(count) for learner_id, count in rows}


@dataclass(frozen=True)
class BurstCount:
    """A burst's answers against what the database holds, per learner."""

    acknowledged: int  # learners answered 2xx
    stored: int  # learners whose check is stored (once or more)
    lost: int  # answered 2xx, nothing stored
    duplicated: int  # stored more than once
    stored_unacknowledged: int  # stored, but answered otherwise or not at all (not a loss)

    @property
    def nothing_lost(self) -> bool:
        return self.lost == 0 and self.duplicated == 0


def count_burst(statuses: dict[str, int], stored: dict[str, int]) -> BurstCount:
    """`statuses`: each learner's answer (0: none); `stored`: their stored checks."""
    acknowledged = {who for who, status in statuses.items() if 200 <= status < 300}
    held = {who for who in statuses if stored.get(who, 0) > 0}
    return BurstCount(
        acknowledged=len(acknowledged),
        stored=len(held),
        lost=len(acknowledged - held),
        duplicated=sum(1 for who in statuses if stored.get(who, 0) > 1),
        stored_unacknowledged=len(held - acknowledged),
    )


@dataclass
class BurstCell:
    server: str
    learners: list[BurstLearner]
    count: BurstCount
    server_cpu_s: float
    database_cpu_s: float  # PostgreSQL's processes (0 for SQLite)
    machine_busy: float
    load_average: float  # the machine's 1-minute load average as the burst began

    def latencies(self) -> list[float]:
        return [one.latency for one in self.learners]

    def statuses(self) -> dict[int, int]:
        counted: dict[int, int] = {}
        for one in self.learners:
            counted[one.status] = counted.get(one.status, 0) + 1
        return dict(sorted(counted.items()))

    def meets_goal(self) -> bool:
        return percentile_ms(self.latencies(), 0.99) <= GOAL_BURST_P99_MS and (
            self.count.nothing_lost and self.count.acknowledged == len(self.learners)
        )


def burst_cell(server: Server, count: int, seconds: float) -> BurstCell:
    learners = asyncio.run(prepare_burst(server.url, count))
    wait_until_idle(server.group)
    load = os.getloadavg()[0]
    cpu, busy = group_cpu_s(server.group), machine_busy()
    database = tree_cpu_s(server.postmaster) if server.postmaster else 0.0
    asyncio.run(run_burst(server.url, learners, seconds, random.randrange(2**32)))
    server_cpu, busy_after = group_cpu_s(server.group) - cpu, machine_busy()
    if server.postmaster:
        database = tree_cpu_s(server.postmaster) - database
    stored = stored_checks(server.database, [one.learner_id for one in learners])
    counted = count_burst({one.learner_id: one.status for one in learners}, stored)
    share = (busy_after[0] - busy[0]) / max(1, busy_after[1] - busy[1])
    return BurstCell(server.name, learners, counted, server_cpu, database, share, load)


def report_burst(cells: list[BurstCell], seconds: float) -> None:
    print(
        f"burst: each learner posts one POST /numbers at a uniformly random moment within "
        f"{seconds:g} s, on a connection of its own; latency from that moment"
    )
    print(
        "| database | learners | p50 ms | p99 ms | max ms | answers by status "
        "| acknowledged | stored | lost | stored twice | stored, not acknowledged "
        "| server CPU per post | database CPU per post | machine busy | load average "
        f"| p99 <= {GOAL_BURST_P99_MS:.0f} ms, nothing lost |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cell in cells:
        values = cell.latencies()
        answers = ", ".join(f"{status or 'none'}: {n}" for status, n in cell.statuses().items())
        count = cell.count
        print(
            f"| {cell.server} | {len(cell.learners)} | {percentile_ms(values, 0.5):.1f} "
            f"| {percentile_ms(values, 0.99):.1f} | {1000 * max(values):.1f} | {answers} "
            f"| {count.acknowledged} | {count.stored} | {count.lost} | {count.duplicated} "
            f"| {count.stored_unacknowledged} "
            f"| {1000 * cell.server_cpu_s / max(1, len(cell.learners)):.2f} ms "
            f"| {1000 * cell.database_cpu_s / max(1, len(cell.learners)):.2f} ms "
            f"| {100 * cell.machine_busy:.0f} % | {cell.load_average:.2f} "
            f"| {_met(cell.meets_goal())} |"
        )
    for cell in cells:
        print(
            f"nothing lost, {cell.server}: {cell.count.acknowledged} acknowledged, "
            f"{cell.count.stored} stored, {cell.count.lost} lost, "
            f"{cell.count.duplicated} stored twice: "
            f"{'yes' if cell.count.nothing_lost else 'NO'}"
        )


# --- open loop -------------------------------------------------------------------------------


@dataclass(eq=False)
class OpenLearner:
    """A prepared learner of the open loop and where they are in the 1:3 order."""

    connection: Connection
    headers: dict[str, str]
    requests: int = 0
    checks: int = 0
    ceiling: bool = False  # bare_app's GET / and POST /write in the same order instead

    def next_request(self) -> tuple[str, str, str, dict[str, str], bytes]:
        """(kind, method, path, headers, body) of this learner's next request."""
        self.requests += 1
        if self.requests % (CHECKS_PER_PAGE + 1) == 1:
            return "GET /", "GET", "/", {"Accept": "text/html"}, b""
        if self.ceiling:
            return "POST /write", "POST", "/write", {}, b""
        self.checks += 1
        body = urlencode(wrong_numbers(self.checks)).encode()
        return "POST /numbers", "POST", "/numbers", self.headers, body


@dataclass
class OpenShare:
    """What one client process saw of one open-loop cell. Latencies are in seconds from the
    arrival's scheduled time; only arrivals scheduled inside the window count."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    send_lags: list[float] = field(default_factory=list)  # sent minus scheduled, seconds
    from_sent: list[float] = field(default_factory=list)  # answered minus sent, seconds
    scheduled: int = 0
    sent: int = 0
    dropped: int = 0  # no learner idle
    late: int = 0  # sent more than LATE_MS after the scheduled time
    unfinished: int = 0  # no answer DRAIN_S after the window
    in_flight: int = 0
    unexpected: dict[str, int] = field(default_factory=dict)
    client_cpu_s: float = float("nan")


async def _arrive(
    learner: OpenLearner,
    scheduled: float,
    counted: bool,
    share: OpenShare,
    idle: deque[OpenLearner],
) -> None:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    if counted:
        share.sent += 1
        share.in_flight += 1
        share.send_lags.append(sent - scheduled)
        share.late += sent - scheduled > LATE_MS / 1000
    kind, method, path, headers, body = learner.next_request()
    try:
        status = (await learner.connection.request(method, path, headers=headers, body=body)).status
    except (HttpError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        await learner.connection.close()
        status = 0
    if counted:
        share.in_flight -= 1
        done = loop.time()
        share.latencies.setdefault(kind, []).append(done - scheduled)
        share.from_sent.append(done - sent)
        if status != 200:
            key = f"{kind} {status}"
            share.unexpected[key] = share.unexpected.get(key, 0) + 1
    idle.append(learner)


async def open_cell(
    learners: list[OpenLearner], rate: float, t0: float, warmup: float, measure: float, seed: int
) -> OpenShare:
    """Poisson arrivals at `rate` per second from `t0` (time.monotonic, the loop's clock) for
    warmup + measure seconds over `learners`; the window is the last `measure` seconds."""
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    start, end = t0 + warmup, t0 + warmup + measure
    share = OpenShare()
    marks: dict[str, float] = {}
    loop.call_at(start, lambda: marks.setdefault("start", process_cpu_s()))
    loop.call_at(end, lambda: marks.setdefault("end", process_cpu_s()))
    idle = deque(learners)
    busy: set[asyncio.Task[None]] = set()
    moment = t0
    while True:
        moment += rng.expovariate(rate)
        if moment >= end:
            break
        delay = moment - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        counted = moment >= start
        share.scheduled += counted
        if not idle:
            share.dropped += counted
            continue
        task = asyncio.create_task(_arrive(idle.popleft(), moment, counted, share, idle))
        busy.add(task)
        task.add_done_callback(busy.discard)
    await asyncio.sleep(max(0.0, end - loop.time()) + 0.01)
    if busy:
        _, unanswered = await asyncio.wait(set(busy), timeout=DRAIN_S)
        for task in unanswered:
            task.cancel()
        await asyncio.gather(*unanswered, return_exceptions=True)
    share.unfinished = share.in_flight
    share.in_flight = 0
    # A cancelled request leaves its connection mid-answer: every learner starts clean again.
    waiting = {id(learner) for learner in idle}
    for learner in learners:
        if id(learner) not in waiting:
            await learner.connection.close()
            idle.append(learner)
    if "start" in marks and "end" in marks:
        share.client_cpu_s = marks["end"] - marks["start"]
    return share


async def _client(url: str, count: int, ceiling: bool, commands: Any, results: Any) -> None:
    """One client process: prepares its `count` learners (of bare_app with `ceiling`), says
    so, then runs the cells it is sent until told to stop."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    learners: list[OpenLearner] = []
    gate = asyncio.Semaphore(PREPARE_AT_ONCE)
    rng = random.Random()

    async def prepare() -> None:
        async with gate:
            connection = Connection(host, port)
            if ceiling:
                headers: dict[str, str] = {}
                await connection.request("GET", "/")  # connected before the timing starts
            else:
                headers = await prepare_learner(connection)
            # Spread over the 1:3 order, so the first arrivals are not all page loads.
            start = rng.randrange(CHECKS_PER_PAGE + 1)
            learners.append(OpenLearner(connection, headers, requests=start, ceiling=ceiling))

    await asyncio.gather(*(prepare() for _ in range(count)))
    results.put(("ready", None))
    while True:
        command = await asyncio.to_thread(commands.get)
        if command[0] == "stop":
            break
        _, rate, t0, warmup, measure, seed = command
        results.put(("share", await open_cell(learners, rate, t0, warmup, measure, seed)))
    for learner in learners:
        await learner.connection.close()


def client_process(url: str, count: int, ceiling: bool, commands: Any, results: Any) -> None:
    try:
        asyncio.run(_client(url, count, ceiling, commands, results))
    except BaseException:
        results.put(("error", traceback.format_exc()))
        raise


@dataclass
class OpenCell:
    server: str
    rate: float
    seconds: float
    shares: list[OpenShare]
    server_cpu_s: float
    machine_busy: float

    def total(self, name: str) -> int:
        return sum(int(getattr(share, name)) for share in self.shares)

    def latencies(self) -> list[float]:
        values = [v for share in self.shares for vs in share.latencies.values() for v in vs]
        return values + [math.inf] * self.total("unfinished")

    def kind_share(self, kind: str) -> float:
        count = sum(len(share.latencies.get(kind, [])) for share in self.shares)
        return count / max(1, sum(len(vs) for s in self.shares for vs in s.latencies.values()))

    @property
    def sent_rate(self) -> float:
        return self.total("sent") / self.seconds

    @property
    def cpu_ms(self) -> float:
        return 1000 * self.server_cpu_s / max(1, self.total("sent"))

    @property
    def p99_ms(self) -> float:
        return percentile_ms(self.latencies(), 0.99)

    def meets_goal(self) -> bool:
        return (
            self.p99_ms <= GOAL_P99_MS
            and self.total("dropped") == 0
            and self.total("unfinished") == 0
        )


class ClientPool:
    """CLIENT_PROCESSES processes (spawned: a fork would inherit this process's event loop)
    that drive one server; each holds its share of the learners for every cell."""

    def __init__(self, url: str, learners: int, processes: int, ceiling: bool) -> None:
        context = multiprocessing.get_context("spawn")
        self.results: Any = context.Queue()
        self.commands: list[Any] = [context.Queue() for _ in range(processes)]
        self.processes = []
        for index, commands in enumerate(self.commands):
            mine = learners // processes + (index < learners % processes)
            process = context.Process(
                target=client_process,
                args=(url, mine, ceiling, commands, self.results),
                daemon=True,
            )
            process.start()
            self.processes.append(process)
        try:
            for _ in self.processes:
                self._receive("ready", SETUP_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    def _receive(self, expected: str, timeout: float) -> Any:
        try:
            what, value = self.results.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"a client process sent nothing in {timeout:.0f} s") from None
        if what == "error":
            raise RuntimeError(f"a client process failed:\n{value}")
        assert what == expected, what
        return value

    def cell(self, server: str, group: int, rate: float, measure_s: float) -> OpenCell:
        t0 = time.monotonic() + COMMAND_LEAD_S
        for index, commands in enumerate(self.commands):
            seed = random.randrange(2**32) + index
            commands.put(("cell", rate / len(self.commands), t0, WARMUP_S, measure_s, seed))
        time.sleep(max(0.0, t0 + WARMUP_S - time.monotonic()))
        cpu, busy = group_cpu_s(group), machine_busy()
        time.sleep(max(0.0, t0 + WARMUP_S + measure_s - time.monotonic()))
        server_cpu, busy_after = group_cpu_s(group) - cpu, machine_busy()
        timeout = DRAIN_S + SETUP_TIMEOUT_S
        shares = [self._receive("share", timeout) for _ in self.commands]
        machine = (busy_after[0] - busy[0]) / max(1, busy_after[1] - busy[1])
        return OpenCell(server, rate, measure_s, shares, server_cpu, machine)

    def close(self) -> None:
        for commands in self.commands:
            commands.put(("stop",))
        for process in self.processes:
            process.join(timeout=DRAIN_S)
            if process.is_alive():
                process.terminate()
                process.join()


@contextlib.contextmanager
def client_pool(
    url: str, learners: int, processes: int, ceiling: bool = False
) -> Iterator[ClientPool]:
    pool = ClientPool(url, learners, processes, ceiling)
    try:
        yield pool
    finally:
        pool.close()


def search_rates(factor: float) -> Iterator[float]:
    """SEARCH_START_RATE, then each step `factor` times the last, within the search's bounds."""
    rate = SEARCH_START_RATE
    while SEARCH_MIN_RATE <= rate <= SEARCH_MAX_RATE:
        yield round(rate)
        rate *= factor


def learners_at(rate: float) -> float:
    """Concurrent learners whose writes make `rate` requests/s in the mix, each writing once
    every WRITE_INTERVAL_S seconds."""
    return rate * WRITE_SHARE * WRITE_INTERVAL_S


# --- reports ---------------------------------------------------------------------------------


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(cells: list[Cell]) -> None:
    print(
        "| server | conns | requests/s | p50 ms | p99 ms | x bare | x floor | GET / p50/p99 ms "
        "| POST /numbers p50/p99 ms | server CPU | server CPU per request "
        "| database CPU per request | client CPU | machine busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    bare = {cell.connections: cell.rps for cell in cells if cell.server == "bare"}
    floor = {cell.connections: cell.rps for cell in cells if cell.server == "floor"}
    for cell in cells:
        values = cell.all_latencies()
        ratio = cell.rps / bare[cell.connections] if cell.connections in bare else float("nan")
        to_floor = cell.rps / floor[cell.connections] if cell.connections in floor else math.nan

        def kind(name: str, cell: Cell = cell) -> str:
            got = cell.latencies.get(name)
            if not got:
                return "-"
            return f"{percentile_ms(got, 0.5):.1f} / {percentile_ms(got, 0.99):.1f}"

        print(
            f"| {cell.server} | {cell.connections} | {cell.rps:,.0f} "
            f"| {percentile_ms(values, 0.5):.1f} | {percentile_ms(values, 0.99):.1f} "
            f"| {ratio:.2f}x | {to_floor:.2f}x | {kind('GET /')} | {kind('POST /numbers')} "
            f"| {cell.server_cpu_s / cell.seconds:.2f} cores | {cell.cpu_ms:.2f} ms "
            f"| {cell.with_database_ms - cell.cpu_ms:.2f} ms "
            f"| {cell.client_cpu_s / cell.seconds:.2f} cores | {100 * cell.machine_busy:.0f} % |"
        )
    for cell in cells:
        if cell.unexpected or cell.reconnects:
            print(
                f"{cell.server} x{cell.connections}: unexpected answers {cell.unexpected or 0}; "
                f"reconnects {cell.reconnects}"
            )
    lesson = [cell for cell in cells if cell.server not in ("bare", "floor")]
    for cell in lesson:
        values = cell.all_latencies()
        mean_ms = 1000 * statistics.fmean(values) if values else float("nan")
        needed = cell.connections / (GOAL_P99_MS / 1000)
        print(
            f"Little's law, {cell.server} x{cell.connections}: {cell.rps:,.0f} req/s x "
            f"{mean_ms:.1f} ms mean = {cell.rps * mean_ms / 1000:.0f} requests in flight; "
            f"a mean of {GOAL_P99_MS:.0f} ms at {cell.connections} connections needs "
            f">= {needed:,.0f} req/s"
        )
    ceilings = {
        (cell.server, cell.connections): cell.cpu_ms for cell in cells if cell not in lesson
    }
    for cell in lesson:
        for ceiling in ("bare", "floor"):
            theirs = ceilings.get((ceiling, cell.connections))
            if theirs is None:
                continue
            print(
                f"CPU per request, {cell.server} x{cell.connections}: {cell.cpu_ms:.2f} ms against "
                f"the {ceiling} endpoint's {theirs:.2f} ms: on the same cores, at most "
                f"{theirs / cell.cpu_ms:.2f}x its requests/s"
            )
    sqlite = {cell.connections: cell for cell in lesson if cell.server == "sqlite"}
    for connections, cell in sqlite.items():
        p99 = percentile_ms(cell.all_latencies(), 0.99)
        if connections in bare:
            ratio = cell.rps / bare[connections]
            met = ratio >= GOAL_RATIO and p99 <= GOAL_P99_MS
            print(
                f"goal on SQLite x{connections} (>= {GOAL_RATIO}x bare at p99 <= "
                f"{GOAL_P99_MS:.0f} ms): {ratio:.2f}x at p99 {p99:.1f} ms: {_met(met)}"
            )
        if connections in floor:
            ratio = cell.rps / floor[connections]
            print(
                f"goal on SQLite x{connections} (>= {GOAL_FLOOR_RATIO}x the write floor's "
                f"requests/s): {cell.rps:,.0f} / {floor[connections]:,.0f} = {ratio:.2f}x: "
                f"{_met(ratio >= GOAL_FLOOR_RATIO)}"
            )
        print(
            f"goal on SQLite x{connections} (server CPU per request <= {GOAL_CPU_MS} ms in the "
            f"mix): {cell.cpu_ms:.2f} ms: {_met(cell.cpu_ms <= GOAL_CPU_MS)}"
        )
        bare_ms = ceilings.get(("bare", connections))
        floor_ms = ceilings.get(("floor", connections))
        if bare_ms is not None and floor_ms is not None:
            # The ceilings in the lesson's own order: CHECKS_PER_PAGE writes to one page.
            mix_ms = (CHECKS_PER_PAGE * floor_ms + bare_ms) / (CHECKS_PER_PAGE + 1)
            ratio = cell.cpu_ms / mix_ms
            print(
                f"goal on SQLite x{connections} (server CPU per request in the mix <= "
                f"{GOAL_FLOOR_MIX_FACTOR}x the floor mix's, ({CHECKS_PER_PAGE} x floor + bare) / "
                f"{CHECKS_PER_PAGE + 1}): {cell.cpu_ms:.2f} / {mix_ms:.2f} ms = {ratio:.1f}x: "
                f"{_met(ratio <= GOAL_FLOOR_MIX_FACTOR)}"
            )
    for cell in lesson:
        if cell.server != "postgresql" or cell.connections not in sqlite:
            continue
        theirs = sqlite[cell.connections].cpu_ms
        factor = cell.with_database_ms / theirs
        print(
            f"goal x{cell.connections} (PostgreSQL's CPU per request within "
            f"{GOAL_POSTGRES_CPU_FACTOR}x SQLite's, its server's processes counted): "
            f"({cell.cpu_ms:.2f} + {cell.with_database_ms - cell.cpu_ms:.2f}) / {theirs:.2f} ms "
            f"= {factor:.2f}x: {_met(factor <= GOAL_POSTGRES_CPU_FACTOR)} "
            f"(the app's alone: {cell.cpu_ms / theirs:.2f}x)"
        )


def report_page(cells: list[Cell]) -> None:
    print(
        "| server | GET / for | conns | requests/s | p50 ms | p99 ms | server CPU per request "
        f"| goal <= {GOAL_PAGE_CPU_MS:g} ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for cell in cells:
        values = cell.all_latencies()
        who = next(iter(cell.latencies), "GET / ?").removeprefix("GET / ")
        print(
            f"| {cell.server} | {who} learner | {cell.connections} | {cell.rps:,.0f} "
            f"| {percentile_ms(values, 0.5):.1f} | {percentile_ms(values, 0.99):.1f} "
            f"| {cell.cpu_ms:.2f} ms | {_met(cell.cpu_ms <= GOAL_PAGE_CPU_MS)} |"
        )
    for cell in cells:
        if cell.unexpected or cell.reconnects:
            print(
                f"{cell.server}: unexpected answers {cell.unexpected}; reconnects {cell.reconnects}"
            )


def report_open(cells: list[OpenCell]) -> None:
    print(
        "| server | offered req/s | sent req/s | GET / share | p50 ms | p99 ms | p99.9 ms "
        "| server CPU per request | client CPU per process | send lag p99 ms | p99 from send ms "
        f"| late | dropped | unfinished | machine busy | p99 <= {GOAL_P99_MS:.0f} ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cell in cells:
        values = cell.latencies()
        lags = [lag for share in cell.shares for lag in share.send_lags]
        from_sent = [value for share in cell.shares for value in share.from_sent]
        clients = ", ".join(f"{s.client_cpu_s / cell.seconds:.2f}" for s in cell.shares)
        print(
            f"| {cell.server} | {cell.rate:,.0f} | {cell.sent_rate:,.0f} "
            f"| {100 * cell.kind_share('GET /'):.0f} % "
            f"| {percentile_ms(values, 0.5):.1f} | {percentile_ms(values, 0.99):.1f} "
            f"| {percentile_ms(values, 0.999):.1f} | {cell.cpu_ms:.2f} ms | {clients} cores "
            f"| {percentile_ms(lags, 0.99):.1f} | {percentile_ms(from_sent, 0.99):.1f} "
            f"| {cell.total('late')} | {cell.total('dropped')} "
            f"| {cell.total('unfinished')} | {100 * cell.machine_busy:.0f} % "
            f"| {'yes' if cell.meets_goal() else 'no'} |"
        )
    for cell in cells:
        unexpected: dict[str, int] = {}
        for share in cell.shares:
            for key, count in share.unexpected.items():
                unexpected[key] = unexpected.get(key, 0) + count
        if unexpected:
            print(f"{cell.server} at {cell.rate:,.0f}/s: unexpected answers {unexpected}")
        busiest = max(share.client_cpu_s / cell.seconds for share in cell.shares)
        if busiest > CLIENT_BUSY_CORES:
            print(
                f"{cell.server} at {cell.rate:,.0f}/s: a client process used {busiest:.2f} cores: "
                f"the client may be what holds the rate back (--clients more)"
            )
    for cell in cells:
        if cell.server == "sqlite" and cell.rate == GOAL_OPEN_RATE:
            print(
                f"goal on SQLite (p99 <= {GOAL_P99_MS:.0f} ms at {GOAL_OPEN_RATE:,.0f} req/s, "
                f"open loop): p99 {cell.p99_ms:.1f} ms, {cell.total('dropped')} dropped, "
                f"{cell.total('unfinished')} unfinished: {_met(cell.meets_goal())}"
            )


def report_search(found: dict[str, float | None]) -> None:
    for server, rate in found.items():
        if rate is None:
            print(
                f"{server}: no rate from {SEARCH_MIN_RATE:,.0f} to {SEARCH_MAX_RATE:,.0f} req/s "
                f"met p99 <= {GOAL_P99_MS:.0f} ms"
            )
            continue
        print(
            f"{server}: highest rate with p99 <= {GOAL_P99_MS:.0f} ms (nothing dropped or "
            f"unfinished), stepping by x{SEARCH_STEP}: {rate:,.0f} req/s = {rate:,.0f} x "
            f"{WRITE_SHARE:.2f} (writes) x {WRITE_INTERVAL_S:.0f} s = "
            f"{learners_at(rate):,.0f} concurrent learners at one write per "
            f"{WRITE_INTERVAL_S:.0f} s"
        )
    if "sqlite" in found:
        rate = found["sqlite"] or 0.0
        print(
            f"goal on SQLite (the highest such rate >= {GOAL_OPEN_RATE:,.0f} req/s): "
            f"{rate:,.0f} req/s: {_met(rate >= GOAL_OPEN_RATE)}"
        )


@dataclass
class SeededCell:
    backend: str
    learners: int
    events: int
    active: int
    seed_s: float
    cell: Cell
    added_per_learner: float


def report_seeded(rows: list[SeededCell], seeded_how: str) -> None:
    print(
        "| database | learners | events each | seeded (or copied) in | active | conns "
        "| requests/s | p50 ms | p99 ms | server CPU per request | events added per active "
        "learner |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        values = row.cell.all_latencies()
        print(
            f"| {row.backend} | {row.learners:,} | {row.events:,} | {row.seed_s:.0f} s "
            f"| {row.active:,} | {row.cell.connections} | {row.cell.rps:,.0f} "
            f"| {percentile_ms(values, 0.5):.1f} "
            f"| {percentile_ms(values, 0.99):.1f} | {row.cell.cpu_ms:.2f} ms "
            f"| {row.added_per_learner:,.0f} |"
        )
    print(f"seeded through {seeded_how}")
    for row in rows:
        if not row.cell.requests:
            print(
                f"{row.cell.server}: no request was both sent and answered inside the "
                f"{row.cell.seconds:g} s window (each took longer): its CPU per request is "
                f"meaningless; a longer --seconds measures it"
            )
    for row in rows:
        if row.cell.unexpected or row.cell.reconnects:
            print(
                f"{row.backend} {row.learners:,} x {row.events:,}: unexpected answers "
                f"{row.cell.unexpected}; reconnects {row.cell.reconnects}"
            )
    for backend in dict.fromkeys(row.backend for row in rows):
        mine = [row for row in rows if row.backend == backend]
        base = mine[0]
        most_events = max(
            (row for row in mine if row.learners == base.learners), key=lambda r: r.events
        )
        most_learners = max(
            (row for row in mine if row.events == base.events), key=lambda r: r.learners
        )
        parts = []
        for what, other, span in (
            (
                "events",
                most_events,
                f"{base.events:,} -> {most_events.events:,} events, {base.learners:,} learners",
            ),
            (
                "learners",
                most_learners,
                f"{base.learners:,} -> {most_learners.learners:,} learners, {base.events:,} events",
            ),
        ):
            if other is base:
                parts.append(f"flat in {what}: only one count given")
            elif not (other.cell.requests and base.cell.requests):
                parts.append(f"flat in {what} ({span}): not measured (a cell answered nothing)")
            else:
                ratio = other.cell.cpu_ms / base.cell.cpu_ms
                parts.append(
                    f"flat in {what} ({span}): {ratio:.2f}x ({_met(ratio <= GOAL_FLAT)}, "
                    f"goal <= {GOAL_FLAT}x)"
                )
        print(f"{backend}: " + " | ".join(parts) + "; server CPU per request, the mix")


# --- the run ---------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_cluster(enabled: bool) -> Iterator[Any]:
    """A throwaway PostgreSQL cluster (scripts/pg_cluster.PostgresCluster), or None."""
    if not enabled:
        yield None
        return
    from pg_cluster import PostgresCluster

    with PostgresCluster(settings=POSTGRES_DURABLE) as cluster:
        yield cluster


@dataclass(frozen=True)
class Server:
    name: str
    url: str
    group: int  # process group, for its CPU
    database: str = ""  # the lesson's database URL ("" for the ceilings)
    postmaster: int = 0  # the PostgreSQL server's process id, for its CPU (0: none)


async def closed_cells(
    servers: Sequence[tuple[Server, LearnerLoop]], connections: list[int], measure_s: float
) -> list[Cell]:
    cells = []
    for count in connections:
        for server, learner in servers:
            cell = await run_cell(
                server.name, server.url, server.group, count, learner, measure_s, server.postmaster
            )
            cells.append(cell)
            what = f"{server.name} x{count} ({learner.__name__})"
            print(f"  {what}: {cell.rps:,.0f} req/s", file=sys.stderr)
    return cells


def open_cells(
    server: Server, rates: list[float], search: bool, args: argparse.Namespace
) -> tuple[list[OpenCell], float | None]:
    """The cells at `rates`, then with `search` the step-up search; the highest searched rate
    that met the goal (None: none did, or no search)."""
    cells: list[OpenCell] = []
    best: float | None = None
    ceiling = server.name == "bare+floor"

    def one(rate: float) -> OpenCell:
        # New learners for every rate: the last rate's learners would carry its events.
        with client_pool(server.url, args.pool, args.clients, ceiling) as pool:
            cell = pool.cell(server.name, server.group, rate, args.seconds)
        print(
            f"  {server.name} open loop at {rate:,.0f}/s: p99 {cell.p99_ms:.1f} ms",
            file=sys.stderr,
        )
        cells.append(cell)
        return cell

    for rate in rates:
        one(rate)
    if search:
        for rate in search_rates(SEARCH_STEP):
            if not one(rate).meets_goal():
                break
            best = rate
        if best is None:  # even the start failed: step down until a rate meets it
            for rate in search_rates(1 / SEARCH_STEP):
                if rate != SEARCH_START_RATE and one(rate).meets_goal():
                    best = rate
                    break
    return cells, best


def seeded_identities(
    ids: list[str], secret: str, count: int, rng: random.Random
) -> list[tuple[str, str]]:
    """(Cookie header value, form token) of `count` of the learners `ids`, drawn at random,
    signed as the server signs them (normdive.web.infrastructure.identity,
    normdive.web.security.csrf)."""
    from itsdangerous import Signer
    from pydantic import SecretStr

    from normdive.web.infrastructure.identity import COOKIE_NAME as COOKIE
    from normdive.web.infrastructure.identity import SIGNER_SALT, cookie_value
    from normdive.web.security.csrf import form_token

    signer, key = Signer(secret, salt=SIGNER_SALT), SecretStr(secret)
    chosen = rng.sample(ids, min(count, len(ids)))
    return [(f"{COOKIE}={cookie_value(i, signer)}", form_token(key, i)) for i in chosen]


def seeded_pairs(learners: list[int], events: list[int]) -> list[tuple[int, int]]:
    """The first of each with every one of the other: the base, then events, then learners."""
    pairs = [(learners[0], count) for count in events]
    return pairs + [(count, events[0]) for count in learners[1:]]


def seeded_sqlite(
    learners: int, events: int, fast: bool, folder: Path, kept: Path | None
) -> tuple[str, list[str]]:
    """A SQLite database of `learners` x `events` in `folder` and its learner ids. With `kept`,
    the seeded file is kept there untouched and reused by later runs: this run works on a copy
    (its learners add events while they are measured)."""
    from seed import keep_snapshots, learner_ids, seed, seed_method

    name = f"seed-{learners}x{events}{'-fast' if fast else ''}.sqlite3"
    url = f"sqlite:///{folder / name}"
    if kept is None:
        return url, seed(url, learners, events, fast=fast)
    kept.mkdir(parents=True, exist_ok=True)
    pristine = kept / name
    if not pristine.exists():
        partial = kept / f"{name}.partial"
        partial.unlink(missing_ok=True)
        seed(f"sqlite:///{partial}", learners, events, fast=fast)
        partial.rename(pristine)
    else:
        print(f"  reusing {pristine} (seeded through {seed_method(fast)})", file=sys.stderr)
        if not fast:  # seeded before migration 0006: its snapshots, as the app keeps them
            keep_snapshots(f"sqlite:///{pristine}")
    shutil.copyfile(pristine, folder / name)
    return url, learner_ids(url)


def seeded_runs(args: argparse.Namespace, cluster: Any, folder: Path) -> list[SeededCell]:
    from seed import seed

    rows: list[SeededCell] = []
    rng = random.Random()
    secret = secrets.token_hex(32)
    env = {"NORMDIVE_ATTEMPTS_PER_MINUTE": ATTEMPTS_PER_MINUTE, "NORMDIVE_SECRET_KEY": secret}
    backends = [b for b in args.seeded_on if b == "sqlite" or cluster is not None]
    for backend in backends:
        for learners, events in seeded_pairs(args.learners, args.events):
            what = f"{learners:,} learners x {events:,} events"
            print(f"  seeding {backend}: {what}", file=sys.stderr)
            began = time.perf_counter()
            if backend == "sqlite":
                url, ids = seeded_sqlite(learners, events, args.seed_fast, folder, args.seed_dir)
            else:
                url = cluster.create_database(f"seed_{learners}x{events}")
                ids = seed(url, learners, events, fast=args.seed_fast)
            seed_s = time.perf_counter() - began
            identities = seeded_identities(ids, secret, args.active, rng)
            idle = IdleLearners(identities, rng)
            with normdive_server(url, args.workers, **env) as (server_url, process):
                wait_until_idle(process.pid)
                cell = asyncio.run(
                    run_cell(
                        f"{backend} {learners}x{events}",
                        server_url,
                        process.pid,
                        # A connection works one idle learner at a time: no more than there are.
                        min(args.connections[0], len(identities)),
                        seeded_learner(idle),
                        args.seconds,
                    )
                )
            posts = sum(idle.checks(identity)[0] for identity in identities)
            added = posts / max(1, len(identities))
            rows.append(SeededCell(backend, learners, events, len(identities), seed_s, cell, added))
            print(f"  {cell.server}: {cell.cpu_ms:.2f} ms per request", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=MEASURE_S, help="measured window")
    parser.add_argument("--connections", type=int, nargs="+", default=list(CONNECTIONS))
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--no-postgres", dest="postgres", action="store_false")
    parser.add_argument("--skip-closed", action="store_true", help="no closed-loop cells")
    parser.add_argument("--open-loop", type=float, nargs="+", default=[], metavar="RATE")
    parser.add_argument("--search", action="store_true", help="highest rate with p99 in goal")
    parser.add_argument("--pool", type=int, default=OPEN_POOL, help="open-loop learners")
    parser.add_argument("--clients", type=int, default=CLIENT_PROCESSES, help="processes")
    parser.add_argument("--learners", type=int, nargs="+", default=[], help="seeded learners")
    parser.add_argument("--events", type=int, nargs="+", default=[], help="seeded events each")
    parser.add_argument("--active", type=int, default=SEEDED_ACTIVE, help="seeded, worked")
    parser.add_argument("--seed-fast", action="store_true", help="seed.py's bulk path")
    parser.add_argument(
        "--seeded-on", nargs="+", choices=BACKENDS, default=list(BACKENDS), help="databases"
    )
    parser.add_argument(
        "--seed-dir", type=Path, help="keep seeded SQLite files here and reuse them (copied)"
    )
    parser.add_argument("--page-cpu", action="store_true", help="GET / alone, returning, new")
    parser.add_argument(
        "--burst",
        type=int,
        nargs="?",
        const=BURST_LEARNERS,
        metavar="N",
        help=f"N learners each posting one check within --burst-seconds ({BURST_LEARNERS})",
    )
    parser.add_argument("--burst-seconds", type=float, default=BURST_S, metavar="S")
    args = parser.parse_args()
    if bool(args.learners) != bool(args.events):
        parser.error("--learners and --events go together")
    load_before = os.getloadavg()[0]
    print(
        f"cores {os.cpu_count()}, server workers {args.workers}, load average {load_before:.2f}; "
        f"{WARMUP_S:.0f} s warm-up + {args.seconds:g} s measured per cell; "
        f"lesson learners: {CHECKS_PER_PAGE} x POST /numbers per GET /",
        flush=True,
    )
    env = {"NORMDIVE_ATTEMPTS_PER_MINUTE": ATTEMPTS_PER_MINUTE}
    with (
        contextlib.ExitStack() as stack,
        TemporaryDirectory(prefix="normdive-load-") as folder_name,
    ):
        folder = Path(folder_name)
        cluster = stack.enter_context(postgres_cluster(args.postgres))
        bare_url, bare = stack.enter_context(bare_server(args.workers, folder / "floor.sqlite3"))
        ceilings = [Server("bare", bare_url, bare.pid), Server("floor", bare_url, bare.pid)]
        lessons: list[Server] = []
        sqlite_url = f"sqlite:///{folder / 'load.sqlite3'}"
        url, process = stack.enter_context(normdive_server(sqlite_url, args.workers, **env))
        lessons.append(Server("sqlite", url, process.pid, sqlite_url))
        if cluster is not None:
            url, process = stack.enter_context(normdive_server(cluster.url, args.workers, **env))
            postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
            lessons.append(Server("postgresql", url, process.pid, cluster.url, postmaster))
        for server in [ceilings[0], *lessons]:
            wait_until_idle(server.group)
        if not args.skip_closed:
            learners: list[LearnerLoop] = [bare_learner, floor_learner]
            servers = list(zip(ceilings, learners, strict=True))
            servers += [(server, lesson_learner) for server in lessons]
            report(asyncio.run(closed_cells(servers, args.connections, args.seconds)))
        if args.page_cpu:
            page = [
                (s, loop) for s in lessons for loop in (returning_page_learner, new_page_learner)
            ]
            report_page(asyncio.run(closed_cells(page, args.connections[:1], args.seconds)))
        if args.burst:
            bursts = []
            for server in lessons:
                bursts.append(burst_cell(server, args.burst, args.burst_seconds))
                print(f"  {server.name} burst of {args.burst}", file=sys.stderr)
            report_burst(bursts, args.burst_seconds)
        if args.open_loop or args.search:
            cells: list[OpenCell] = []
            found: dict[str, float | None] = {}
            if args.open_loop:
                # The ceilings in the same 1:3 order: what this client and machine can do.
                mix = Server("bare+floor", bare_url, bare.pid)
                cells += open_cells(mix, args.open_loop, False, args)[0]
            for server in lessons:
                got, found[server.name] = open_cells(server, args.open_loop, args.search, args)
                cells += got
            print(
                f"open loop: Poisson arrivals over {args.pool} learners, {args.clients} client "
                f"processes; latency from each arrival's scheduled time"
            )
            report_open(cells)
            if args.search:
                report_search(found)
        if args.learners:
            from seed import seed_method

            report_seeded(seeded_runs(args, cluster, folder), seed_method(args.seed_fast))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
