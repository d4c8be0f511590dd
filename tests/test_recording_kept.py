"""A file a worker reads on request is read again only when its stat changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from normdive.recording.kept import KeptByStat


def test_a_file_is_read_again_only_when_its_stat_changes(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text("one", encoding="utf-8")
    reads: list[str] = []

    def read(where: Path) -> str:
        reads.append(where.read_text(encoding="utf-8"))
        return reads[-1]

    kept = KeptByStat(read)
    assert kept.get(path) == kept.get(str(path)) == "one"
    assert reads == ["one"]
    path.write_text("two", encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a stat that differs even within one tick of the clock
    assert kept.get(path) == "two" and reads == ["one", "two"]
    path.unlink()
    with pytest.raises(FileNotFoundError):
        kept.get(path)
