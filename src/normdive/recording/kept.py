"""What a server worker keeps of a recorded file it reads on request (the depth sweep, the lab
grid): the last result, reused while the file's stat (inode, size, modification and change
time) stands still, since parsing the default sweep takes tens of milliseconds and the panels
ask on every open. A file replaced, edited or touched is read again on the next request."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

ResultT = TypeVar("ResultT")
Stamp = tuple[int, int, int, int]


class KeptByStat(Generic[ResultT]):
    """Each file's last result, per worker, with the stat it was read under."""

    def __init__(self, read: Callable[[Path], ResultT]) -> None:
        self._read = read
        self._kept: dict[Path, tuple[Stamp, ResultT]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path | str) -> ResultT:
        """The file's result, read again only when its stat changed. Raises OSError
        (FileNotFoundError when it is gone) when the file cannot be stat'ed."""
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
