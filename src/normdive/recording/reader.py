"""Reading the recording for the page: one clear problem per way a file can be unusable.

CONTRACT (web): read_recording(path) -> Runs (of the ablation plan), raising
RecordingProblem(reason, message); recording_snapshot(path) -> RecordingSnapshot(status,
digest), never raising: the runs or the problem to show, and the sha256 of the bytes they
were parsed from;
recording_status(path) -> its status alone; best_row(recording, seed=None) -> the row key the
gate asks for. read_capped(path) -> the file's bytes, at most MAX_RECORDING_BYTES (the server
and `normdive check-recording` share the cap).

The server's view of a file (recording_snapshot), cached per path:
- A change is noticed by the file's stat (inode, size, mtime, ctime), taken on every call, and
  by its content: while the stat stands still the bytes are read and hashed again at most
  every CONTENT_RECHECK_S, so an edit that keeps the size and mtime (and lands within one tick
  of the ctime clock) shows within that time. Bytes whose digest is unchanged are not parsed
  again.
- A file rewritten in place is, for a moment, half written, and a half-written file reads as
  damaged (cut-off JSON, an invalid document, rows missing). The reader cannot tell that
  moment from a file that is broken for good, so a path that has held a good recording keeps
  serving its last good one while it reads as such a problem, for at most LAST_GOOD_GRACE_S
  from when the problem was first seen (the author's message is logged, once per distinct
  problem); after that, or for a file that is gone, unreadable or over the cap (none of which
  a write in progress causes), the problem shows. Each worker keeps its own last good copy,
  so for that grace a worker started after the damage shows the problem while an older one
  does not. A path that never held a good one shows its problem. A good file (written in
  place or atomically replaced) replaces the last good one as soon as it is noticed.

Every message names the file and is written for a course author, who is the one who can fix
it (usually by running `normdive record-runs`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from normdive.recording.format import ROW_KEYS, RowKey, as_float
from normdive.recording.runs import RUNS_FORMAT_VERSION, AblationPlan, PlanKind, Run, Runs

ProblemReason = Literal[
    "missing",
    "unreadable",
    "too_large",
    "bad_json",
    "unknown_version",
    "invalid",
    "no_ablation_rows",
]
# How many validation errors a message lists before it says "and N more".
MAX_ERRORS_SHOWN = 3
# The command that makes each plan's file again, as its refusals say it.
REMEDIES: dict[PlanKind, str] = {
    "ablation": "Run `normdive record-runs` to make it again.",
    "sweep": "Run `normdive record-runs --sweep` to make it again.",
    "lab_grid": "Run `normdive record-runs --lab` to make it again.",
}
REMEDY = REMEDIES["ablation"]
# What messages call each plan's file.
NOUNS: dict[PlanKind, str] = {"ablation": "recording", "sweep": "sweep", "lab_grid": "lab grid"}
# The format each plan had of its own before the format of runs: no longer read.
RETIRED_FORMAT_VERSION = 1
# The most of a recording file that is read, in bytes. The shipped recording is about 120 KB;
# parsing JSON takes several times its size in memory, so without a cap one large file costs a
# worker hundreds of megabytes (bench/RESULTS.md, "Abuse").
MAX_RECORDING_BYTES = 16 * 1024 * 1024
# While a file's stat stands still, its bytes are read and hashed again at most this often, in
# seconds (per worker). Reading and hashing the shipped 120 KB file takes about 0.5 ms on the
# 2-core test machine, against about 7 µs for a stat: once a second it is lost in the noise,
# while on every request it would add half a millisecond to each.
CONTENT_RECHECK_S = 1.0
# How long a path keeps serving its last good recording while its file reads as damaged, in
# seconds: far longer than any write of a recording takes (a 16 MiB file is written in well
# under a second), short enough that a file broken for good shows its problem soon.
LAST_GOOD_GRACE_S = 30.0
# The problems a write in progress causes: a file cut off mid-way reads as these.
HALF_WRITTEN_REASONS = frozenset({"bad_json", "invalid", "no_ablation_rows"})

logger = logging.getLogger(__name__)


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


def validation_summary(error: ValidationError) -> str:
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


def _decoded(text: str | bytes, noun: str, name: str, remedy: str) -> dict[str, Any]:
    """The file's JSON object, or RecordingProblem saying why it is none."""
    try:
        data = json.loads(text)
    except UnicodeDecodeError as error:
        raise RecordingProblem(
            "unreadable", f"The {noun} {name} is not UTF-8 text ({error.reason}). {remedy}"
        ) from error
    except json.JSONDecodeError as error:
        raise RecordingProblem(
            "bad_json",
            f"The {noun} {name} is not valid JSON (line {error.lineno}, column "
            f"{error.colno}: {error.msg}); it may have been cut short. {remedy}",
        ) from error
    except RecursionError as error:
        # The json module parses nested arrays and objects by recursion; a file nested
        # deeper than the interpreter's recursion limit is no recording either.
        raise RecordingProblem(
            "bad_json",
            f"The {noun} {name} nests its JSON too deeply to read; it is not a recording. {remedy}",
        ) from error
    if not isinstance(data, dict):
        raise RecordingProblem(
            "invalid", f"The {noun} {name} holds a JSON {type(data).__name__}, not an object."
        )
    return data


