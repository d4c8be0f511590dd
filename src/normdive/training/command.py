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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TypeVar

from rich.console import Console

from normdive.lab.config import LabBase
from normdive.recording.format import RowKey, RunConfig
from normdive.recording.runs import LabOffered, ShardPart
from normdive.recording.summary import ranking_note, summary_table
from normdive.recording.sweep import (
    CUDA_EXTRA_DEPTHS,
    SWEEP_DEPTHS,
    TRIM_DEPTH,
    default_plan,
    relative_cost,
)
from normdive.recording.sweep_reader import sweep_summary
from normdive.training.lab_record import CELL, LAB_DEVICE, LabCells, lab_summary, record_lab
from normdive.training.runner import ROW, Recorder, RecordError, partial_dir, plan, record
from normdive.training.sweep import RUN, record_sweep

EXIT_INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C
EXIT_FAILED = 1


class NoCudaDevice(Exception):
    """`--device cuda` was asked for, and this torch sees no CUDA device."""


def command_line() -> str:
    """The command as typed, when this process is the `normdive` script."""
    if Path(sys.argv[0]).name == "normdive":
        return shlex.join(["normdive", *sys.argv[1:]])
    return shlex.join(["normdive", "record-runs", *sys.argv[1:]])


def resolve_device(device: str) -> str:
    """auto, cpu or cuda as the device to train on; raises NoCudaDevice. Only auto and cuda
    import torch here: on the CPU, the rows train in worker processes of their own."""
    if device == "cpu":
        return device
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise NoCudaDevice("--device cuda: this torch sees no CUDA device (use cpu or auto).")
    return device


# What a recording command writes: the recording, the sweep or the lab grid.
RecordedT = TypeVar("RecordedT")


def job_count(jobs: int | None, units: int) -> int:
    """The worker processes to start: `jobs`, or one per CPU, but no more than the units."""
    return min(jobs or os.cpu_count() or 1, max(1, units))


def _recorded(
    console: Console,
    out: Path,
    noun: str,
    name: str,
    work: Callable[[], RecordedT],
    summary: Callable[[RecordedT], list[str]],
) -> int:
    """Run `work` (which writes `out` whole, or leaves it as it was), with SIGTERM as Ctrl-C;
    then say what was written, how long it took, and its `summary`. Returns the exit status:
    0, or EXIT_INTERRUPTED or EXIT_FAILED (its finished `noun`s stay kept)."""
    previous = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    started = time.perf_counter()
    try:
        result = work()
    except KeyboardInterrupt:
        console.print(
            f"Interrupted. Finished {noun}s are kept in {partial_dir(out)}; run the same "
            f"command again to resume. {out} was not touched."
        )
        return EXIT_INTERRUPTED
    except RecordError as error:
        console.print(f"{name} failed: {error}")
        console.print(f"Finished {noun}s are kept in {partial_dir(out)}; {out} was not touched.")
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - started
    size = out.stat().st_size
    console.print(f"Wrote {out} ({size / 1024:.1f} KiB) in {wall:.1f} s ({wall / 60:.1f} min).")
    for line in summary(result):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # a polite stop from `kill` ends as cleanly as Ctrl-C


@dataclass(frozen=True)
class Asked:
    """What record-runs was asked, whatever the plan: the `device` (auto, cpu or cuda), the
    worker processes (`jobs`; None: one per CPU), where the file goes (`out`), whether to drop
    the runs kept from an interrupted call (`fresh`), and the `shard` (I, N) to train (None:
    the whole plan)."""

    device: str
    jobs: int | None
    out: Path
    fresh: bool
    shard: tuple[int, int] | None = None

    @property
    def part(self) -> ShardPart | None:
        return None if self.shard is None else ShardPart(index=self.shard[0], count=self.shard[1])

    def recorder(self, device: str, processes: int, console: Console) -> Recorder:
        return Recorder(device, processes, self.out, command_line(), self.fresh, console)


