"""What a long `record-runs` shows: rich's live bars on a terminal, else (rich draws nothing
until the end) a line per finished run and a heartbeat; the time left at this pace so far."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

# Seconds between lines, at most, when the output is no terminal.
HEARTBEAT_S = 60.0


@dataclass(frozen=True)
class Planned:
    name: str
    label: str
    cost: float  # relative to the command's other runs


def duration(seconds: float) -> str:
    """ "45 s", "12 min", "1 h 05 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _pct(value: float | str | None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" if isinstance(value, float) else str(value)


class RunProgress:
    """Progress of the runs of one command; `kept` runs were trained by an earlier one."""

    def __init__(
        self,
        console: Console,
        runs: Sequence[Planned],
        steps: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.console = console
        self.runs = {run.name: run for run in runs}
        self.steps = steps
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.live = console.is_terminal
        self.started = clock()
        self.last_line = self.started
        self.finished: set[str] = set()
        self.kept_names: set[str] = set()
        self.at_step: dict[str, int] = {}
        self.progress: Progress | None = None
        self.ids: dict[str, TaskID] = {}
        self.overall: TaskID | None = None
        if self.live:
            self.progress = Progress(
                TextColumn("{task.description:<38}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=console,
            )
            self.overall = self.progress.add_task(
                "all runs", total=len(self.runs), detail=self.eta_text()
            )

    def __enter__(self) -> RunProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _cost_done_here(self) -> float:
        done = sum(self.runs[n].cost for n in self.finished if n not in self.kept_names)
        partly = sum(
            self.runs[n].cost * step / self.steps
            for n, step in self.at_step.items()
            if n not in self.finished
        )
        return done + partly

    def _cost_left(self) -> float:
        total = sum(run.cost for name, run in self.runs.items() if name not in self.kept_names)
        return max(0.0, total - self._cost_done_here())

    def seconds_left(self) -> float | None:
        """The estimate, or None before anything has been trained."""
        done = self._cost_done_here()
        if done <= 0:
            return None
        return (self.clock() - self.started) * self._cost_left() / done

    def eta_text(self) -> str:
        elapsed = duration(self.clock() - self.started)
        left = self.seconds_left()
        if not self.runs or len(self.finished) == len(self.runs):
            return f"{elapsed} elapsed, done"
        return f"{elapsed} elapsed, " + (
            f"about {duration(left)} left" if left is not None else "time left not known yet"
        )

    def _count(self) -> str:
        return f"[{len(self.finished)}/{len(self.runs)}]"

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self.last_line = self.clock()

    def _refresh_overall(self) -> None:
        if self.progress is not None and self.overall is not None:
            self.progress.update(self.overall, completed=len(self.finished), detail=self.eta_text())

    def kept(self, name: str, accuracy: float | str) -> None:
        self.finished.add(name)
        self.kept_names.add(name)
        self._refresh_overall()

    def start(self, name: str) -> None:
        self.at_step[name] = 0
        if self.progress is not None:
            self.ids[name] = self.progress.add_task(
                self.runs[name].label, total=self.steps, detail="starting"
            )

    def step(self, name: str, step: int, loss: float, accuracy: float | None) -> None:
        self.at_step[name] = step
        if self.progress is not None and name in self.ids:
            self.progress.update(
                self.ids[name],
                completed=step,
                detail=f"loss {loss:.3f}  acc {_pct(accuracy)}",
            )
            self._refresh_overall()
        elif self.clock() - self.last_line >= self.heartbeat_s:
            busy = ", ".join(
                f"{self.runs[n].label} at step {s}/{self.steps}"
                for n, s in self.at_step.items()
                if n not in self.finished
            )
            self._line(f"{self._count()} {self.eta_text()}; training {busy}")

    def done(self, name: str, accuracy: float | str, wall_s: float) -> None:
        self.finished.add(name)
        self.at_step[name] = self.steps
        if self.progress is not None and name in self.ids:
            self.progress.remove_task(self.ids.pop(name))
        self._line(
            f"{self._count()} {self.runs[name].label}: accuracy {_pct(accuracy)} in "
            f"{duration(wall_s)}; {self.eta_text()}"
        )
        self._refresh_overall()
