"""A worker's last result per recorded file read on request (the sweep, the lab grid), kept
while the file's stat stands still: parsing the default sweep takes tens of milliseconds."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

ResultT = TypeVar("ResultT")
Stamp = tuple[int, int, int, int]


class KeptByStat(Generic[ResultT]):
    def __init__(self, read: Callable[[Path], ResultT]) -> None:
        self._read = read
        self._kept: dict[Path, tuple[Stamp, ResultT]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path | str) -> ResultT:
        """Read again only when the stat changed; OSError when it cannot be stat'ed."""
        where = Path(path).absolute()
        info = os.stat(where)
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        with self._lock:
            kept = self._kept.get(where)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        result = self._read(where)
        with self._lock:
            self._kept[where] = (stamp, result)
        return result
