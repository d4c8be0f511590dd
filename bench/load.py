"""Load benchmark: simulated learners against a real `normdive serve`, on SQLite and on
PostgreSQL, with a bare FastAPI endpoint served the same way as the ceiling, in one run:

    .venv/bin/python bench/load.py

Each connection is one learner on one HTTP/1.1 keep-alive connection (a small asyncio client,
127.0.0.1 only), closed loop: the next request leaves as soon as the last answer is in. A
learner first takes its cookie and form token (GET /api/state) and commits the opening
prediction; then, timed, it checks the six numbers (POST /numbers, `Accept: application/json`,
wrong answers, so every check is an evaluated run and the fields stay open)
CHECKS_PER_PAGE times for every page it loads (GET /), like a learner working at the hand
computation. The bare endpoint's learners GET its one route. Per cell: a warm-up, then a fixed
window (bounded in time); requests/s and p50/p99 latency of the answers completed in the
window, the ratio to the bare endpoint at the same concurrency, the CPU the server and this
client used, and Little's law's reading of the figures.

PostgreSQL comes from scripts/pg_cluster.py (a throwaway cluster); `--no-postgres` skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from urllib.parse import urlencode, urlsplit

from servers import REPO, bare_server, group_cpu_s, normdive_server

sys.path.insert(0, str(REPO / "scripts"))

CONNECTIONS = (50, 200)
WORKERS = 2  # one per core of this machine
WARMUP_S = 2.0
MEASURE_S = 10.0
CHECKS_PER_PAGE = 3
# The goal (issue 5): at least half the bare endpoint's requests/s with p99 <= 50 ms, on SQLite.
GOAL_RATIO = 0.5
GOAL_P99_MS = 50.0
# The writes of these learners are the benchmark, not a script to brake (web.security).
ATTEMPTS_PER_MINUTE = "100000000"
PREDICTION = "residual"
# Six well-formed wrong answers (the right ones would land and close the fields).
WRONG_NUMBERS = {
    "row1_mean": "2.5",
    "row1_variance": "1",
    "row1_denominator": "1.5",
    "row2_mean": "0.5",
    "row2_variance": "3",
    "row2_denominator": "0.25",
}


def wrong_numbers(n: int) -> dict[str, str]:
    """WRONG_NUMBERS told apart by trailing digits ("2.50007"), still as wrong: an answer
    unchanged since a field's last check is not checked again, so a repeated one is a 409."""
    return {
        field: f"{value}{'' if '.' in value else '.'}000{n}"
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


async def lesson_learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
    state = (await connection.request("GET", "/api/state")).json()
    token = str(state.get("csrf_token", "")) if isinstance(state, dict) else ""
    form_headers = {
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-CSRF-Token": token,
        "Origin": f"http://{connection.host}:{connection.port}",
    }
    predicted = await connection.request(
        "POST", "/predict", headers=form_headers, body=urlencode({"choice": PREDICTION}).encode()
    )
    if predicted.status != 200:
        raise HttpError(f"POST /predict answered {predicted.status}: {predicted.body[:200]!r}")
    checks = 0
    tally.prepared += 1
    await ready.wait()
    while (now := time.perf_counter()) < tally.end:
        reply = await connection.request("GET", "/", headers={"Accept": "text/html"})
        tally.record("GET /", now, time.perf_counter(), reply.status == 200, reply.status)
        for _ in range(CHECKS_PER_PAGE):
            sent = time.perf_counter()
            if sent >= tally.end:
                break
            checks += 1
            numbers = urlencode(wrong_numbers(checks)).encode()
            reply = await connection.request("POST", "/numbers", headers=form_headers, body=numbers)
            tally.record(
                "POST /numbers", sent, time.perf_counter(), reply.status == 200, reply.status
            )


async def bare_learner(connection: Connection, tally: Tally, ready: asyncio.Event) -> None:
    await connection.request("GET", "/")
    tally.prepared += 1
    await ready.wait()
    while (sent := time.perf_counter()) < tally.end:
        reply = await connection.request("GET", "/")
        tally.record("GET /", sent, time.perf_counter(), reply.status == 200, reply.status)


# --- one cell --------------------------------------------------------------------------------


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU ticks of the whole machine so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


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

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def all_latencies(self) -> list[float]:
        return [value for values in self.latencies.values() for value in values]


def percentile_ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_cell(
    name: str, url: str, server_group: int, connections: int, lesson: bool, measure_s: float
) -> Cell:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    pool = [Connection(host, port) for _ in range(connections)]
    ready = asyncio.Event()
    # The window is fixed once every learner has its cookie; `end` is set then.
    tally = Tally(start=float("inf"), end=float("inf"))
    learner = lesson_learner if lesson else bare_learner
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
    cpu_server, cpu_client, busy = group_cpu_s(server_group), os.times(), machine_busy()
    await asyncio.sleep(measure_s)
    server_cpu = group_cpu_s(server_group) - cpu_server
    client = os.times()
    client_cpu = (client.user + client.system) - (cpu_client.user + cpu_client.system)
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
    )


# --- the run ---------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_url(enabled: bool) -> Iterator[str | None]:
    if not enabled:
        yield None
        return
    from pg_cluster import PostgresCluster

    with PostgresCluster() as cluster:
        yield cluster.url


