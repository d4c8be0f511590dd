"""Wall time of the default recording on this machine (goal: <= 15 minutes on 2 cores).

    .venv/bin/python bench/recording_wall.py          # read it from the shipped recording
    .venv/bin/python bench/recording_wall.py --run    # run the default command again (minutes)

The shipped file carries its own wall time and each row's, so reading it needs no new run.
With --run the default `normdive record-runs` goes to a temporary file (the shipped one is
not touched) and the same figures are printed from what it wrote.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from normdive.config import DEFAULT_RECORDING_PATH
from normdive.recording.reader import read_recording
from normdive.recording.runs import Runs

GOAL_S = 15 * 60


def report(recording: Runs, measured_s: float | None) -> None:
    source = recording.provenance[0]
    steps = recording.plan.base.steps
    rows_s = sum(run.wall_s for run in recording.runs)
    print(f"command: {source.command}")
    print(
        f"device: {source.device}; {source.jobs} job(s) x {source.threads_per_job} thread(s); "
        f"created {source.created_at}"
    )
    print(
        f"rows: {len(recording.runs)}; steps per row {steps}; "
        f"rows resumed from an earlier run: {source.rows_resumed}"
    )
    print(
        f"wall time (recorded by the command): {source.wall_s:.0f} s = {source.wall_s / 60:.1f} "
        f"min = {source.wall_s / GOAL_S:.2f}x the goal (<= {GOAL_S / 60:.0f} min): "
        f"{'met' if source.wall_s <= GOAL_S else 'NOT met'}"
    )
    if measured_s is not None:
        print(f"wall time (measured around the process): {measured_s:.0f} s")
    print(
        f"sum of row times: {rows_s:.0f} s; parallel speed-up {rows_s / source.wall_s:.2f}x "
        f"on {source.jobs} job(s)"
    )
    per_step = [run.wall_s / steps for run in recording.runs]
    print(f"seconds per update, incl. evaluation: min {min(per_step):.3f}, max {max(per_step):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="store_true", help="run the default command again")
    parser.add_argument("--recording", type=Path, default=DEFAULT_RECORDING_PATH)
    args = parser.parse_args()
    if not args.run:
        report(read_recording(args.recording), None)
        return
    normdive = str(Path(sys.executable).parent / "normdive")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "the-transformer-block.json"
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        start = time.perf_counter()
        subprocess.run([normdive, "record-runs", "--out", str(out)], check=True)
        measured = time.perf_counter() - start
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        report(read_recording(out), measured)


if __name__ == "__main__":
    main()
