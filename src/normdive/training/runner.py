"""Recording the ablation: plan the rows, train them, keep each finished row beside the
output, and write the recording in one atomic step.

On the CPU the rows train in worker processes with one thread each (on a 2-core machine two
single-thread processes beat one two-thread process: the model's matmuls are too small to
split well). On CUDA they train one after the other in this process.

Interruption: every finished row is written at once to `<out>.partial/<row>-seed<k>.json`
(itself atomically), next to a `run.json` naming the config it belongs to. A rerun with the
same config and device keeps those rows and trains the rest; a different config starts over.
The recording itself is written to `<out>.tmp`, read back and validated, then renamed over
`<out>`: the previous file is never left half-written.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import shutil
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from rich.console import Console

from normdive.recording.files import UnfaithfulWrite, write_atomically, write_runs
from normdive.recording.format import ROW_KEYS, ROW_SWITCHES, Provenance, RowKey, RunConfig
from normdive.recording.runs import (
    LESSON,
    RUNS_FORMAT_VERSION,
    AblationPlan,
    PlanKind,
    Run,
    Runs,
    RunSettings,
    ShardPart,
    runs_file,
    settings_at,
)
from normdive.training.progress import Planned, RunProgress
from normdive.training.provenance import provenance

THREADS_PER_JOB = 1  # see the module docstring and bench/RESULTS.md
POLL_S = 0.2  # how often the parent checks on its workers while no event arrives
JOIN_S = 5.0  # how long a stopped worker gets to exit before it is killed
ROW = "row"  # one job of the ablation, on the console


class RecordError(Exception):
    """A run that cannot go on; the message says why and what is kept."""


@dataclass(frozen=True)
class Job:
    """One row to train: under `name` its row is kept beside the output; `cost` is relative
    to the command's other jobs (for the estimate of the time left)."""

    name: str
    label: str
    config: RunConfig
    key: RowKey
    seed: int
    cost: float = 1.0

    @property
    def planned(self) -> Planned:
        return Planned(self.name, self.label, self.cost)

    @property
    def settings(self) -> RunSettings:
        """The whole configuration of the run this job trains."""
        layernorm, residual = ROW_SWITCHES[self.key]
        return settings_at(self.config, layernorm=layernorm, residual=residual, seed=self.seed)


class WorkerJob(Protocol):
    """What a worker process is handed for one run: a row of the ablation or the sweep
    (Job), or a cell of the lab grid (training/lab_record.py)."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> BaseModel: ...
    @property
    def key(self) -> str: ...
    @property
    def seed(self) -> int: ...


def row_job(config: RunConfig, key: RowKey, seed: int) -> Job:
    """The job that trains the ablation's row `key` at `seed`, kept as <row>-seed<k>.json."""
    return Job(f"{key}-seed{seed}", f"{key} seed {seed}", config, key, seed)


def plan(config: RunConfig, rows: Sequence[RowKey], seeds: Sequence[int]) -> list[Job]:
    """Seed by seed, in the page's row order, so the page's seed finishes first."""
    return [row_job(config, key, seed) for seed in seeds for key in rows]


