"""The lab grid's file: a file of runs of the lab plan (recording/runs.py, `LabPlan`) beside
the recording, which the page reads lazily when "Train one yourself" opens (docs/lab.md, "The
grid file"). Where it lives, how it is read (with its own problem for the page), and what
`check-recording` says of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from normdive.recording.reader import (
    MAX_RECORDING_BYTES,
    REMEDIES,
    RecordingProblem,
    parse_runs,
)
from normdive.recording.runs import LabPlan, Runs

# The grid lives beside the recording: <recording stem>-lab.json.
LAB_SUFFIX = "-lab"

LabProblemReason = Literal["missing", "unreadable", "too_large", "bad_json", "invalid"]
LAB_REMEDY = REMEDIES["lab_grid"]
LAB_REASONS: tuple[LabProblemReason, ...] = ("missing", "unreadable", "too_large", "bad_json")


def lab_path_for(recording_path: Path) -> Path:
    """Where the lab grid of a recording lives: beside it, its name ending in LAB_SUFFIX."""
    return recording_path.with_name(recording_path.stem + LAB_SUFFIX + recording_path.suffix)


class LabGridProblem(Exception):
    """Why the lab grid cannot be used. `reason` is for code, `message` for people."""

    def __init__(self, reason: LabProblemReason, message: str) -> None:
        super().__init__(message)
        self.reason: LabProblemReason = reason
        self.message = message


def parse_lab_grid(text: str | bytes, name: str) -> Runs:
    """Validate a grid file's text with the one reader (reader.parse_runs); `name` is what
    messages call the file."""
    try:
        return parse_runs(text, name, "lab_grid")
    except RecordingProblem as problem:
        reason: LabProblemReason = next((r for r in LAB_REASONS if r == problem.reason), "invalid")
        raise LabGridProblem(reason, problem.message) from problem


def read_lab_grid(path: Path) -> Runs:
    """The grid at `path`, or LabGridProblem saying what is wrong with the file."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_RECORDING_BYTES + 1)
    except FileNotFoundError as error:
        raise LabGridProblem("missing", f"There is no lab grid at {path}. {LAB_REMEDY}") from error
    except OSError as error:
        raise LabGridProblem(
            "unreadable", f"The lab grid {path} cannot be read ({error.strerror}). {LAB_REMEDY}"
        ) from error
    if len(raw) > MAX_RECORDING_BYTES:
        raise LabGridProblem(
            "too_large",
            f"The lab grid {path} is over {MAX_RECORDING_BYTES // (1024 * 1024)} MiB; it is "
            f"not a lab grid. {LAB_REMEDY}",
        )
    return parse_lab_grid(raw, str(path))


def describe_lab_grid(grid: Runs, name: str) -> list[str]:
    """The lines `normdive check-recording` prints for a lab grid that parses."""
    plan = grid.plan_as(LabPlan)
    source, base = grid.provenance[0], plan.base
    eps = ", ".join(f"{value:g}" for value in plan.eps)
    lines = [
        f"{name}: lab grid",
        f"made by: {source.command}",
        f"on {source.created_at} with {source.device}, torch {source.torch_version}, "
        f"normdive {source.normdive_version}, commit {source.git_commit or 'unknown'}; "
        f"wall time {source.wall_s:.0f} s",
        f"base: d_model {base.d_model}, {base.n_heads} heads, copy length {base.copy_length}, "
        f"{base.steps} steps at batch {base.batch_size}",
        f"offered: depths {', '.join(map(str, plan.depths))}; eps {eps}; inits "
        f"{', '.join(plan.inits)}; seeds {', '.join(map(str, plan.seeds))}",
        f"{len(grid.runs)} cells recorded, {len(grid.missing())} offered and not recorded",
    ]
    if plan.trimmed:
        lines.append(f"trimmed: {plan.trimmed}")
    return lines
