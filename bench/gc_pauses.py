"""The garbage collector's pauses in a worker of `normdive serve`, with start-up frozen
(web.infrastructure.startup.served_app, gc.freeze) and not (web.app.create_app), side by side:

    .venv/bin/python bench/gc_pauses.py [--rounds 2] [--learners 40]

Each round runs each app in a process of its own, alternating, as a worker would: built,
then worked by bench/derives.py's mix (a page load, then three checks of six numbers, for
each learner) through Starlette's TestClient on a fresh SQLite file. What the first requests
build (the recording read, the cached views) is built after the freeze, as in a server.
Every collection's pause is timed from the collector's own callbacks, and one full
collection (gc.collect(), what an unlucky request waits behind) is timed on its own after
the mix.
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlencode

from derives import ORIGIN, numbers, settle_on_a_fresh_sqlite_file
from load import CHECKS_PER_PAGE, PREDICTION

LEARNERS = 40
PAGES = 10  # page loads per learner, each followed by its checks
ROUNDS = 2


class Pauses:
    """Each collection's pause, in milliseconds, by generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.by_generation: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            pause = (time.perf_counter() - self._started) * 1000
            self.by_generation[info["generation"]].append(pause)

    def clear(self) -> None:
        for pauses in self.by_generation.values():
            pauses.clear()


def work(client: Any, learners: int, pages: int) -> int:
    """bench/derives.py's mix for `learners` new learners; returns the requests sent."""
    sent = 0
    for _ in range(learners):
        client.cookies.clear()
        token = client.get("/api/state").json()["csrf_token"]
        headers = {"Accept": "application/json", "X-CSRF-Token": token, "Origin": ORIGIN}
        client.post("/predict", data={"choice": PREDICTION}, headers=headers)
        check = 0
        for _ in range(pages):
            assert client.get("/", headers={"Accept": "text/html"}).status_code == 200
            for _ in range(CHECKS_PER_PAGE):
                check += 1
                body = urlencode(numbers(check))
                form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
                assert client.post("/numbers", content=body, headers=form).status_code == 200
            sent += 1 + CHECKS_PER_PAGE
    return sent


def measure(frozen: bool, learners: int, pages: int) -> str:
    """One process's row of the table: the app built as `normdive serve` builds it (frozen)
    or without the freeze, then worked."""
    url = settle_on_a_fresh_sqlite_file("normdive-gc-")
    from starlette.testclient import TestClient

    from normdive.store.db import upgrade
    from normdive.web.app import create_app
    from normdive.web.infrastructure.startup import served_app

    upgrade(url)
    app = served_app() if frozen else create_app()
    kept = gc.get_freeze_count()
    pauses = Pauses()
    gc.callbacks.append(pauses)
    with TestClient(app) as client:
        requests = work(client, learners, pages)
    counts = " / ".join(str(len(p)) for p in pauses.by_generation.values())
    every = [p for ps in pauses.by_generation.values() for p in ps]
    started = time.perf_counter()
    gc.collect()
    full_ms = (time.perf_counter() - started) * 1000
    how = f"frozen ({kept:,})" if frozen else "not frozen"
    return (
        f"{how} | {requests} | {counts} | {sum(every):.1f} ms | "
        f"{max(every, default=0.0):.1f} ms | {full_ms:.1f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--learners", type=int, default=LEARNERS)
    parser.add_argument("--pages", type=int, default=PAGES)
    parser.add_argument("--one", choices=("frozen", "not-frozen"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:  # one process's row, asked for by main below
        print(measure(args.one == "frozen", args.learners, args.pages))
        return
    print(
        "| round | start-up | requests | collections (gen 0 / 1 / 2) | all pauses "
        "| longest pause | one full collection |"
    )
    print("|---|---|---|---|---|---|---|")
    for round_number in range(1, args.rounds + 1):
        for how in ("frozen", "not-frozen"):
            command = [sys.executable, __file__, "--one", how]
            command += ["--learners", str(args.learners), "--pages", str(args.pages)]
            row = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            print(f"| {round_number} | {row.strip()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
