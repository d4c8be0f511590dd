"""`normdive record-runs` once its options are parsed: pick the device, train the rows with
progress on the console, and write the recording (normdive.training.runner does the work).

Ctrl-C and a polite `kill` (SIGTERM) stop it alike: finished rows stay kept beside the output
for the next run to resume from, and the previous recording is left as it was.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import torch
from rich.console import Console

from normdive.recording.format import RowKey, RunConfig
from normdive.recording.summary import ranking_note, summary_table
from normdive.training.runner import RecordError, partial_dir, plan, record

EXIT_INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C
EXIT_FAILED = 1


class NoCudaDevice(Exception):
    """`--device cuda` was asked for, and this torch sees no CUDA device."""


def command_line() -> str:
    """The command as typed, when this process is the `normdive` script."""
    if Path(sys.argv[0]).name == "normdive":
        return shlex.join(["normdive", *sys.argv[1:]])
    return shlex.join(["normdive", "record-runs", *sys.argv[1:]])


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # a polite stop from `kill` ends as cleanly as Ctrl-C


def record_runs(
    config: RunConfig,
    rows: Sequence[RowKey],
    seeds: Sequence[int],
    *,
    device: str,
    jobs: int | None,
    out: Path,
    fresh: bool,
) -> int:
    """Train the rows and write the recording to `out`; returns the exit status.
    `device` is auto, cpu or cuda; `jobs` None means one process per CPU. Raises NoCudaDevice
    before anything is trained."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        raise NoCudaDevice("--device cuda: this torch sees no CUDA device (use cpu or auto).")
    tasks = plan(rows, seeds)
    job_count = min(jobs or os.cpu_count() or 1, len(tasks))
    console = Console(soft_wrap=True)  # paths and table lines stay whole in logs
    console.print(
        f"Recording {len(tasks)} row(s) on {device}"
        + (f" with {job_count} single-thread process(es)" if device == "cpu" else "")
        + f": depth {config.depth}, copy length {config.copy_length}, {config.steps} steps, "
        f"init {config.init}, seeds {', '.join(map(str, seeds))}."
    )
    previous = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    started = time.perf_counter()
    try:
        recording = record(
            config,
            tasks,
            seeds=seeds,
            device=device,
            jobs=job_count,
            out=out,
            command=command_line(),
            fresh=fresh,
            console=console,
        )
    except KeyboardInterrupt:
        console.print(
            f"Interrupted. Finished rows are kept in {partial_dir(out)}; run the same command "
            f"again to resume. {out} was not touched."
        )
        return EXIT_INTERRUPTED
    except RecordError as error:
        console.print(f"record-runs failed: {error}")
        console.print(f"Finished rows are kept in {partial_dir(out)}; {out} was not touched.")
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    size = out.stat().st_size
    console.print(f"Wrote {out} ({size / 1024:.1f} KiB) in {wall:.1f} s ({wall / 60:.1f} min).")
    for line in summary_table(recording):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(ranking_note(recording), markup=False, highlight=False, soft_wrap=True)
    return 0
