"""Any file `record-runs` writes, recognised, checked and converted: the ablation recording the
page plays, the depth sweep beside it and the lab grid beside it (`normdive check-recording`,
`normdive convert-recordings`).

Each is a file of runs whose plan names its kind (recording/runs.py). A file of format_version
1, the format each plan had of its own, says its kind its own way (a sweep's "depth_sweep", a
lab grid's "lab_grid", the ablation recording none); it is still read, and converted by
`convert-recordings`. A file that cannot say, because it is missing, cut short or not JSON, is
taken for what its name says: a name ending in -sweep.json is a sweep's and one ending in
-lab.json a lab grid's, as `record-runs` names them beside the recording. Every refusal then
names the command that makes that kind of file again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normdive.lab.grid import (
    LAB_KIND,
    LAB_SUFFIX,
    LabGridProblem,
    describe_lab_grid,
    legacy_lab_grid,
    parse_lab_grid,
)
from normdive.recording.files import UnfaithfulWrite, write_runs
from normdive.recording.plans import legacy_ablation, legacy_sweep
from normdive.recording.reader import (
    LEGACY_FORMAT_VERSION,
    NOUNS,
    REMEDIES,
    RecordingProblem,
    parse_runs,
    read_capped,
)
from normdive.recording.runs import PLAN_KINDS, RUNS_KIND, PlanKind, Runs
from normdive.recording.summary import RecordingCheck, check_recording_bytes
from normdive.recording.sweep import SWEEP_KIND, SWEEP_SUFFIX

# How each plan's file of format_version 1 is read as runs.
LEGACY: dict[PlanKind, Callable[[dict[str, Any]], Runs]] = {
    "ablation": legacy_ablation,
    "sweep": legacy_sweep,
    "lab_grid": legacy_lab_grid,
}
# What a file of format_version 1 called itself ("kind"); the ablation recording named none.
LEGACY_KINDS: dict[str, PlanKind] = {SWEEP_KIND: "sweep", LAB_KIND: "lab_grid"}


def kind_by_name(path: Path) -> PlanKind:
    """What a file is taken for when its contents cannot say."""
    stem = path.stem
    if stem.endswith(LAB_SUFFIX):
        return "lab_grid"
    if stem.endswith(SWEEP_SUFFIX):
        return "sweep"
    return "ablation"


# What a JSON file none of whose kinds it claims is told.
FOREIGN = (
    "{name} is not a file record-runs writes: neither a recording, a depth sweep nor a lab "
    "grid (it is not an object, or its kind names none of them). `normdive record-runs` makes the "
    "recording, `normdive record-runs --sweep` its depth sweep and `normdive record-runs "
    "--lab` its lab grid."
)


def kind_of(raw: bytes, path: Path) -> PlanKind | None:
    """What the file says it is (its plan's kind); what its name says when it cannot say (it
    is not JSON, or a file of runs whose plan names no kind); None for JSON that is none."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return kind_by_name(path)
    if not isinstance(data, dict):
        return None
    if data.get("kind") == RUNS_KIND:
        plan = data.get("plan")
        named = plan.get("kind") if isinstance(plan, dict) else None
        return next((kind for kind in PLAN_KINDS if kind == named), kind_by_name(path))
    if "kind" not in data:
        return "ablation"  # the recording of format_version 1 names no kind
    return LEGACY_KINDS.get(str(data["kind"]))


def _lab_grid_check(raw: bytes, name: str) -> RecordingCheck:
    try:
        grid = parse_lab_grid(raw, name)
    except LabGridProblem as problem:
        return RecordingCheck([], RecordingProblem("invalid", problem.message))
    lines = describe_lab_grid(grid, name)
    return RecordingCheck([*lines, f"OK: a valid lab grid of {len(grid.cells)} cells."], None)


def _format_line(raw: bytes, path: Path) -> str:
    """The file's format_version in words; for one of format_version 1, what converts it."""
    version = json.loads(raw).get("format_version")
    if version == LEGACY_FORMAT_VERSION:
        return (
            f"format_version {version}, read as runs: `normdive convert-recordings {path}` "
            "converts it."
        )
    return f"format_version {version}: a file of runs."


def _shard_check(raw: bytes, path: Path, kind: PlanKind) -> RecordingCheck | None:
    """A valid file holding one shard of its plan, described; None for any other file (the
    page cannot play a shard: it is merged first)."""
    try:
        runs = parse_runs(raw, str(path), kind, LEGACY[kind])
    except RecordingProblem:
        return None
    shard = runs.plan.shard
    if shard is None:
        return None
    lines = [
        f"{path}: shard {shard.index} of {shard.count} of the {NOUNS[kind]}, lesson "
        f"{runs.lesson!r}, format_version {runs.format_version}",
        *(
            f"made by: {source.command} on {source.created_at} with {source.device}; "
            f"wall time {source.wall_s:.0f} s"
            for source in runs.provenance
        ),
        f"OK: {len(runs.runs)} runs of {len(runs.plan.sharded())} in this shard; join the "
        f"{shard.count} shards with `normdive merge-recordings`.",
    ]
    return RecordingCheck(lines, None)


def check_file(path: Path) -> RecordingCheck:
    """Read, recognise, validate and describe the file at `path`, as check-recording prints
    it; a refusal names the command that makes that kind of file."""
    try:
        raw = read_capped(path, REMEDIES[kind_by_name(path)])
    except RecordingProblem as problem:
        return RecordingCheck([], problem)
    kind = kind_of(raw, path)
    if kind is None:
        return RecordingCheck([], RecordingProblem("invalid", FOREIGN.format(name=path)))
    shard = _shard_check(raw, path, kind)
    if shard is not None:
        return shard
    if kind == "lab_grid":
        found = _lab_grid_check(raw, str(path))
    else:
        found = check_recording_bytes(raw, str(path), sweep=kind == "sweep")
    if found.problem is None:
        return RecordingCheck([*found.lines[:1], _format_line(raw, path), *found.lines[1:]], None)
    return found


def read_runs(path: Path) -> Runs:
    """The file at `path` as runs, whatever its plan and format_version (RecordingProblem
    when it cannot be read: the message names the command that makes it again)."""
    raw = read_capped(path, REMEDIES[kind_by_name(path)])
    kind = kind_of(raw, path)
    if kind is None:
        raise RecordingProblem("invalid", FOREIGN.format(name=path))
    return parse_runs(raw, str(path), kind, LEGACY[kind])


def convert_file(path: Path, out: Path | None = None) -> str:
    """Rewrite the file at `path` (to `out`, default itself) as a file of runs, its runs and
    provenance as they were; what it was, in words. Raises RecordingProblem or OSError."""
    runs = read_runs(path)
    try:
        size = write_runs(out or path, runs)
    except UnfaithfulWrite as error:
        raise RecordingProblem("invalid", str(error)) from None
    return (
        f"{out or path}: the {NOUNS[runs.plan.kind]}, {len(runs.runs)} runs, "
        f"format_version {runs.format_version} ({size:,} bytes)"
    )
