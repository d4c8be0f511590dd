"""`normdive record-runs --sweep` and `normdive merge-recordings` end to end on a tiny sweep,
as real processes: the file beside the recording, progress lines when the output is no
terminal, resume after SIGKILL, and shards merged into exactly the unsharded sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from normdive.cli import app
from normdive.recording.runs import Runs, SweepPlan
from normdive.recording.sweep_reader import read_sweep

NORMDIVE = str(Path(sys.executable).parent / "normdive")
# Depths 1 and 2, two seeds, the two single-component rows, a dozen steps: 16 runs of about a
# fifth of a second each once torch has loaded.
TINY_SWEEP = [
    "--sweep",
    "--sweep-depths",
    "1,2",
    "--seeds",
    "0,1",
    "--rows",
    "residual_only,layernorm_only",
    "--d-model",
    "16",
    "--heads",
    "2",
    "--steps",
    "12",
    "--batch-size",
    "8",
    "--eval-every",
    "4",
    "--heldout-size",
    "16",
    "--device",
    "cpu",
]
RUNS = 2 * 2 * 2 * 2
SAFETY_TIMEOUT_S = 300  # only so that a hung run fails the test instead of hanging it
OLD = b"the previous sweep, which an interrupted run must leave alone\n"


def normdive(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NORMDIVE, *args],
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,
        check=False,
    )


def runs_of(sweep: Runs) -> list[dict[str, object]]:
    """The runs as the page sees them: everything but each run's own wall time."""
    return [run.model_dump(exclude={"wall_s"}) for run in sweep.runs]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("whole") / "the-transformer-block.json"
    done = normdive("record-runs", *TINY_SWEEP, "--jobs", "2", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out.with_name("the-transformer-block-sweep.json"), done.stdout


@pytest.mark.slow
def test_the_sweep_is_written_beside_the_recording(whole: tuple[Path, str]) -> None:
    path, stdout = whole
    sweep = read_sweep(path)
    assert len(sweep.runs) == RUNS
    plan = sweep.plan_as(SweepPlan)
    assert [(e.depth, e.seeds) for e in plan.depths] == [(1, [0, 1]), (2, [0, 1])]
    assert plan.inits == ["gpt2", "pytorch"]
    assert not path.with_name("the-transformer-block.json").exists()  # the recording's name
    assert not path.with_name(path.name + ".partial").exists()
    assert not path.with_name(path.name + ".tmp").exists()
    source = sweep.provenance[0]
    assert source.command.startswith("normdive record-runs --sweep --sweep-depths 1,2")
    assert f"Wrote {path}" in stdout
    assert "| depth | init | row | accuracy at seeds 0, 1 | mean | spread |" in stdout
    checked = normdive("check-recording", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"OK: a valid sweep of {RUNS} runs." in checked.stdout


@pytest.mark.slow
def test_progress_shows_in_a_log(whole: tuple[Path, str]) -> None:
    # stdout is a pipe here: no live bars, a line per finished run with the estimate.
    _, stdout = whole
    done = [line for line in stdout.splitlines() if line.startswith("[")]
    assert len(done) == RUNS, stdout
    assert done[0].startswith("[1/16] depth ")
    assert " left" in done[0] and " elapsed" in done[0]
    assert done[-1].startswith("[16/16] ") and done[-1].endswith("elapsed, done")


@pytest.mark.slow
def test_shards_merged_are_the_unsharded_sweep(tmp_path: Path, whole: tuple[Path, str]) -> None:
    out = tmp_path / "the-transformer-block.json"
    parts = []
    for index in (1, 2):
        done = normdive(
            "record-runs", *TINY_SWEEP, "--shard", f"{index}/2", "--jobs", "1", "--out", str(out)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        part = tmp_path / f"the-transformer-block-sweep.shard-{index}-of-2.json"
        assert read_sweep(part).plan.shard is not None
        parts.append(str(part))
    merged_path = tmp_path / "merged.json"
    merged = normdive("merge-recordings", *reversed(parts), "--out", str(merged_path))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert f"Merged 2 shard(s), {RUNS} runs, into {merged_path}" in merged.stdout
    joined, reference = read_sweep(merged_path), read_sweep(whole[0])
    assert runs_of(joined) == runs_of(reference)  # trained with 1 job per shard against 2
    assert joined.plan == reference.plan and joined.plan.shard is None
    assert len(joined.provenance) == 2

    gap = normdive("merge-recordings", parts[0], "--out", str(tmp_path / "gap.json"))
    assert gap.returncode == 1
    assert "Not merged: Shard(s) 2 of 2 are missing; give all 2." in gap.stderr
    assert not (tmp_path / "gap.json").exists()
    twice = normdive("merge-recordings", *parts, parts[1], "--out", str(tmp_path / "t.json"))
    assert twice.returncode == 1 and "Shard 2 of 2 is given twice" in twice.stderr


@pytest.mark.slow
def test_an_interrupted_sweep_trains_only_what_is_missing(
    tmp_path: Path, whole: tuple[Path, str]
) -> None:
    out = tmp_path / "the-transformer-block.json"
    sweep_path = tmp_path / "the-transformer-block-sweep.json"
    sweep_path.write_bytes(OLD)
    partial = tmp_path / "the-transformer-block-sweep.json.partial"
    process = subprocess.Popen(
        [NORMDIVE, "record-runs", *TINY_SWEEP, "--jobs", "1", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    while len(list(partial.glob("depth*.json"))) < 2:
        assert process.poll() is None, process.communicate()[0]
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=SAFETY_TIMEOUT_S)
    assert sweep_path.read_bytes() == OLD  # replaced only when whole
    kept = len(list(partial.glob("depth*.json")))

    resumed = normdive("record-runs", *TINY_SWEEP, "--jobs", "2", "--out", str(out))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"Resuming: {kept} finished run(s) kept" in resumed.stdout
    trained = [line for line in resumed.stdout.splitlines() if line.startswith("[")]
    assert len(trained) == RUNS - kept
    again = read_sweep(sweep_path)
    assert runs_of(again) == runs_of(read_sweep(whole[0]))
    assert again.provenance[0].rows_resumed == kept


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep-depths", "2,4"], "--sweep-depths goes with --sweep"),
        (["--shard", "3/2"], "I must be from 1 to N"),
        (["--sweep", "--shard", "3/2"], "I must be from 1 to N"),
        (["--sweep", "--shard", "two"], "write it as I/N"),
        (["--sweep", "--sweep-depths", "2,x"], "is not a comma-separated list of depths"),
        (["--sweep", "--sweep-depths", "0,2"], "give depths from 1 to 64"),
        (["--sweep", "--depth", "4"], "leave --depth and --init out"),
    ],
)
def test_bad_sweep_options_are_refused_and_change_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["record-runs", *args, "--out", str(tmp_path / "r.json")])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split()), result.output
    assert list(tmp_path.iterdir()) == []


def test_merge_refuses_a_file_that_is_no_sweep(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(app, ["merge-recordings", str(path), "--out", str(tmp_path / "m")])
    assert result.exit_code == 1
    assert "has no format_version" in result.output
    assert not (tmp_path / "m").exists()


@pytest.mark.slow  # a process that loads torch to look for CUDA: about 3-4 s
def test_a_cuda_sweep_without_a_cuda_device_is_refused(tmp_path: Path) -> None:
    # As a process that sees no CUDA device, on any machine (CUDA_VISIBLE_DEVICES empty hides
    # every GPU from torch), wide enough that no message wraps.
    result = subprocess.run(
        [NORMDIVE, "record-runs", "--sweep", "--device", "cuda", "--out", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "200"},
        timeout=SAFETY_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 2
    output = " ".join((result.stdout + result.stderr).split())
    assert "--device cuda: this torch sees no CUDA device" in output
    assert list(tmp_path.iterdir()) == []
