"""`normdive record-runs` end to end on a tiny config, as a real process: the file it writes,
determinism across job counts, resume after SIGKILL, and SIGINT leaving the old file alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from normdive.cli import app
from normdive.config import DEFAULT_RECORDING_PATH
from normdive.lab.config import LAB_EXTRA_EPS_SEEDS, OFFERED_DEPTHS, OFFERED_EPS
from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, RunConfig
from normdive.recording.reader import parse_recording
from normdive.recording.runs import Runs

NORMDIVE = str(Path(sys.executable).parent / "normdive")
# Depth 2, a few dozen steps: a second or so of training per row after torch has loaded.
TINY = [
    "--depth",
    "2",
    "--d-model",
    "32",
    "--heads",
    "2",
    "--steps",
    "60",
    "--batch-size",
    "16",
    "--eval-every",
    "20",
    "--heldout-size",
    "32",
    "--seeds",
    "0",
]
# The CPU named, so that the command's own process need not load torch to look for CUDA
# (about 2.7 s); the uninterrupted run keeps the default, auto.
ON_THE_CPU = ("--device", "cpu")
# The interrupted runs train two seeds: after the first row, seven are left (two seconds or
# more), so the signal lands while they train.
INTERRUPTED_SEEDS = ["--seeds", "0,1"]
INTERRUPTED_ROWS = 2 * len(ROW_KEYS)
SAFETY_TIMEOUT_S = 300  # only so that a hung run fails the test instead of hanging it
OLD = b"the previous recording, which an interrupted run must leave alone\n"


def record_runs(
    out: Path, *extra: str, device: tuple[str, ...] = ON_THE_CPU
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NORMDIVE, "record-runs", *TINY, *device, "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,
        check=False,
    )


def rows_of(recording: Runs) -> list[dict[str, object]]:
    return [run.model_dump(exclude={"wall_s"}) for run in recording.runs]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("uninterrupted") / "the-transformer-block.json"
    done = record_runs(out, "--jobs", "2", device=())  # auto: the CPU here
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


@pytest.mark.slow
def test_shards_of_the_recording_merge_into_the_recording(
    tmp_path: Path, uninterrupted: tuple[Path, str]
) -> None:
    out = tmp_path / "the-transformer-block.json"
    for index in (1, 2):
        done = record_runs(out, "--shard", f"{index}/2", "--jobs", "1")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "shard" in done.stdout
    assert not out.exists()
    parts = [tmp_path / f"the-transformer-block.shard-{index}-of-2.json" for index in (1, 2)]
    merged = subprocess.run(
        [NORMDIVE, "merge-recordings", *map(str, parts), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=SAFETY_TIMEOUT_S,
        check=False,
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    reference = parse_recording(uninterrupted[0].read_bytes(), "whole")
    joined = parse_recording(out.read_bytes(), "merged")
    assert rows_of(joined) == rows_of(reference)  # one job per shard against two
    assert joined.plan == reference.plan


@pytest.mark.slow
def test_end_to_end(uninterrupted: tuple[Path, str]) -> None:
    out, stdout = uninterrupted
    recording = parse_recording(out.read_bytes(), str(out))
    assert [(r.config.row_key, r.config.seed) for r in recording.runs] == [(k, 0) for k in ROW_KEYS]
    assert (recording.plan.base.depth, recording.plan.base.steps) == (2, 60)
    assert recording.plan.first == {"seed": 0}
    (source,) = recording.provenance
    assert source.command.startswith("normdive record-runs --depth 2 --d-model 32")
    assert (source.jobs, source.threads_per_job, source.rows_resumed) == (2, 1, 0)
    # The default device, auto, found no CUDA here (the tests' torch is a CPU build).
    assert source.device.startswith("cpu: ")
    assert f"Wrote {out}" in stdout
    assert "| row (seed 0) |" in stdout and "| neither | off | off |" in stdout
    # Into a pipe (no terminal): a line per finished row, with the time elapsed and left.
    finished = [line for line in stdout.splitlines() if line.startswith("[")]
    assert [line.split()[0] for line in finished] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert finished[-1].endswith("elapsed, done")
    assert not out.with_name(out.name + ".partial").exists()
    assert not out.with_name(out.name + ".tmp").exists()


# Starts the command with Ctrl-C at its default, as a terminal does: a command started in the
# background by a shell without job control inherits SIGINT ignored, and keeps it ignored
# across exec, so this one would whenever the test run itself was started that way. A small
# interpreter resets it and replaces itself with the command (same process, same pid); a
# preexec_fn would run Python in a child forked from this threaded process.
AS_FROM_A_TERMINAL = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]


def start(out: Path) -> subprocess.Popen[str]:
    # Its own session, so a signal can reach the command and its workers together.
    command = [
        NORMDIVE,
        "record-runs",
        *TINY,
        *ON_THE_CPU,
        *INTERRUPTED_SEEDS,
        "--jobs",
        "1",
        "--out",
        str(out),
    ]
    return subprocess.Popen(
        [*AS_FROM_A_TERMINAL, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def signal_after_first_row(process: subprocess.Popen[str], out: Path, signum: int) -> str:
    first = out.with_name(out.name + ".partial") / "both-seed0.json"
    while not first.exists():
        assert process.poll() is None, process.communicate()[0]
        time.sleep(0.01)
    os.killpg(process.pid, signum)
    output, _ = process.communicate(timeout=SAFETY_TIMEOUT_S)
    return output


@pytest.mark.slow
def test_resume_after_sigkill_gives_the_uninterrupted_rows(
    tmp_path: Path, uninterrupted: tuple[Path, str]
) -> None:
    out = tmp_path / "the-transformer-block.json"
    out.write_bytes(OLD)
    process = start(out)
    signal_after_first_row(process, out, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    assert out.read_bytes() == OLD  # never half-written, never replaced
    partial = out.with_name(out.name + ".partial")
    assert (partial / "both-seed0.json").exists()
    kept = len(list(partial.glob("*-seed*.json")))  # the first row, and any the kill let finish

    resumed = record_runs(out, *INTERRUPTED_SEEDS, "--jobs", "1")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"Resuming: {kept} finished row(s) kept" in resumed.stdout
    trained = [line for line in resumed.stdout.splitlines() if line.startswith("[")]
    assert len(trained) == INTERRUPTED_ROWS - kept
    again = parse_recording(out.read_bytes(), str(out))
    reference = parse_recording(uninterrupted[0].read_bytes(), "uninterrupted")
    # Seed 0's rows are the uninterrupted run's, which trained seed 0 alone with 2 jobs.
    assert [run for run in rows_of(again) if run["config"]["seed"] == 0] == rows_of(reference)
    assert len(again.runs) == INTERRUPTED_ROWS
    assert again.plan.base == reference.plan.base
    assert again.provenance[0].rows_resumed == kept


@pytest.mark.slow
def test_sigint_stops_cleanly_and_keeps_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "the-transformer-block.json"
    out.write_bytes(OLD)
    process = start(out)
    output = signal_after_first_row(process, out, signal.SIGINT)
    assert process.returncode == 130, output
    assert "Interrupted. Finished rows are kept in" in output
    assert "Traceback" not in output
    assert out.read_bytes() == OLD
    assert (out.with_name(out.name + ".partial") / "both-seed0.json").exists()
    assert not out.with_name(out.name + ".tmp").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rows", "both,half"], "give distinct row keys from both, residual_only"),
        (["--seeds", "0,x"], "is not a comma-separated list of seeds"),
        (["--seeds", "1,1"], "give distinct seeds >= 0"),
        (["--steps", "0"], "Invalid settings: steps: Input should be greater than or equal to 1"),
        (["--d-model", "30", "--heads", "4"], "d_model 30 is not divisible by n_heads 4"),
        (["--init", "xavier"], "init: Input should be 'gpt2' or 'pytorch'"),
        (["--device", "tpu"], "choose auto, cpu or cuda"),
        (["--jobs", "0"], "give at least 1"),
    ],
)
def test_bad_settings_are_refused_and_change_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["record-runs", *args, "--out", str(out)])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split()), result.output
    assert list(tmp_path.iterdir()) == []


def test_help_lists_the_options() -> None:
    result = CliRunner().invoke(app, ["record-runs", "--help"])
    assert result.exit_code == 0
    for option in (
        "--depth",
        "--copy-length",
        "--steps",
        "--seeds",
        "--rows",
        "--device",
        "--jobs",
        "--out",
        "--init",
        "--fresh",
    ):
        assert option in result.output


def test_help_shows_each_options_real_default() -> None:
    # Wide enough that no default wraps inside its box.
    result = CliRunner().invoke(app, ["record-runs", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    defaults = RunConfig()
    expected = {
        "--depth": defaults.depth,
        "--copy-length": defaults.copy_length,
        "--steps": defaults.steps,
        "--batch-size": defaults.batch_size,
        "--d-model": defaults.d_model,
        "--heads": defaults.n_heads,
        "--init": defaults.init,
        "--eval-every": defaults.eval_every,
        "--heldout-size": defaults.heldout_size,
        "--seeds": ",".join(map(str, DEFAULT_SEEDS)),
        "--rows": ",".join(ROW_KEYS),
        "--device": "auto",
        "--jobs": "(the CPU count)",
        "--out": DEFAULT_RECORDING_PATH,
        "--fresh": "(resume from them)",
        "--sweep": "(the ablation at --depth)",
        "--sweep-depths": "(2,4,8,16; 32 too on cuda)",
        "--shard": "(the whole plan)",
        "--lab": "(the ablation)",
        "--lab-depths": f"({','.join(map(str, OFFERED_DEPTHS))})",
        "--lab-eps": f"({','.join(f'{e:g}' for e in OFFERED_EPS)})",
        "--lab-eps-seeds": f"({','.join(map(str, LAB_EXTRA_EPS_SEEDS or ())) or 'all'})",
    }
    lines = {
        line.split()[1]: line for line in result.output.splitlines() if line.startswith("│ --")
    }
    assert set(lines) == {*expected, "--help"}
    for option, default in expected.items():
        assert f"[default: {default}]" in lines[option], lines[option]


def test_every_commands_options_show_a_default_or_say_they_are_required() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    commands: list[tuple[str, ...]] = []
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            commands += [(name, sub) for sub in command.commands]
        else:
            commands.append((name,))
    # Every command is walked (a new one is added here, and checked by the loop below).
    assert sorted(commands) == [
        ("check-recording",),
        ("db", "upgrade"),
        ("instructor-link",),
        ("lti", "invite"),
        ("lti", "list"),
        ("lti", "outbox"),
        ("lti", "passback"),
        ("lti", "register"),
        ("lti", "remove"),
        ("lti", "resend"),
        ("lti", "roster"),
        ("lti", "rotate-key"),
        ("merge-recordings",),
        ("prerequisite", "done"),
        ("record-runs",),
        ("report",),
        ("serve",),
        ("xapi", "add"),
        ("xapi", "forget"),
        ("xapi", "list"),
        ("xapi", "remove"),
        ("xapi", "resend"),
        ("xapi", "send"),
        ("xapi", "status"),
    ]
    for words in commands:
        result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "250"})
        assert result.exit_code == 0
        for line in result.output.splitlines():
            if line.startswith("│") and "--" in line and "--help" not in line:
                assert "[default: " in line or "[required]" in line, (words, line)


# The command as a process that sees no CUDA device, on any machine (CUDA_VISIBLE_DEVICES
# empty hides every GPU from torch), and wide enough that no message wraps.
NO_CUDA = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "200"}


@pytest.mark.slow  # a process that loads torch to look for CUDA: about 3-4 s
def test_cuda_asked_for_without_a_cuda_device_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = subprocess.run(
        [NORMDIVE, "record-runs", "--device", "cuda", "--out", str(out)],
        capture_output=True,
        text=True,
        env=NO_CUDA,
        timeout=SAFETY_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 2
    output = " ".join((result.stdout + result.stderr).split())
    assert "--device cuda: this torch sees no CUDA device (use cpu or auto)." in output
    assert list(tmp_path.iterdir()) == []


def test_a_cpu_recording_loads_torch_only_in_its_workers() -> None:
    # The parent picks the device, plans, shows progress and writes the file; the rows train
    # in spawned workers, so the parent need not load torch (about 2.7 s of CPU).
    program = (
        "import sys\n"
        "from normdive.training.command import resolve_device\n"
        "from normdive.training.provenance import provenance\n"
        "import normdive.training.runner, normdive.training.sweep\n"
        "assert resolve_device('cpu') == 'cpu'\n"
        "made = provenance(command='c', device='cpu', jobs=1, threads_per_job=1, wall_s=0,"
        " rows_resumed=0)\n"
        "print(made.torch_version, sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    import torch

    assert done.stdout.split() == [torch.__version__, "[]"]