def _invalid(
    noun: str, name: str, error: ValidationError | ValueError, remedy: str
) -> RecordingProblem:
    found = validation_summary(error) if isinstance(error, ValidationError) else str(error)
    return RecordingProblem(
        "invalid", f"The {noun} {name} does not match the format: {found}. {remedy}"
    )


def parse_runs(text: str | bytes, name: str, kind: PlanKind) -> Runs:
    """The one reader: a file of runs of the plan `kind`, validated once (recording/runs.py).
    `name` is what messages call the file; every refusal is a RecordingProblem naming the
    command that makes it."""
    noun, remedy = NOUNS[kind], REMEDIES[kind]
    data = _decoded(text, noun, name, remedy)
    version = data.get("format_version")
    if version == RETIRED_FORMAT_VERSION:
        raise RecordingProblem(
            "unknown_version",
            f"The {noun} {name} has format_version {version}, a format this normdive no "
            f"longer reads (each plan's own, before files of runs). Re-record it: "
            f"{remedy[:1].lower()}{remedy[1:]}",
        )
    if version != RUNS_FORMAT_VERSION:
        found = "no format_version" if version is None else f"format_version {version!r}"
        raise RecordingProblem(
            "unknown_version",
            f"The {noun} {name} has {found}; this normdive reads format_version "
            f"{RUNS_FORMAT_VERSION}. Re-record it with this version, or upgrade normdive.",
        )
    try:
        runs = Runs.model_validate(data)
    except (ValidationError, ValueError) as error:
        raise _invalid(noun, name, error, remedy) from error
    if runs.plan.kind != kind:
        raise RecordingProblem(
            "invalid",
            f"The file {name} holds the {NOUNS[runs.plan.kind]}, not the {noun}. {remedy}",
        )
    return runs


def parse_recording(text: str | bytes, name: str) -> Runs:
    """Validate a recording's text against the format (not yet asking for the ablation rows).
    `name` is what messages call the file."""
    return parse_runs(text, name, "ablation")


def require_ablation_rows(recording: Runs, name: str) -> Runs:
    """The page plays the four rows at the recording's page seed: all four must be there."""
    missing = [key for key in ROW_KEYS if recording.row(key) is None]
    if missing:
        if len(missing) == len(ROW_KEYS):
            what = "has no ablation rows"
        else:
            what = "lacks the ablation row(s) " + ", ".join(missing)
        seed = recording.plan_as(AblationPlan).page_seed
        raise RecordingProblem(
            "no_ablation_rows",
            f"The recording {name} {what} at seed {seed}, the seed the page plays. {REMEDY}",
        )
    return recording


def read_capped(path: Path | str, remedy: str = REMEDY) -> bytes:
    """The file's bytes, refusing a file larger than MAX_RECORDING_BYTES without reading more
    than one byte past the cap. Raises RecordingProblem (missing, unreadable, too_large), whose
    message ends with `remedy`: the command that makes such a file again."""
    where = Path(path)
    try:
        with where.open("rb") as file:
            # A file known to be too large is not read at all; one growing while it is read
            # is stopped one byte past the cap.
            too_large = os.fstat(file.fileno()).st_size > MAX_RECORDING_BYTES
            raw = b"" if too_large else file.read(MAX_RECORDING_BYTES + 1)
    except FileNotFoundError as error:
        raise RecordingProblem(
            "missing", f"The recording {where} does not exist. {remedy}"
        ) from error
    except OSError as error:
        raise RecordingProblem(
            "unreadable", f"The recording {where} cannot be read ({error.strerror or error})."
        ) from error
    if too_large or len(raw) > MAX_RECORDING_BYTES:
        raise RecordingProblem(
            "too_large",
            f"The recording {where} is larger than {MAX_RECORDING_BYTES // (1024 * 1024)} MiB "
            f"({MAX_RECORDING_BYTES:,} bytes), the most normdive reads. {remedy}",
        )
    return raw


def read_recording(path: Path | str) -> Runs:
    """The recording at `path`, with all four ablation rows at its page seed."""
    return _parse_usable(read_capped(path), str(Path(path)))


def _parse_usable(raw: bytes, name: str) -> Runs:
    return require_ablation_rows(parse_recording(raw, name), name)


@dataclass(frozen=True)
class RecordingSnapshot:
    """What the server serves for a recording path: its runs or the problem to show, and the
    sha256 (hex) of the bytes the runs were parsed from (None with a problem)."""

    status: Runs | RecordingProblem
    digest: str | None


