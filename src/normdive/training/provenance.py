"""Where a recording came from: versions, device, commit, date. torch is imported only to name a
CUDA device: the CPU path's parent need not load it (about 2.7 s of CPU)."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import normdive
from normdive.recording.format import Provenance

SCRIPT = "normdive record-runs"
# The code that decides a row's numbers; uncommitted changes here make git_dirty true.
RECORDING_CODE = ("src/normdive/training", "src/normdive/recording", "src/normdive/lab")
GIT_TIMEOUT_S = 5


def _git(*args: str) -> str | None:
    here = Path(normdive.__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def git_state() -> tuple[str | None, bool | None]:
    """(HEAD commit, whether the recording code has uncommitted changes); None: unknown."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return None, None
    top = _git("rev-parse", "--show-toplevel")
    if top is None:
        return commit, None
    status = _git("-C", top, "status", "--porcelain", "--", *RECORDING_CODE)
    return commit, (None if status is None else bool(status))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return f"cuda: {torch.cuda.get_device_name(0)}"
    return f"cpu: {cpu_name()}"


def provenance(
    *,
    command: str,
    device: str,
    jobs: int,
    threads_per_job: int,
    wall_s: float,
    rows_resumed: int,
) -> Provenance:
    commit, dirty = git_state()
    on_cpu = device == "cpu"  # a GPU run is one process of one thread, whatever was asked
    return Provenance(
        script=SCRIPT,
        normdive_version=normdive.__version__,
        git_commit=commit,
        git_dirty=dirty,
        command=command,
        python_version=sys.version.split()[0],
        torch_version=importlib.metadata.version("torch"),
        platform=platform.platform(),
        device=device_name(device),
        jobs=jobs if on_cpu else 1,
        threads_per_job=threads_per_job if on_cpu else 1,
        created_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        wall_s=round(wall_s, 1),
        rows_resumed=rows_resumed,
    )
