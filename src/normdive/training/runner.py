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
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from normdive.recording.format import FORMAT_VERSION, Recording, Row, RowKey, RunConfig
from normdive.training.provenance import provenance
from normdive.training.train import pin_cpu, train_row

LESSON = "8.5 The transformer block"
THREADS_PER_JOB = 1  # see the module docstring and bench/RESULTS.md
POLL_S = 0.2  # how often the parent checks on its workers while no event arrives
JOIN_S = 5.0  # how long a stopped worker gets to exit before it is killed


class RecordError(Exception):
    """A run that cannot go on; the message says why and what is kept."""


@dataclass(frozen=True)
class RowTask:
    key: RowKey
    seed: int

    @property
    def name(self) -> str:
        return f"{self.key}-seed{self.seed}"

    @property
    def label(self) -> str:
        return f"{self.key} seed {self.seed}"


def plan(rows: Sequence[RowKey], seeds: Sequence[int]) -> list[RowTask]:
    """Seed by seed, in the page's row order, so the page's seed finishes first."""
    return [RowTask(key, seed) for seed in seeds for key in rows]


def partial_dir(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def tmp_path(out: Path) -> Path:
    return out.with_name(out.name + ".tmp")


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never half."""
    tmp = tmp_path(path)
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


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

    def path(self, task: RowTask) -> Path:
        return self.dir / f"{task.name}.json"

    def load(self, task: RowTask) -> Row | None:
        """The kept row, or None when absent or unreadable (then it is trained again)."""
        try:
            row = Row.model_validate_json(self.path(task).read_bytes())
        except (OSError, ValueError):
            return None
        return row if (row.key, row.seed) == (task.key, task.seed) else None

    def save(self, row: Row) -> None:
        write_atomically(self.path(RowTask(row.key, row.seed)), row.model_dump_json())

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def fingerprint(config: RunConfig, device: str) -> dict[str, Any]:
    """What kept rows must share with this run to be reused."""
    return {
        "format_version": FORMAT_VERSION,
        "config": config.model_dump(mode="json"),
        "device": device,
    }


def _worker(
    config_json: str, device: str, partial: str, tasks: Any, events: Any
) -> None:  # pragma: no cover  (runs in a spawned process; the CLI tests drive it)
    # Ctrl-C reaches the whole process group: the parent decides, and stops us itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (already ignored since exec; see below)
    pin_cpu()
    parent = os.getppid()
    config = RunConfig.model_validate_json(config_json)
    store = Path(partial)
    while (item := tasks.get()) is not None:
        task = RowTask(*item)

        def report(p: Any, name: str = task.name) -> None:
            if os.getppid() != parent:
                os._exit(1)  # the parent is gone (killed): do not train on as an orphan
            events.put(("progress", name, (p.step, p.train_loss, p.heldout_accuracy)))

        try:
            events.put(("start", task.name, None))
            row = train_row(config, task.key, task.seed, device=device, report=report)
            write_atomically(store / f"{task.name}.json", row.model_dump_json())
            events.put(("done", task.name, (row.wall_s, row.final.heldout_accuracy)))
        except Exception:
            events.put(("error", task.name, traceback.format_exc()))
            return


class _Bars:
    def __init__(self, console: Console, tasks: Sequence[RowTask], steps: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:>6}  acc {task.fields[acc]:>6}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
        )
        self.steps = steps
        self.ids: dict[str, TaskID] = {
            t.name: self.progress.add_task(t.label, total=steps, start=False, loss="-", acc="-")
            for t in tasks
        }

    def kept(self, name: str, accuracy: float | str) -> None:
        self.progress.update(self.ids[name], completed=self.steps, loss="kept", acc=_pct(accuracy))

    def start(self, name: str) -> None:
        self.progress.start_task(self.ids[name])

    def step(self, name: str, step: int, loss: float, accuracy: float | None) -> None:
        self.progress.update(
            self.ids[name],
            completed=step,
            loss=f"{loss:.3f}",
            acc=_pct(accuracy) if accuracy is not None else "-",
        )

    def done(self, name: str, accuracy: float | str) -> None:
        self.progress.update(self.ids[name], completed=self.steps, acc=_pct(accuracy))
        self.progress.stop_task(self.ids[name])


def _pct(value: float | str) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


def _stop(workers: list[BaseProcess]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(JOIN_S)
        if worker.is_alive():
            worker.kill()
            worker.join()


def _run_processes(
    config: RunConfig, todo: list[RowTask], jobs: int, partial: PartialRows, bars: _Bars
) -> None:
    context = mp.get_context("spawn")  # a fresh interpreter: no inherited torch thread pools
    tasks = context.Queue()
    events = context.Queue()
    for task in todo:
        tasks.put((task.key, task.seed))
    count = min(jobs, len(todo))
    for _ in range(count):
        tasks.put(None)
    workers: list[BaseProcess] = [
        context.Process(
            target=_worker,
            args=(config.model_dump_json(), "cpu", str(partial.dir), tasks, events),
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
    remaining = {task.name for task in todo}
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
                bars.done(name, data[1])
                remaining.discard(name)
            elif kind == "error":
                raise RecordError(f"row {name} failed:\n{data}")
        for worker in workers:
            worker.join()
    finally:
        tasks.cancel_join_thread()
        _stop(workers)


def _run_here(
    config: RunConfig, todo: list[RowTask], device: str, partial: PartialRows, bars: _Bars
) -> None:
    for task in todo:
        bars.start(task.name)

        def report(p: Any, name: str = task.name) -> None:
            bars.step(name, p.step, p.train_loss, p.heldout_accuracy)

        row = train_row(config, task.key, task.seed, device=device, report=report)
        partial.save(row)
        bars.done(task.name, row.final.heldout_accuracy)


def write_recording(out: Path, recording: Recording) -> int:
    """Write, read back, validate, rename. Returns the file's size in bytes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    text = recording.model_dump_json(indent=1) + "\n"
    tmp = tmp_path(out)
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if Recording.model_validate_json(tmp.read_bytes()) != recording:
            raise RecordError(f"{tmp} did not read back as written; {out} is unchanged")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return len(text.encode("utf-8"))


def record(
    config: RunConfig,
    tasks: list[RowTask],
    *,
    seeds: Sequence[int],
    device: str,
    jobs: int,
    out: Path,
    command: str,
    fresh: bool,
    console: Console,
) -> Recording:
    """Train what is not kept yet, then write the recording. Raises KeyboardInterrupt
    (finished rows stay kept) or RecordError."""
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = PartialRows(out, fingerprint(config, device), fresh=fresh)
    kept = {t.name: row for t in tasks if (row := partial.load(t)) is not None}
    todo = [t for t in tasks if t.name not in kept]
    if kept:
        console.print(
            f"Resuming: {len(kept)} finished row(s) kept in {partial.dir}; {len(todo)} to train."
        )
    bars = _Bars(console, tasks, config.steps)
    for name, row in kept.items():
        bars.kept(name, row.final.heldout_accuracy)
    with bars.progress:
        if not todo:
            pass
        elif device == "cpu":
            _run_processes(config, todo, jobs, partial, bars)
        else:
            _run_here(config, todo, device, partial, bars)
    rows = []
    for task in tasks:
        row = kept.get(task.name) or partial.load(task)
        if row is None:
            raise RecordError(f"row {task.label} finished but {partial.path(task)} is unreadable")
        rows.append(row)
    recording = Recording(
        format_version=FORMAT_VERSION,
        lesson=LESSON,
        provenance=provenance(
            command=command,
            device=device,
            jobs=jobs if device == "cpu" else 1,
            threads_per_job=THREADS_PER_JOB if device == "cpu" else 1,
            wall_s=time.perf_counter() - started,
            rows_resumed=len(kept),
        ),
        config=config,
        seeds=list(seeds),
        page_seed=seeds[0],
        rows=rows,
    )
    write_recording(out, recording)
    partial.remove()
    return recording
