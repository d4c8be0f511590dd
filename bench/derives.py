"""How many times a request derives a learner's state, and the CPU a request takes, in-process:
bench/load.py's mix (a page load, GET /, then CHECKS_PER_PAGE checks of six wrong numbers,
POST /numbers) by LEARNERS learners one after another, through Starlette's TestClient on a
fresh SQLite file. The code measured is the normdive on sys.path, so a before-and-after run
names the old code on PYTHONPATH:

    PYTHONPATH=/tmp/before/src .venv/bin/python bench/derives.py
    .venv/bin/python bench/derives.py

Derivations are counted by wrapping web.infrastructure.services.derive, the one the app calls. The
CPU per request includes the test client's own work, the same for both runs: compare the two, not
the figure with bench/load.py's server CPU.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from load import CHECKS_PER_PAGE, PREDICTION, WRONG_NUMBERS

REPO = Path(__file__).resolve().parents[1]
LEARNERS = 20
PAGES = 10  # page loads per learner, each followed by its checks
ORIGIN = "http://testserver"


def numbers(n: int) -> dict[str, str]:
    """WRONG_NUMBERS, each told apart by trailing digits (an unchanged answer is a 409)."""
    dotted = {key: value if "." in value else f"{value}." for key, value in WRONG_NUMBERS.items()}
    return {key: f"{value}000{n}" for key, value in dotted.items()}


def settle_on_a_fresh_sqlite_file(prefix: str) -> str:
    """Set the environment the app reads its settings from: a fresh SQLite file (returns its
    URL), the shipped recording, 8.5 done, and the write and new-learner limits out of the
    way (every learner here comes from one address and writes as fast as it can)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    url = f"sqlite:///{folder / 'bench.sqlite3'}"
    os.environ.update(
        DATABASE_URL=url,
        NORMDIVE_SECRET_KEY=secrets.token_hex(32),
        NORMDIVE_DEV_PREREQUISITE_DONE="1",
        NORMDIVE_RECORDING_PATH=str(REPO / "recordings" / "the-transformer-block.json"),
        NORMDIVE_ATTEMPTS_PER_MINUTE=str(10**9),
        NORMDIVE_NEW_LEARNERS_PER_HOUR=str(10**9),
    )
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=LEARNERS)
    parser.add_argument("--pages", type=int, default=PAGES)
    args = parser.parse_args()
    url = settle_on_a_fresh_sqlite_file("normdive-derives-")
    from starlette.testclient import TestClient

    import normdive
    from normdive.store.db import upgrade
    from normdive.web.app import create_app
    from normdive.web.infrastructure import services

    upgrade(url)
    calls = 0
    derive = services.derive

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return derive(*args, **kwargs)

    services.derive = counted  # type: ignore[assignment]
    requests = failures = derived = 0
    cpu = 0.0
    with TestClient(create_app()) as client:
        for _ in range(args.learners):
            client.cookies.clear()
            token = client.get("/api/state").json()["csrf_token"]
            headers = {"Accept": "application/json", "X-CSRF-Token": token, "Origin": ORIGIN}
            client.post("/predict", data={"choice": PREDICTION}, headers=headers)
            calls, check = 0, 0
            started = time.process_time()
            for _ in range(args.pages):
                answers = [client.get("/", headers={"Accept": "text/html"}).status_code]
                for _ in range(CHECKS_PER_PAGE):
                    check += 1
                    body = urlencode(numbers(check))
                    form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
                    answers.append(client.post("/numbers", content=body, headers=form).status_code)
                requests += len(answers)
                failures += sum(status != 200 for status in answers)
            cpu += time.process_time() - started
            derived += calls
    print(f"normdive from {Path(normdive.__file__).parent}")
    print(
        f"{requests} requests ({args.learners} learners x {args.pages} pages x "
        f"(GET / + {CHECKS_PER_PAGE} POST /numbers)), {failures} not 200"
    )
    print(f"derivations per request: {derived / requests:.2f}")
    print(f"CPU per request (with the test client): {cpu / requests * 1000:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