def report(cells: list[Cell]) -> None:
    print(
        "| server | conns | requests/s | p50 ms | p99 ms | x bare | GET / p50/p99 ms "
        "| POST /numbers p50/p99 ms | server CPU | server CPU per request | client CPU "
        "| machine busy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    bare = {cell.connections: cell.rps for cell in cells if cell.server == "bare"}
    for cell in cells:
        values = cell.all_latencies()
        ratio = cell.rps / bare[cell.connections] if cell.connections in bare else float("nan")

        def kind(name: str, cell: Cell = cell) -> str:
            got = cell.latencies.get(name)
            if not got:
                return "-"
            return f"{percentile_ms(got, 0.5):.1f} / {percentile_ms(got, 0.99):.1f}"

        print(
            f"| {cell.server} | {cell.connections} | {cell.rps:,.0f} "
            f"| {percentile_ms(values, 0.5):.1f} | {percentile_ms(values, 0.99):.1f} "
            f"| {ratio:.2f}x | {kind('GET /')} | {kind('POST /numbers')} "
            f"| {cell.server_cpu_s / cell.seconds:.2f} cores "
            f"| {1000 * cell.server_cpu_s / max(1, cell.requests):.2f} ms "
            f"| {cell.client_cpu_s / cell.seconds:.2f} cores | {100 * cell.machine_busy:.0f} % |"
        )
    for cell in cells:
        if cell.unexpected or cell.reconnects:
            print(
                f"{cell.server} x{cell.connections}: unexpected answers {cell.unexpected or 0}; "
                f"reconnects {cell.reconnects}"
            )
    for cell in cells:
        if cell.server == "bare":
            continue
        values = cell.all_latencies()
        mean_ms = 1000 * statistics.fmean(values) if values else float("nan")
        needed = cell.connections / (GOAL_P99_MS / 1000)
        print(
            f"Little's law, {cell.server} x{cell.connections}: {cell.rps:,.0f} req/s x "
            f"{mean_ms:.1f} ms mean = {cell.rps * mean_ms / 1000:.0f} requests in flight; "
            f"a mean of {GOAL_P99_MS:.0f} ms at {cell.connections} connections needs "
            f">= {needed:,.0f} req/s"
        )
    bare_cpu = {
        cell.connections: cell.server_cpu_s / max(1, cell.requests)
        for cell in cells
        if cell.server == "bare"
    }
    for cell in cells:
        if cell.server == "bare" or cell.connections not in bare_cpu:
            continue
        ours = cell.server_cpu_s / max(1, cell.requests)
        print(
            f"CPU per request, {cell.server} x{cell.connections}: {1000 * ours:.2f} ms against the "
            f"bare endpoint's {1000 * bare_cpu[cell.connections]:.2f} ms: on the same cores, at "
            f"most {bare_cpu[cell.connections] / ours:.2f}x its requests/s"
        )
    for cell in cells:
        if cell.server != "sqlite" or cell.connections not in bare:
            continue
        ratio = cell.rps / bare[cell.connections]
        p99 = percentile_ms(cell.all_latencies(), 0.99)
        met = ratio >= GOAL_RATIO and p99 <= GOAL_P99_MS
        print(
            f"goal on SQLite x{cell.connections} (>= {GOAL_RATIO}x bare at p99 <= "
            f"{GOAL_P99_MS:.0f} ms): {ratio:.2f}x at p99 {p99:.1f} ms: "
            f"{'met' if met else 'NOT met'}"
        )


async def run(args: argparse.Namespace) -> list[Cell]:
    cells: list[Cell] = []
    with contextlib.ExitStack() as stack, TemporaryDirectory(prefix="normdive-load-") as folder:
        env = {"NORMDIVE_ATTEMPTS_PER_MINUTE": ATTEMPTS_PER_MINUTE}
        servers: list[tuple[str, str, int, bool]] = []
        bare_url, bare = stack.enter_context(bare_server(args.workers))
        servers.append(("bare", bare_url, bare.pid, False))
        sqlite_url = f"sqlite:///{Path(folder) / 'load.sqlite3'}"
        url, process = stack.enter_context(normdive_server(sqlite_url, args.workers, **env))
        servers.append(("sqlite", url, process.pid, True))
        pg = stack.enter_context(postgres_url(args.postgres))
        if pg is not None:
            url, process = stack.enter_context(normdive_server(pg, args.workers, **env))
            servers.append(("postgresql", url, process.pid, True))
        for connections in args.connections:
            for name, url, group, lesson in servers:
                cell = await run_cell(name, url, group, connections, lesson, args.seconds)
                cells.append(cell)
                print(f"  {name} x{connections}: {cell.rps:,.0f} req/s", file=sys.stderr)
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=MEASURE_S, help="measured window")
    parser.add_argument("--connections", type=int, nargs="+", default=list(CONNECTIONS))
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--no-postgres", dest="postgres", action="store_false")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    print(
        f"cores {os.cpu_count()}, server workers {args.workers}, load average {load_before:.2f}; "
        f"{WARMUP_S:.0f} s warm-up + {args.seconds:.0f} s measured per cell; "
        f"lesson learners: {CHECKS_PER_PAGE} x POST /numbers per GET /",
        flush=True,
    )
    cells = asyncio.run(run(args))
    report(cells)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
