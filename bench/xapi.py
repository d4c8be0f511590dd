"""xAPI benchmark: the outbox's delivery rate to a real Ralph, and what an LRS being set costs
the server, side by side in one run:

    .venv/bin/python bench/xapi.py                       # defaults below
    .venv/bin/python bench/xapi.py --learners 400 --seconds 20

Delivery. A SQLite store with Ralph (scripts/ralph_lrs.py) set as its LRS is filled through
normdive's Store with LEARNERS learners who each work the lesson to the gate (their events
queued by the trigger, 17 statements each); then one `Sender` in this process delivers the
outbox round after round. Printed: statements delivered per second, and the time to drain.

Server CPU. `normdive serve` (one worker, SQLite) answers the lesson mix of bench/load.py (a
page load, then three checks of six wrong numbers, over and over; CONNECTIONS learners on
keep-alive connections) for SECONDS, once without an LRS and once with Ralph set (every
check queued for it by the trigger; no sender runs, so only the server's own cost is
measured), alternating, ROUNDS times each. Printed: the server's CPU per request (its process
group's, from /proc) in each, and with over without (goal: within 5 %).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
sys.path.insert(0, str(HERE))
from ralph_lrs import RalphServer  # noqa: E402

from load import wrong_numbers  # noqa: E402
from normdive.lesson.content import load_lesson  # noqa: E402
from normdive.progress.events import EventKind  # noqa: E402
from normdive.store.db import make_engine  # noqa: E402
from normdive.store.event_store import Store  # noqa: E402
from normdive.xapi import lrs as stores  # noqa: E402
from normdive.xapi.outbox import Sender  # noqa: E402
from normdive.xapi.statements import Tool  # noqa: E402
from servers import group_cpu_s, migrate, normdive_server, wait_until_idle  # noqa: E402

LEARNERS = 200
CONNECTIONS = 4
SECONDS = 15.0
WARM_UP_S = 3.0
ROUNDS = 2
ORIGIN = "https://d9.example.edu"
ANSWERS = {
    "row1_mean": ("6", "wrong", "mean_not_divided"),
    "row1_variance": ("2/3", "right", None),
    "row1_denominator": ("0.8165", "right", None),
    "row2_mean": ("3", "right", None),
    "row2_variance": ("3", "right", None),
    "row2_denominator": ("1.732", "right", None),
}


def lesson_events(store: Store, learner: str) -> None:
    """A learner's lesson to the gate, as the app appends it: 17 statements."""
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    answers = [
        {"field": f, "raw": raw, "parsed": raw, "verdict": v, "slip": slip, "message": None}
        for f, (raw, v, slip) in ANSWERS.items()
    ]
    store.append(learner, EventKind.NUMBERS_CHECKED, {"answers": answers})
    store.append(learner, EventKind.READING_LOCKED, {"choice": "keeps_finite", "right": True})
    for row in ("both", "residual_only", "layernorm_only", "neither"):
        store.append(learner, EventKind.ROW_PREDICTED, {"row": row, "outcome": "learns"})
    for row in ("both", "residual_only", "layernorm_only", "neither"):
        store.append(learner, EventKind.ROW_PLAYED, {"row": row})
    store.append(
        learner, EventKind.GATE_CLOSED, {"recording_digest": "0" * 64, "recording_file": "r.json"}
    )


def delivery(ralph: RalphServer, folder: Path, learners: int) -> None:
    url = f"sqlite:///{folder / 'delivery.sqlite3'}"
    migrate(url)
    engine = make_engine(url)
    stores.add(engine, "ralph", ralph.statements_url, ralph.key, ralph.secret)
    store = Store(engine)
    for _ in range(learners):
        lesson_events(store, store.create_learner())
    tool = Tool(origin=ORIGIN, version="bench", lesson=load_lesson())
    delivered = 0
    started = time.perf_counter()
    with Sender(engine, tool) as sender:
        while True:
            report = sender.send_due()
            delivered += report.statements
            if not report.tried:
                break
    elapsed = time.perf_counter() - started
    engine.dispose()
    print(
        f"delivery: {delivered} statements of {learners} learners to Ralph in {elapsed:.1f} s: "
        f"{delivered / elapsed:.0f} statements/s"
    )


def learner_loop(base: str, stop: threading.Event, counts: list[int]) -> None:
    with httpx.Client(base_url=base, timeout=30) as client:
        token = client.get("/api/state", headers={"Accept": "application/json"}).json()
        headers = {"Accept": "application/json", "X-CSRF-Token": token["csrf_token"]}
        client.post("/predict", data={"choice": "residual"}, headers=headers)
        n = 0
        while not stop.is_set():
            client.get("/")
            counts.append(1)
            for _ in range(3):
                n += 1
                client.post("/numbers", data=wrong_numbers(n), headers=headers)
                counts.append(1)


def cpu_per_request(ralph: RalphServer | None, folder: Path, name: str, seconds: float) -> float:
    url = f"sqlite:///{folder / f'{name}.sqlite3'}"
    migrate(url)
    if ralph is not None:
        engine = make_engine(url)
        stores.add(engine, "ralph", ralph.statements_url, ralph.key, ralph.secret)
        engine.dispose()
    limits = {"NORMDIVE_ATTEMPTS_PER_MINUTE": str(10**9)}
    with normdive_server(url, **limits) as (base, process):
        wait_until_idle(process.pid)
        stop = threading.Event()
        counts: list[int] = []
        threads = [
            threading.Thread(target=learner_loop, args=(base, stop, counts))
            for _ in range(CONNECTIONS)
        ]
        for thread in threads:
            thread.start()
        time.sleep(WARM_UP_S)
        before_cpu, before_n = group_cpu_s(process.pid), len(counts)
        time.sleep(seconds)
        cpu, n = group_cpu_s(process.pid) - before_cpu, len(counts) - before_n
        stop.set()
        for thread in threads:
            thread.join()
    return cpu / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=LEARNERS)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, RalphServer() as ralph:
        folder = Path(name)
        delivery(ralph, folder, args.learners)
        without: list[float] = []
        with_lrs: list[float] = []
        for round_number in range(args.rounds):
            without.append(cpu_per_request(None, folder, f"off{round_number}", args.seconds))
            with_lrs.append(cpu_per_request(ralph, folder, f"on{round_number}", args.seconds))
            print(
                f"round {round_number + 1}: server CPU per request without an LRS "
                f"{without[-1]:.2f} ms, with Ralph set {with_lrs[-1]:.2f} ms"
            )
        off, on = statistics.median(without), statistics.median(with_lrs)
        ok = "met" if on / off <= 1.05 else "NOT met"
        print(
            f"lesson mix, server CPU per request (median of {args.rounds}): without an LRS "
            f"{off:.2f} ms, with an LRS set {on:.2f} ms: {on / off:.3f}x (goal <= 1.05x: {ok})"
        )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