def partial_dir(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


class PartialRows:
    """The finished rows of an unfinished run, beside the output."""

    def __init__(self, out: Path, fingerprint: dict[str, Any], *, fresh: bool) -> None:
        self.dir = partial_dir(out)
        self.fingerprint = fingerprint
        stamp = self.dir / "run.json"
        if self.dir.exists():
            try:
                same = json.loads(stamp.read_text(encoding="utf-8")) == fingerprint
            except (OSError, ValueError):
                same = False
            if fresh or not same:
                shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        if not stamp.exists():
            write_atomically(stamp, json.dumps(fingerprint, indent=1, sort_keys=True))

    def path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def kept(self, name: str, settings: RunSettings) -> Run | None:
        """The run kept under `name`, or None when absent, unreadable or not at `settings`
        (then it is trained again)."""
        try:
            run = Run.model_validate_json(self.path(name).read_bytes())
        except (OSError, ValueError):
            return None
        return run if run.config == settings else None

    def load(self, job: Job) -> Run | None:
        """The kept run of `job` (kept)."""
        return self.kept(job.name, job.settings)

    def save(self, run: Run, name: str) -> None:
        write_atomically(self.path(name), run.model_dump_json())

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def fingerprint(settings: BaseModel, device: str, kind: PlanKind = "ablation") -> dict[str, Any]:
    """What kept runs must share with this call of a plan's `kind` to be reused: the shared
    `settings` and the device (the plan may differ: a sweep widened with another depth trains
    only what is new)."""
    return {
        "kind": kind,
        "format_version": RUNS_FORMAT_VERSION,
        "settings": settings.model_dump(mode="json"),
        "device": device,
    }


TrainOne = Callable[[str, Any, int, Callable[[Any], None]], Run]


def serve_tasks(partial: str, tasks: Any, events: Any, train: TrainOne) -> None:
    """A worker's loop, for rows and lab cells alike: take (name, config JSON, key, seed) until
    None, train it with `train(config_json, key, seed, report)`, write it under `partial`
    atomically, and tell the parent on `events` (start, progress, done, or error and stop)."""
    parent = os.getppid()
    store = Path(partial)
    while (item := tasks.get()) is not None:
        name, config_json, key, seed = item

        def report(p: Any, name: str = name) -> None:
            if os.getppid() != parent:
                os._exit(1)  # the parent is gone (killed): do not train on as an orphan
            events.put(("progress", name, (p.step, p.train_loss, p.heldout_accuracy)))

        try:
            events.put(("start", name, None))
            trained = train(config_json, key, seed, report)
            write_atomically(store / f"{name}.json", trained.model_dump_json())
            events.put(("done", name, (trained.wall_s, trained.final.heldout_accuracy)))
        except Exception:
            events.put(("error", name, traceback.format_exc()))
            return


def _worker(
    device: str, partial: str, tasks: Any, events: Any
) -> None:  # pragma: no cover  (runs in a spawned process; the CLI tests drive it)
    # Ctrl-C reaches the whole process group: the parent decides, and stops us itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (already ignored since exec; see below)
    from normdive.training.train import pin_cpu, train_row  # torch: only where rows train

    pin_cpu()

    def train(config_json: str, key: Any, seed: int, report: Callable[[Any], None]) -> Run:
        config = RunConfig.model_validate_json(config_json)
        return train_row(config, key, seed, device=device, report=report)

    serve_tasks(partial, tasks, events, train)


def _stop(workers: list[BaseProcess]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(JOIN_S)
        if worker.is_alive():
            worker.kill()
            worker.join()


def run_processes(
    todo: Sequence[WorkerJob],
    jobs: int,
    partial: PartialRows,
    bars: RunProgress,
    *,
    target: Callable[[str, str, Any, Any], None] = _worker,
) -> None:
    """Train `todo` in `jobs` single-thread worker processes running `target` (by default
    the rows' worker), each run kept in `partial` as it finishes. Raises RecordError when a
    worker fails or dies."""
    context = mp.get_context("spawn")  # a fresh interpreter: no inherited torch thread pools
    tasks = context.Queue()
    events = context.Queue()
    for job in todo:
        tasks.put((job.name, job.config.model_dump_json(), job.key, job.seed))
    count = min(jobs, len(todo))
    for _ in range(count):
        tasks.put(None)
    workers: list[BaseProcess] = [
        context.Process(
            target=target,
            args=("cpu", str(partial.dir), tasks, events),
            daemon=True,
        )
        for _ in range(count)
    ]
    # Start the workers with Ctrl-C ignored: an ignored signal stays ignored across exec, so
    # a Ctrl-C that reaches the whole process group stops only the parent, which then stops
    # the workers itself (and no worker prints a traceback while it is still importing).
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for worker in workers:
            worker.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    remaining = {job.name for job in todo}
    try:
        while remaining:
            try:
                kind, name, data = events.get(timeout=POLL_S)
            except queue.Empty:
                dead = [w for w in workers if w.exitcode not in (None, 0)]
                if dead or not any(w.is_alive() for w in workers):
                    codes = ", ".join(str(w.exitcode) for w in workers)
                    raise RecordError(
                        f"a worker process stopped before its rows were done (exit codes "
                        f"{codes}); rows still to train: {', '.join(sorted(remaining))}"
                    ) from None
                continue
            if kind == "start":
                bars.start(name)
            elif kind == "progress":
                bars.step(name, *data)
            elif kind == "done":
                bars.done(name, data[1], data[0])
                remaining.discard(name)
            elif kind == "error":
                raise RecordError(f"row {name} failed:\n{data}")
        for worker in workers:
            worker.join()
    finally:
        tasks.cancel_join_thread()
        _stop(workers)


def run_here(todo: list[Job], device: str, partial: PartialRows, bars: RunProgress) -> None:
    """Train `todo` one after the other in this process (the CUDA path)."""
    from normdive.training.train import train_row

    for job in todo:
        bars.start(job.name)

        def report(p: Any, name: str = job.name) -> None:
            bars.step(name, p.step, p.train_loss, p.heldout_accuracy)

        row = train_row(job.config, job.key, job.seed, device=device, report=report)
        partial.save(row, job.name)
        bars.done(job.name, row.final.heldout_accuracy, row.wall_s)


def write_recording(out: Path, runs: Runs) -> int:
    """Write a file of runs (the recording, a sweep or a lab grid) whole or not at all
    (write_runs). Returns its size in bytes."""
    try:
        return write_runs(out, runs)
    except UnfaithfulWrite as error:
        raise RecordError(str(error)) from None


class PlannedJob(WorkerJob, Protocol):
    """A job the recording skeleton plans: kept under `name`, shown as `label`."""

    @property
    def label(self) -> str: ...
    @property
    def planned(self) -> Planned: ...


JobT = TypeVar("JobT", bound=PlannedJob)
# Trains the jobs not kept yet (the first argument), each kept in the PartialRows as it ends.
TrainJobs = Callable[[list[JobT], PartialRows, RunProgress], None]


def train_rows(device: str, jobs: int) -> TrainJobs[Job]:
    """How rows train: in `jobs` worker processes on the CPU, one after another here on CUDA."""

    def train(todo: list[Job], partial: PartialRows, bars: RunProgress) -> None:
        if device == "cpu":
            run_processes(todo, jobs, partial, bars)
        else:
            run_here(todo, device, partial, bars)

    return train


@dataclass(frozen=True)
class Recorder:
    """Where and how one record-runs call records, whatever its plan: on `device` in `jobs`
    worker processes (CPU), to `out`, its `command` line kept in the provenance; `fresh`
    drops the runs kept from an interrupted call; progress goes to `console`."""

    device: str
    jobs: int
    out: Path
    command: str
    fresh: bool
    console: Console


def record_kept(
    every: Sequence[JobT],
    how: Recorder,
    *,
    noun: str,
    fingerprint: dict[str, Any],
    load: Callable[[PartialRows, JobT], Run | None],
    train: TrainJobs[JobT],
    steps: int,
    document: Callable[[dict[str, Run], Provenance], Runs],
) -> Runs:
    """What recording the ablation, the sweep and the lab grid share: keep what `load` finds
    beside `how.out` under `fingerprint`, `train` the rest with progress over `every`, build
    the `document` from every job's run (by name) and its provenance, write it whole to
    `how.out`, and drop the kept files. `noun` names one job on the console ("row").
    Raises KeyboardInterrupt (finished jobs stay kept) or RecordError."""
    out, console = how.out, how.console
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = PartialRows(out, fingerprint, fresh=how.fresh)
    kept = {job.name: done for job in every if (done := load(partial, job)) is not None}
    todo = [job for job in every if job.name not in kept]
    if kept:
        console.print(
            f"Resuming: {len(kept)} finished {noun}(s) kept in {partial.dir}; {len(todo)} to train."
        )
    bars = RunProgress(console, [job.planned for job in every], steps)
    for name, done in kept.items():
        bars.kept(name, done.final.heldout_accuracy)
    with bars:
        if todo:
            train(todo, partial, bars)
    found: dict[str, Run] = {}
    for job in every:
        done = kept.get(job.name) or load(partial, job)
        if done is None:
            where = partial.dir / f"{job.name}.json"
            raise RecordError(f"{noun} {job.label} finished but {where} is unreadable")
        found[job.name] = done
    made_by = provenance(
        command=how.command,
        device=how.device,
        jobs=how.jobs,
        threads_per_job=THREADS_PER_JOB,
        wall_s=time.perf_counter() - started,
        rows_resumed=len(kept),
    )
    whole = document(found, made_by)
    write_recording(out, whole)
    partial.remove()
    return whole


def record(
    config: RunConfig,
    rows: Sequence[RowKey],
    how: Recorder,
    *,
    seeds: Sequence[int],
    shard: ShardPart | None = None,
) -> Runs:
    """Train the `rows` at each of `seeds` (or the `shard` of them) not kept yet, then write
    the recording. Raises KeyboardInterrupt (finished rows stay kept) or RecordError."""
    ablation = AblationPlan(
        kind="ablation",
        base=config,
        first={"seed": seeds[0]},
        rows=[key for key in ROW_KEYS if key in rows],
        seeds=list(seeds),
        shard=shard,
    )
    jobs = plan(config, rows, seeds)
    if shard is not None:
        jobs = jobs[shard.index - 1 :: shard.count]

    def recording(found: dict[str, Run], made_by: Provenance) -> Runs:
        return runs_file(LESSON, ablation, [made_by], [found[job.name] for job in jobs])

    return record_kept(
        jobs,
        how,
        noun=ROW,
        fingerprint=fingerprint(config, how.device),
        load=PartialRows.load,
        train=train_rows(how.device, how.jobs),
        steps=config.steps,
        document=recording,
    )
