"""What building the app (web.app.create_app) costs, with the process's compiled templates
kept (web.views.rendering.COMPILED_TEMPLATES, as every app after the first finds them) and emptied
before each build (as the first app finds them), alternating:

    .venv/bin/python bench/app_start.py [--rounds 5]

The test suite builds an app for each test that goes through one (several hundred), so this
is per-test set-up; a server builds one per worker.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="normdive-app-start-"))
    url = f"sqlite:///{folder / 'bench.sqlite3'}"
    os.environ.update(DATABASE_URL=url, NORMDIVE_SECRET_KEY=secrets.token_hex(32))
    from normdive.store.db import upgrade
    from normdive.web.app import create_app
    from normdive.web.views import rendering

    upgrade(url)
    create_app()  # imports and first-time work out of the way
    timings: dict[str, list[float]] = {"kept": [], "emptied": []}
    for _ in range(args.rounds):
        for how, times in timings.items():
            if how == "emptied":
                rendering.COMPILED_TEMPLATES.clear()
            started = time.process_time()
            create_app()
            times.append((time.process_time() - started) * 1000)
    for how, values in timings.items():
        shown = ", ".join(f"{v:.0f}" for v in values)
        median = statistics.median(values)
        print(f"create_app, compiled templates {how}: median {median:.1f} ms CPU ({shown})")
    ratio = statistics.median(timings["emptied"]) / statistics.median(timings["kept"])
    print(f"emptied / kept: {ratio:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