def record_runs(
    config: RunConfig, rows: Sequence[RowKey], seeds: Sequence[int], asked: Asked
) -> int:
    """Train the rows (or the shard of them asked) and write the recording; returns the exit
    status. Raises NoCudaDevice before anything is trained."""
    device, part, out = resolve_device(asked.device), asked.part, asked.out
    tasks = (
        plan(config, rows, seeds)[part.index - 1 :: part.count]
        if part
        else plan(config, rows, seeds)
    )
    processes = job_count(asked.jobs, len(tasks))
    console = Console(soft_wrap=True)  # paths and table lines stay whole in logs
    console.print(
        f"Recording {len(tasks)} row(s)"
        + (f" (shard {part.index} of {part.count})" if part else "")
        + f" on {device}"
        + (f" with {processes} single-thread process(es)" if device == "cpu" else "")
        + f": depth {config.depth}, copy length {config.copy_length}, {config.steps} steps, "
        f"init {config.init}, seeds {', '.join(map(str, seeds))}."
    )
    return _recorded(
        console,
        out,
        ROW,
        "record-runs",
        lambda: record(
            config, rows, asked.recorder(device, processes, console), seeds=seeds, shard=part
        ),
        lambda recording: [*summary_table(recording), ranking_note(recording)],
    )


def record_sweep_runs(
    config: RunConfig,
    rows: Sequence[RowKey],
    seeds: Sequence[int],
    asked: Asked,
    *,
    depths: Sequence[int] | None,
) -> int:
    """Train the depth sweep (or the shard of it asked) and write it; returns the exit
    status. `depths` None means the default depths, and depth 32 too on CUDA. On the CPU the
    default trims the seeds from depth 16 on (recording.sweep.TRIM_DEPTH); on CUDA it does
    not. Raises NoCudaDevice before anything is trained."""
    device, part, out = resolve_device(asked.device), asked.part, asked.out
    chosen_depths = (
        list(depths)
        if depths is not None
        else [*SWEEP_DEPTHS, *(CUDA_EXTRA_DEPTHS if device == "cuda" else ())]
    )
    sweep_plan = default_plan(
        chosen_depths,
        seeds,
        rows=rows,
        base=config,
        trim_depth=None if device == "cuda" else TRIM_DEPTH,
    ).model_copy(update={"shard": part})
    runs = sweep_plan.sharded()
    processes = job_count(asked.jobs, len(runs))
    console = Console(soft_wrap=True)
    depth_text = "; ".join(
        f"depth {entry.depth} seeds {', '.join(map(str, entry.seeds))}"
        for entry in sweep_plan.depths
    )
    console.print(
        "Recording the depth sweep"
        + (f", shard {part.index} of {part.count}" if part else "")
        + f": {len(runs)} run(s) on {device}"
        + (f" with {processes} single-thread process(es)" if device == "cpu" else "")
        + f"; {depth_text}; inits {', '.join(sweep_plan.inits)}; copy length "
        f"{config.copy_length}, width {config.d_model}, {config.steps} steps. "
        f"Relative cost {sum(relative_cost(r.depth) for r in runs):.0f} (one run at depth 8: "
        f"{relative_cost(8):.1f}). Writing {out}."
    )
    return _recorded(
        console,
        out,
        RUN,
        "record-runs --sweep",
        lambda: record_sweep(sweep_plan, asked.recorder(device, processes, console)),
        sweep_summary,
    )


def record_lab_runs(
    base: LabBase,
    offered: LabOffered,
    rows: Sequence[RowKey],
    asked: Asked,
    *,
    extra_eps_seeds: Sequence[int] | None,
) -> int:
    """Train the lab grid (docs/lab.md, "The grid file"), or the shard of it asked, on the
    CPU (whatever `asked.device` says) and write it; returns the exit status.
    `extra_eps_seeds`: the seeds at which the offered eps values other than the default are
    recorded (None: every seed); the file says what was left out."""
    lab_cells = LabCells(
        offered,
        tuple(rows),
        None if extra_eps_seeds is None else tuple(extra_eps_seeds),
    )
    part, out = asked.part, asked.out
    cells = len(lab_cells.points(base, part))
    processes = job_count(asked.jobs, cells)
    console = Console(soft_wrap=True)
    console.print(
        "Recording the lab grid"
        + (f", shard {part.index} of {part.count}" if part else "")
        + f": {cells} cell(s) on {LAB_DEVICE} with {processes} single-thread "
        f"process(es); depths {', '.join(map(str, offered.depths))}; inits "
        f"{', '.join(offered.inits)}; eps {', '.join(f'{e:g}' for e in offered.eps)}; seeds "
        f"{', '.join(map(str, offered.seeds))}; width {base.d_model}, copy length "
        f"{base.copy_length}, batch {base.batch_size}, {base.steps} steps. Writing {out}."
        + (f" Trimmed: {lab_cells.trimmed()}" if lab_cells.trimmed() else "")
    )
    return _recorded(
        console,
        out,
        CELL,
        "record-runs --lab",
        lambda: record_lab(
            base, lab_cells, asked.recorder(LAB_DEVICE, processes, console), shard=part
        ),
        lab_summary,
    )
