"""Writing recording and sweep files so that a reader sees the old file or the whole new one,
never half of one. Torch-free: `merge-recordings` writes with it too."""

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
    """Write `text` to `path` so that a reader sees the old file or the new one, never half."""
    tmp = tmp_path(path)
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_runs(out: Path, runs: Runs) -> int:
    """write_validated, indented as the file's plan is (runs.PLAN_INDENTS)."""
    return write_validated(out, runs, indent=PLAN_INDENTS[runs.plan.kind])


def write_validated(out: Path, document: BaseModel, *, indent: int | None = 1) -> int:
    """Write to `<out>.tmp`, read back, validate, rename over `out`; the temporary file never
    stays. Returns the file's size in bytes. Raises UnfaithfulWrite or OSError, `out` unchanged."""
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
