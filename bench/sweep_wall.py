"""Wall time and per-run costs of the depth sweep (goal: <= 60 minutes on 2 cores).

    .venv/bin/python bench/sweep_wall.py                   # read them from the sweep file
    .venv/bin/python bench/sweep_wall.py --sweep PATH      # another sweep file (a shard too)

The sweep file carries each command's wall time (a merged file, each shard's) and each run's
own, so this reads them; it trains nothing. Make the file with `normdive record-runs --sweep`
(docs/recording.md, "The depth sweep"), which takes about 45 minutes on 2 idle cores.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from normdive.config import DEFAULT_RECORDING_PATH
from normdive.recording.runs import Runs
from normdive.recording.sweep import sweep_path_for
from normdive.recording.sweep_reader import read_sweep

GOAL_S = 60 * 60


def report(sweep: Runs) -> None:
    for source in sweep.provenance:
        print(f"command: {source.command}")
        print(
            f"device: {source.device}; {source.jobs} job(s) x {source.threads_per_job} "
            f"thread(s); created {source.created_at}; runs resumed: {source.rows_resumed}"
        )
        verdict = "met" if source.wall_s <= GOAL_S else "NOT met"
        print(
            f"wall time (recorded by the command): {source.wall_s:.0f} s = "
            f"{source.wall_s / 60:.1f} min = {source.wall_s / GOAL_S:.2f}x the goal "
            f"(<= {GOAL_S / 60:.0f} min): {verdict}"
        )
    by_depth: dict[int, list[float]] = defaultdict(list)
    for run in sweep.runs:
        by_depth[run.config.depth].append(run.wall_s)
    print("| depth | runs | seconds per run: median | min | max | summed |")
    print("|---|---|---|---|---|---|")
    for depth, times in sorted(by_depth.items()):
        print(
            f"| {depth} | {len(times)} | {statistics.median(times):.1f} | {min(times):.1f} | "
            f"{max(times):.1f} | {sum(times):.0f} |"
        )
    summed = sum(run.wall_s for run in sweep.runs)
    wall = sum(source.wall_s for source in sweep.provenance)
    jobs = max(source.jobs for source in sweep.provenance)
    print(
        f"sum of run times: {summed:.0f} s; parallel speed-up {summed / wall:.2f}x on {jobs} job(s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", type=Path, default=sweep_path_for(DEFAULT_RECORDING_PATH))
    report(read_sweep(parser.parse_args().sweep))


if __name__ == "__main__":
    main()
