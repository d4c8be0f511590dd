"""The lab's WebAssembly kernels (docs/lab.md, "The two paths"): the committed
static/lab/kernels.wasm is the build of wasm/lab_kernels.ts with the pinned AssemblyScript (so
`make run` needs no compiler and the source is what runs), and what the lab's Worker loads
stays light. The kernels' numbers are held to PyTorch by tests/test_lab_parity.py."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "src" / "normdive" / "web" / "static" / "lab"
WASM = LAB / "kernels.wasm"
ASC = ROOT / "node_modules" / ".bin" / "asc"
BUILD_TIMEOUT_S = 120
# The trainer and its kernels (every file of static/lab/: worker.js, what it imports, and the
# kernels' binary), loaded only when the lab panel opens: at most this many bytes gzipped
# together (what a phone downloads before its first update).
LAB_GZIP_BUDGET = 30 * 1024


@pytest.mark.node
def test_the_committed_wasm_is_the_build_of_its_source(tmp_path: Path) -> None:
    out = tmp_path / "kernels.wasm"
    completed = subprocess.run(
        [
            str(ASC),
            "wasm/lab_kernels.ts",
            "--config",
            "wasm/asconfig.json",
            "--target",
            "release",
            "-o",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert out.read_bytes() == WASM.read_bytes(), "static/lab/kernels.wasm is stale: make wasm"


def test_the_trainer_and_its_kernels_stay_within_30_kb_gzipped() -> None:
    total = sum(len(gzip.compress(path.read_bytes(), 9)) for path in LAB.iterdir())
    assert total <= LAB_GZIP_BUDGET, total
