"""Writing files of runs so that a reader sees the old file or the whole new one."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from normdive.recording.runs import PLAN_INDENTS, Runs


class UnfaithfulWrite(Exception):
    """The file written did not read back as the document it was written from."""


def tmp_path(out: Path) -> Path:
    return out.with_name(out.name + ".tmp")


def write_atomically(path: Path, text: str) -> None:
    tmp = tmp_path(path)
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_runs(out: Path, runs: Runs) -> int:
    return write_validated(out, runs, indent=PLAN_INDENTS[runs.plan.kind])


def write_validated(out: Path, document: BaseModel, *, indent: int | None = 1) -> int:
    """Write, read back, validate, rename over `out`; returns the size in bytes. Raises
    UnfaithfulWrite or OSError with `out` unchanged."""
    out.parent.mkdir(parents=True, exist_ok=True)
    text = document.model_dump_json(indent=indent) + "\n"
    tmp = tmp_path(out)
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if type(document).model_validate_json(tmp.read_bytes()) != document:
            raise UnfaithfulWrite(f"{tmp} did not read back as written; {out} is unchanged")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return len(text.encode("utf-8"))
