"""Any file `record-runs` writes, recognised and checked: the ablation recording the page
plays, the depth sweep beside it and the lab grid beside it (`normdive check-recording`,
`normdive merge-recordings`).

Each is a file of runs whose plan names its kind (recording/runs.py). A file that cannot say,
because it is missing, cut short, not JSON or of another format_version, is taken for what
its name says: a name ending in -sweep.json is a sweep's and one ending in -lab.json a lab
grid's, as `record-runs` names them beside the recording. Every refusal then names the
command that makes that kind of file again.
"""

from __future__ import annotations

import json
from pathlib import Path

from normdive.recording.lab_grid import (
    LAB_SUFFIX,
    LabGridProblem,
    describe_lab_grid,
    parse_lab_grid,
)
from normdive.recording.reader import (
    NOUNS,
    REMEDIES,
    RETIRED_FORMAT_VERSION,
    RecordingProblem,
    parse_runs,
    read_capped,
)
from normdive.recording.runs import PLAN_KINDS, RUNS_KIND, PlanKind, Runs
from normdive.recording.summary import RecordingCheck, check_recording_bytes
from normdive.recording.sweep import SWEEP_SUFFIX

# What a JSON file none of whose kinds it claims is told.
FOREIGN = (
    "{name} is not a file record-runs writes: neither a recording, a depth sweep nor a lab "
    "grid (it is not an object, or its kind names none of them). `normdive record-runs` makes the "
    "recording, `normdive record-runs --sweep` its depth sweep and `normdive record-runs "
    "--lab` its lab grid."
)


def kind_by_name(path: Path) -> PlanKind:
    """What a file is taken for when its contents cannot say."""
    stem = path.stem
    if stem.endswith(LAB_SUFFIX):
        return "lab_grid"
    if stem.endswith(SWEEP_SUFFIX):
        return "sweep"
    return "ablation"


def kind_of(raw: bytes, path: Path) -> PlanKind | None:
    """What the file says it is (its plan's kind); what its name says when it cannot say (it
    is not JSON, names no kind, is of the retired format_version, or is a file of runs whose
    plan names no kind); None for JSON that claims to be something else."""
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
    if "kind" not in data or data.get("format_version") == RETIRED_FORMAT_VERSION:
        return kind_by_name(path)
    return None


def _lab_grid_check(raw: bytes, name: str) -> RecordingCheck:
    try:
        grid = parse_lab_grid(raw, name)
    except LabGridProblem as problem:
        return RecordingCheck([], RecordingProblem("invalid", problem.message))
    lines = describe_lab_grid(grid, name)
    return RecordingCheck([*lines, f"OK: a valid lab grid of {len(grid.runs)} cells."], None)


def _shard_check(raw: bytes, path: Path, kind: PlanKind) -> RecordingCheck | None:
    """A valid file holding one shard of its plan, described; None for any other file (the
    page cannot play a shard: it is merged first)."""
    try:
        runs = parse_runs(raw, str(path), kind)
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
        said = f"format_version {json.loads(raw).get('format_version')}: a file of runs."
        return RecordingCheck([*found.lines[:1], said, *found.lines[1:]], None)
    return found


def read_runs(path: Path) -> Runs:
    """The file at `path` as runs, whatever its plan (RecordingProblem when it cannot be
    read: the message names the command that makes it again)."""
    raw = read_capped(path, REMEDIES[kind_by_name(path)])
    kind = kind_of(raw, path)
    if kind is None:
        raise RecordingProblem("invalid", FOREIGN.format(name=path))
    return parse_runs(raw, str(path), kind)
