"""What a long record-runs shows: plain lines with the estimate when its output is no
terminal, live bars when it is one."""

from __future__ import annotations

import io

from rich.console import Console

from normdive.training.progress import Planned, RunProgress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


RUNS = [Planned("deep", "depth 16 run", 16.5), Planned("a", "depth 2 run a", 2.5)]
RUNS += [Planned("b", "depth 2 run b", 2.5)]


def logged(console: Console) -> list[str]:
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue().splitlines()


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (4, 89, 90, 3500, 3600, 3900)] == [
        "4 s",
        "89 s",
        "2 min",
        "58 min",
        "1 h 00 min",
        "1 h 05 min",
    ]


def test_into_a_log_a_line_per_run_and_a_heartbeat_with_the_estimate() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    clock = Clock()
    progress = RunProgress(console, RUNS, 100, clock=clock, heartbeat_s=60)
    with progress:
        progress.kept("a", 1.0)  # trained by an earlier command: not part of the pace
        progress.start("deep")
        assert progress.eta_text() == "0 s elapsed, time left not known yet"
        clock.now += 30
        progress.step("deep", 50, 2.0, 0.1)  # within the heartbeat: nothing printed
        assert logged(console) == []
        clock.now += 31
        progress.step("deep", 100, 1.0, 0.5)
        # 16.5 cost units done in 61 s; 2.5 more (a is kept) at that pace: about 9 s
        assert logged(console) == [
            "[1/3] 61 s elapsed, about 9 s left; training depth 16 run at step 100/100"
        ]
        progress.done("deep", 0.5, 61.0)
        progress.start("b")
        clock.now += 9
        progress.done("b", 1.0, 9.0)
    lines = logged(console)
    assert lines[1] == "[2/3] depth 16 run: accuracy 50.0% in 61 s; 61 s elapsed, about 9 s left"
    assert lines[2] == "[3/3] depth 2 run b: accuracy 100.0% in 9 s; 70 s elapsed, done"


def test_on_a_terminal_live_bars_and_a_line_per_finished_run() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    progress = RunProgress(console, RUNS, 100, clock=Clock())
    with progress:
        progress.start("a")
        progress.step("a", 50, 1.5, 0.25)
        progress.done("a", 1.0, 5.0)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "all runs" in text
    assert "depth 2 run a: accuracy 100.0% in 5 s" in text
