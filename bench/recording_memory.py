"""Memory of a process reading the largest recording the reader accepts (its cap,
reader.MAX_RECORDING_BYTES), and of one refused for being over it.

    .venv/bin/python bench/recording_memory.py

The largest accepted file is the shipped recording with its rows repeated at more seeds, up
to just under the cap: real numbers, shaped as a real file is. Each file is read in a fresh
child process (reader.recording_status, as the server reads it), which prints its resident
set size (RSS, from /proc/self/status) before the read and its peak (VmHWM) after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from normdive.config import DEFAULT_RECORDING_PATH
from normdive.recording.reader import MAX_RECORDING_BYTES

CHILD = """
import sys
from normdive.recording import reader

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)

before = kib("VmRSS")
status = reader.recording_status(sys.argv[1])
print(type(status).__name__, getattr(status, "reason", ""), before, kib("VmHWM"))
"""


def largest_accepted(shipped: dict[str, Any]) -> str:
    """The shipped recording's rows repeated at new seeds while the text stays under the cap."""
    data = dict(shipped)
    base_rows = [row for row in shipped["rows"] if row["seed"] == shipped["page_seed"]]
    seeds, rows = list(shipped["seeds"]), list(shipped["rows"])
    block = len(json.dumps(base_rows))
    seed = max(seeds) + 1
    while len(json.dumps({**data, "seeds": seeds, "rows": rows})) + block < MAX_RECORDING_BYTES:
        seeds.append(seed)
        rows.extend({**row, "seed": seed} for row in base_rows)
        seed += 1
    return json.dumps({**data, "seeds": seeds, "rows": rows})


def measure(path: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True
    )
    kind, reason, before, peak = result.stdout.strip().split(" ")
    what = f"{kind} ({reason})" if reason else kind
    return f"{what}: RSS {int(before) / 1024:.0f} MiB before, peak {int(peak) / 1024:.0f} MiB"


def main() -> None:
    shipped = json.loads(DEFAULT_RECORDING_PATH.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as folder:
        cases = {
            "shipped": DEFAULT_RECORDING_PATH.read_text(encoding="utf-8"),
            "largest accepted": largest_accepted(shipped),
            "over the cap (50 MB)": " " * 50_000_000,
        }
        for name, text in cases.items():
            path = Path(folder) / "recording.json"
            path.write_text(text, encoding="utf-8")
            print(f"{name} ({len(text.encode()):,} bytes): {measure(path)}")


if __name__ == "__main__":
    main()
