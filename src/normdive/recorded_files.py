"""Any file `record-runs` writes, recognised and checked: the ablation recording the page plays,
the depth sweep beside it and the lab grid beside it (`normdive check-recording`).

A file says what it is by its "kind" (a sweep's "depth_sweep", a lab grid's "lab_grid"; the
ablation recording has none). One that cannot say, because it is missing, cut short or not
JSON, is taken for what its name says: a name ending in -sweep.json is a sweep's and one
ending in -lab.json a lab grid's, as `record-runs` names them beside the recording. Every
refusal then names the command that makes that kind of file again.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

from normdive.lab.grid import (
    LAB_REMEDY,
    LAB_SUFFIX,
    LabGridProblem,
    describe_lab_grid,
    is_lab_grid_document,
    parse_lab_grid,
)
from normdive.recording.reader import REMEDY, RecordingProblem, read_capped
from normdive.recording.summary import RecordingCheck, check_recording_bytes
from normdive.recording.sweep import SWEEP_SUFFIX
from normdive.recording.sweep_reader import SWEEP_REMEDY, is_sweep_document


class FileKind(Enum):
    ABLATION = "ablation recording"
    SWEEP = "depth sweep"
    LAB_GRID = "lab grid"


# The command that makes each kind again, as its refusals say it.
REMEDIES = {FileKind.ABLATION: REMEDY, FileKind.SWEEP: SWEEP_REMEDY, FileKind.LAB_GRID: LAB_REMEDY}


def kind_by_name(path: Path) -> FileKind:
    """What a file is taken for when its contents cannot say."""
    stem = path.stem
    if stem.endswith(LAB_SUFFIX):
        return FileKind.LAB_GRID
    if stem.endswith(SWEEP_SUFFIX):
        return FileKind.SWEEP
    return FileKind.ABLATION


# What a JSON file none of whose kinds it claims is told.
FOREIGN = (
    "{name} is not a file record-runs writes: neither a recording, a depth sweep nor a lab "
    "grid (it is not an object, or its kind names none of them). `normdive record-runs` makes the "
    "recording, `normdive record-runs --sweep` its depth sweep and `normdive record-runs "
    "--lab` its lab grid."
)


def kind_of(raw: bytes, path: Path) -> FileKind | None:
    """What the file says it is; what its name says when it cannot say (it is not JSON);
    None for JSON that is none of them."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return kind_by_name(path)
    if is_lab_grid_document(data):
        return FileKind.LAB_GRID
    if is_sweep_document(data):
        return FileKind.SWEEP
    if isinstance(data, dict) and "kind" not in data:
        return FileKind.ABLATION  # the recording names no kind
    return None


def _lab_grid_check(raw: bytes, name: str) -> RecordingCheck:
    try:
        grid = parse_lab_grid(raw, name)
    except LabGridProblem as problem:
        return RecordingCheck([], RecordingProblem("invalid", problem.message))
    lines = describe_lab_grid(grid, name)
    return RecordingCheck([*lines, f"OK: a valid lab grid of {len(grid.cells)} cells."], None)


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
    if kind is FileKind.LAB_GRID:
        return _lab_grid_check(raw, str(path))
    return check_recording_bytes(raw, str(path), sweep=kind is FileKind.SWEEP)