@dataclass(frozen=True)
class _Seen:
    stamp: tuple[int, int, int, int] | None  # (inode, size, mtime ns, ctime ns); None: no stat
    checked_at: float  # time.monotonic() when the bytes were last read
    digest: str | None  # of the bytes last read; None when they could not be read
    served: RecordingSnapshot
    problem: RecordingProblem | None  # what the bytes last read amount to, when not good
    problem_since: float | None  # time.monotonic() when the file first read as a problem


_cache: dict[Path, _Seen] = {}
_cache_lock = threading.Lock()


def _stamp(where: Path) -> tuple[int, int, int, int] | None:
    try:
        info = os.stat(where)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def recording_snapshot(path: Path | str) -> RecordingSnapshot:
    """The recording at `path` as the server serves it (see the module's docstring: a change
    is noticed by stat and by content, and a path keeps its last good recording while it
    reads as a problem). Never raises."""
    where = Path(path).absolute()
    stamp = _stamp(where)
    now = time.monotonic()
    with _cache_lock:
        seen = _cache.get(where)
    if (
        seen is not None
        and stamp is not None
        and seen.stamp == stamp
        and now - seen.checked_at < CONTENT_RECHECK_S
    ):
        return seen.served
    digest: str | None = None
    try:
        raw = read_capped(path)
        digest = hashlib.sha256(raw).hexdigest()
        if seen is not None and seen.digest == digest:
            fresh: Runs | RecordingProblem = (
                seen.problem if seen.problem is not None else seen.served.status
            )
        else:
            fresh = _parse_usable(raw, str(path))
    except RecordingProblem as problem:
        fresh = problem
    except Exception as error:
        fresh = RecordingProblem(
            "unreadable", f"The recording {path} could not be read: {error!r}. {REMEDY}"
        )
    if isinstance(fresh, RecordingProblem):
        since = seen.problem_since if seen is not None and seen.problem_since is not None else now
        served = _last_good(seen, where, fresh, now - since)
        seen_now = _Seen(stamp, now, digest, served, fresh, since)
    else:
        served = RecordingSnapshot(fresh, digest)
        seen_now = _Seen(stamp, now, digest, served, None, None)
    with _cache_lock:
        _cache[where] = seen_now
    return served


def _last_good(
    seen: _Seen | None, where: Path, problem: RecordingProblem, problem_age_s: float
) -> RecordingSnapshot:
    """The snapshot to serve while the file reads as `problem` (for `problem_age_s` so far):
    its last good one while a half-written file could explain the problem, else the problem."""
    last = seen.served if seen is not None else None
    if (
        last is None
        or isinstance(last.status, RecordingProblem)
        or problem.reason not in HALF_WRITTEN_REASONS
        or problem_age_s >= LAST_GOOD_GRACE_S
    ):
        if last is not None and not isinstance(last.status, RecordingProblem):
            logger.warning(
                "the recording %s reads as a problem (%s) that a write in progress does not "
                "explain, or for %.0f s: %s; no longer serving the last good one",
                where,
                problem.reason,
                problem_age_s,
                problem.message,
            )
        return RecordingSnapshot(problem, None)
    if seen is not None and seen.problem != problem:
        logger.warning(
            "the recording %s now reads as a problem (%s): %s; still serving the last good "
            "one (sha256 %s)",
            where,
            problem.reason,
            problem.message,
            last.digest,
        )
    return last


def recording_status(path: Path | str) -> Runs | RecordingProblem:
    """recording_snapshot's status: the runs, or the problem to show. Never raises."""
    return recording_snapshot(path).status


def _rank(value: float | str, *, worst: float) -> float:
    number = as_float(value)
    return worst if math.isnan(number) else number


def rank_key(run: Run) -> tuple[float, float, int]:
    """Sort key, best first: higher final held-out accuracy, then lower final held-out loss,
    then the page's row order. NaN ranks last on either figure."""
    return (
        -_rank(run.final.heldout_accuracy, worst=-math.inf),
        _rank(run.final.heldout_loss, worst=math.inf),
        ROW_KEYS.index(run.config.row_key),
    )


def ranking(recording: Runs, seed: int | None = None) -> list[RowKey]:
    """The row keys at a seed (default: the page seed), best first."""
    wanted = recording.plan_as(AblationPlan).page_seed if seed is None else seed
    return [run.config.row_key for run in sorted(recording.select(seed=wanted), key=rank_key)]


def best_row(recording: Runs, seed: int | None = None) -> RowKey:
    """The row the gate asks the learner to play, computed from the rows, never stored: the
    highest final held-out per-token accuracy, ties to the lower final held-out loss, and a
    tie on both to the page's row order. Seed None means the recording's page seed."""
    order = ranking(recording, seed)
    if not order:
        wanted = recording.plan_as(AblationPlan).page_seed if seed is None else seed
        raise RecordingProblem(
            "no_ablation_rows", f"The recording has no ablation rows at seed {wanted}."
        )
    return order[0]
