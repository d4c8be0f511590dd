"""Reading the recording for the page: one clear problem per way a file can be unusable.

CONTRACT (web): read_recording(path) -> Recording, raising RecordingProblem(reason, message);
recording_status(path) -> Recording | RecordingProblem, never raising, cached by the file's
(path, mtime, size); best_row(recording, seed=None) -> the row key the gate asks for.

Every message names the file and is written for a course author, who is the one who can fix
it (usually by running `normdive record-runs`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from normdive.recording.format import FORMAT_VERSION, ROW_KEYS, Recording, Row, RowKey, as_float

ProblemReason = Literal[
    "missing", "unreadable", "bad_json", "unknown_version", "invalid", "no_ablation_rows"
]
# How many validation errors a message lists before it says "and N more".
MAX_ERRORS_SHOWN = 3
REMEDY = "Run `normdive record-runs` to make it again."


class RecordingProblem(Exception):
    """Why the recording cannot be used today. `reason` is for code, `message` for people."""

    def __init__(self, reason: ProblemReason, message: str) -> None:
        super().__init__(message)
        self.reason: ProblemReason = reason
        self.message = message

    def __repr__(self) -> str:
        return f"RecordingProblem({self.reason!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordingProblem) and (self.reason, self.message) == (
            other.reason,
            other.message,
        )

    def __hash__(self) -> int:
        return hash((self.reason, self.message))


def _validation_summary(error: ValidationError) -> str:
    """The first few problems, one per field: a value that fits neither branch of a union
    (a number or a non-finite marker) is reported once, under the field's own name."""
    found: dict[str, str] = {}
    for item in error.errors():
        loc = list(item["loc"])
        while (
            loc
            and isinstance(loc[-1], str)
            and (loc[-1] in ("float", "int") or loc[-1].startswith(("literal[", "function-")))
        ):
            loc.pop()
        found.setdefault(".".join(str(part) for part in loc) or "(top level)", item["msg"])
    parts = [f"{where}: {message}" for where, message in list(found.items())[:MAX_ERRORS_SHOWN]]
    more = len(found) - MAX_ERRORS_SHOWN
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_recording(text: str | bytes, name: str) -> Recording:
    """Validate a recording's text against the format (not yet asking for the ablation rows).
    `name` is what messages call the file."""
    try:
        data = json.loads(text)
    except UnicodeDecodeError as error:
        raise RecordingProblem(
            "unreadable", f"The recording {name} is not UTF-8 text ({error.reason}). {REMEDY}"
        ) from error
    except json.JSONDecodeError as error:
        raise RecordingProblem(
            "bad_json",
            f"The recording {name} is not valid JSON (line {error.lineno}, column "
            f"{error.colno}: {error.msg}); it may have been cut short. {REMEDY}",
        ) from error
    except RecursionError as error:
        # The json module parses nested arrays and objects by recursion; a file nested
        # deeper than the interpreter's recursion limit is no recording either.
        raise RecordingProblem(
            "bad_json",
            f"The recording {name} nests its JSON too deeply to read; it is not a "
            f"recording. {REMEDY}",
        ) from error
    if not isinstance(data, dict):
        raise RecordingProblem(
            "invalid", f"The recording {name} holds a JSON {type(data).__name__}, not an object."
        )
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        found = "no format_version" if version is None else f"format_version {version!r}"
        raise RecordingProblem(
            "unknown_version",
            f"The recording {name} has {found}; this normdive reads format_version "
            f"{FORMAT_VERSION}. Re-record it with this version, or upgrade normdive.",
        )
    try:
        return Recording.model_validate(data)
    except ValidationError as error:
        raise RecordingProblem(
            "invalid",
            f"The recording {name} does not match the format: {_validation_summary(error)}. "
            f"{REMEDY}",
        ) from error


def require_ablation_rows(recording: Recording, name: str) -> Recording:
    """The page plays the four rows at the recording's page seed: all four must be there."""
    missing = [key for key in ROW_KEYS if recording.row(key) is None]
    if missing:
        if len(missing) == len(ROW_KEYS):
            what = "has no ablation rows"
        else:
            what = "lacks the ablation row(s) " + ", ".join(missing)
        raise RecordingProblem(
            "no_ablation_rows",
            f"The recording {name} {what} at seed {recording.page_seed}, the seed the page "
            f"plays. {REMEDY}",
        )
    return recording


def read_recording(path: Path | str) -> Recording:
    """The recording at `path`, with all four ablation rows at its page seed."""
    where = Path(path)
    try:
        raw = where.read_bytes()
    except FileNotFoundError as error:
        raise RecordingProblem(
            "missing", f"The recording {where} does not exist. {REMEDY}"
        ) from error
    except OSError as error:
        raise RecordingProblem(
            "unreadable", f"The recording {where} cannot be read ({error.strerror or error})."
        ) from error
    return require_ablation_rows(parse_recording(raw, str(where)), str(where))


_cache: dict[Path, tuple[tuple[int, int], Recording | RecordingProblem]] = {}
_cache_lock = threading.Lock()


def recording_status(path: Path | str) -> Recording | RecordingProblem:
    """read_recording without raising: the Recording, or the problem to show. A file is read
    again only when its modification time or size changes."""
    where = Path(path).absolute()
    try:
        info = os.stat(where)
    except OSError:
        info = None
    stamp = (info.st_mtime_ns, info.st_size) if info is not None else None
    if stamp is not None:
        with _cache_lock:
            cached = _cache.get(where)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    try:
        result: Recording | RecordingProblem = read_recording(path)
    except RecordingProblem as problem:
        result = problem
    except Exception as error:
        result = RecordingProblem(
            "unreadable", f"The recording {path} could not be read: {error!r}. {REMEDY}"
        )
    if stamp is not None:
        with _cache_lock:
            _cache[where] = (stamp, result)
    return result


def _rank(value: float | str, *, worst: float) -> float:
    number = as_float(value)
    return worst if math.isnan(number) else number


def rank_key(row: Row) -> tuple[float, float, int]:
    """Sort key, best first: higher final held-out accuracy, then lower final held-out loss,
    then the page's row order. NaN ranks last on either figure."""
    return (
        -_rank(row.final.heldout_accuracy, worst=-math.inf),
        _rank(row.final.heldout_loss, worst=math.inf),
        ROW_KEYS.index(row.key),
    )


def ranking(recording: Recording, seed: int | None = None) -> list[RowKey]:
    """The row keys at a seed (default: the page seed), best first."""
    wanted = recording.page_seed if seed is None else seed
    return [
        row.key
        for row in sorted((row for row in recording.rows if row.seed == wanted), key=rank_key)
    ]


def best_row(recording: Recording, seed: int | None = None) -> RowKey:
    """The row the gate asks the learner to play, computed from the rows, never stored: the
    highest final held-out per-token accuracy, ties to the lower final held-out loss, and a
    tie on both to the page's row order. Seed None means the recording's page seed."""
    order = ranking(recording, seed)
    if not order:
        wanted = recording.page_seed if seed is None else seed
        raise RecordingProblem(
            "no_ablation_rows", f"The recording has no ablation rows at seed {wanted}."
        )
    return order[0]
