"""Where a request's CPU goes: py-spy samples every thread of a one-worker `normdive serve`
on SQLite while bench/load.py's simulated learners work the page, and this prints the
functions with the most samples, inclusive (the function and what it calls) and exclusive:

    .venv/bin/pip install py-spy   # not a dependency of normdive; only this script uses it
    .venv/bin/python bench/profile_server.py [--seconds 15] [--connections 20] [--top 40]

After a warm-up (WARMUP_S), one worker, so one process holds every sample (uvicorn runs it
in the serving process). Only the thread holding the GIL is sampled (py-spy --gil): the
Python work. What runs with the GIL let go is not in the profile: SQLite's own work and its
wait for fsync, zlib's compression; bench/load.py measures the whole process's CPU. The
learners are load.py's own: the lesson's mix (lesson_learner), or with --page GET / alone, by
returning learners (returning_page_learner: cookie, opening prediction committed) or by new ones
(new_page_learner: no cookie on any request), the cells of `bench/load.py --page-cpu`:

    .venv/bin/python bench/profile_server.py --page returning
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from load import (
    ATTEMPTS_PER_MINUTE,
    Connection,
    LearnerLoop,
    Tally,
    lesson_learner,
    new_page_learner,
    returning_page_learner,
)
from servers import normdive_server

SAMPLING_RATE = 250  # samples per second
DEFAULT_SECONDS = 15.0
DEFAULT_CONNECTIONS = 20
DEFAULT_TOP = 40
# Learners work this long before sampling starts: the first requests of a fresh server pay
# for what is then kept (compiled templates, cached queries), which is not the steady state.
WARMUP_S = 3.0
# What the learners do: the lesson's mix, or GET / alone (--page WHO).
LEARNERS: dict[str, LearnerLoop] = {
    "mix": lesson_learner,
    "returning": returning_page_learner,
    "new": new_page_learner,
}
PAGE_LEARNERS = ("returning", "new")


async def drive(url: str, connections: int, seconds: float, learner: LearnerLoop) -> int:
    host, port = url.removeprefix("http://").split(":")
    pool = [Connection(host, int(port)) for _ in range(connections)]
    ready = asyncio.Event()
    tally = Tally(start=float("inf"), end=float("inf"))
    tasks = [asyncio.create_task(learner(c, tally, ready)) for c in pool]
    while tally.prepared < connections:
        await asyncio.sleep(0.05)
    tally.start, tally.end = time.perf_counter(), time.perf_counter() + seconds
    ready.set()
    await asyncio.gather(*tasks)
    for connection in pool:
        await connection.close()
    return sum(len(values) for values in tally.latencies.values())


def summarise(raw: Path, top: int) -> None:
    """Inclusive and exclusive sample counts per function from py-spy's raw (collapsed) stacks:
    one line per distinct stack, frames joined by ';', then a space and the count."""
    inclusive: collections.Counter[str] = collections.Counter()
    exclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame for frame in stack.split(";") if not frame.startswith("process ")]
        frames = [frame for frame in frames if not frame.startswith("thread ")]
        total += count
        for frame in set(frames):
            inclusive[frame] += count
        if frames:
            exclusive[frames[-1]] += count
    print(f"{total} samples")
    for title, counter in (("inclusive", inclusive), ("exclusive", exclusive)):
        print(f"\n## {title}: share of samples, function (file:line)")
        for frame, count in counter.most_common(top):
            print(f"{100 * count / max(1, total):5.1f} %  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    parser.add_argument("--connections", type=int, default=DEFAULT_CONNECTIONS)
    parser.add_argument("--top", type=int, default=DEFAULT_TOP)
    parser.add_argument("--keep", type=Path, help="also write py-spy's raw stacks here")
    parser.add_argument(
        "--page", choices=PAGE_LEARNERS, help="GET / alone, by returning or by new learners"
    )
    args = parser.parse_args()
    learner = LEARNERS[args.page or "mix"]
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        sys.exit("py-spy is not installed: .venv/bin/pip install py-spy")
    with TemporaryDirectory(prefix="normdive-profile-") as folder:
        url_db = f"sqlite:///{Path(folder) / 'profile.sqlite3'}"
        raw = Path(folder) / "stacks.txt"
        env = {"NORMDIVE_ATTEMPTS_PER_MINUTE": ATTEMPTS_PER_MINUTE}
        with normdive_server(url_db, 1, **env) as (url, process):
            asyncio.run(drive(url, args.connections, WARMUP_S, learner))
            sampler = subprocess.Popen(
                [
                    *(py_spy, "record", "--pid", str(process.pid), "--rate", str(SAMPLING_RATE)),
                    *("--format", "raw", "--output", str(raw), "--nonblocking", "--gil"),
                    *("--duration", str(int(args.seconds))),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            requests = asyncio.run(drive(url, args.connections, args.seconds, learner))
            sampler.wait()
        who = f"{args.page} learners, GET / alone" if args.page else "learners, the lesson's mix"
        print(f"{requests} requests in {args.seconds:g} s, {args.connections} {who}")
        if args.keep:
            shutil.copyfile(raw, args.keep)
        summarise(raw, args.top)


if __name__ == "__main__":
    main()
