"""The sweep's pieces in training: its jobs (each run's own depth and init), the kept runs a
rerun may reuse, and the in-process path CUDA takes (run here on the CPU)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from normdive.recording.format import RunConfig
from normdive.recording.sweep import default_plan, relative_cost
from normdive.training.progress import RunProgress
from normdive.training.runner import PartialRows, fingerprint, run_here
from normdive.training.sweep import sweep_jobs

TINY = RunConfig(depth=8, d_model=8, n_heads=2, steps=4, batch_size=4, eval_every=2, heldout_size=4)


def test_each_job_trains_at_its_runs_depth_and_init() -> None:
    plan = default_plan(depths=(1, 2), seeds=(0,), rows=("both",), base=TINY)
    jobs = sweep_jobs(plan)
    assert [(j.config.depth, j.config.init, j.name) for j in jobs] == [
        (2, "gpt2", "depth2-gpt2-both-seed0"),
        (2, "pytorch", "depth2-pytorch-both-seed0"),
        (1, "gpt2", "depth1-gpt2-both-seed0"),
        (1, "pytorch", "depth1-pytorch-both-seed0"),
    ]
    assert all(j.config.steps == TINY.steps for j in jobs)
    assert [j.cost for j in jobs] == [relative_cost(2)] * 2 + [relative_cost(1)] * 2


def test_the_fingerprint_names_the_settings_and_device_not_the_plan() -> None:
    assert fingerprint(TINY, "cpu", "sweep") == fingerprint(TINY, "cpu", "sweep")
    assert fingerprint(TINY, "cpu", "sweep") != fingerprint(TINY, "cuda", "sweep")
    assert fingerprint(TINY, "cpu", "sweep") != fingerprint(RunConfig(), "cpu", "sweep")
    assert fingerprint(TINY, "cpu", "sweep") != fingerprint(TINY, "cpu")
    assert "plan" not in fingerprint(TINY, "cpu", "sweep")


def test_the_in_process_path_keeps_each_run_under_its_name(tmp_path: Path) -> None:
    plan = default_plan(depths=(1, 2), seeds=(0,), inits=("pytorch",), rows=("both",), base=TINY)
    jobs = sweep_jobs(plan)
    partial = PartialRows(tmp_path / "s.json", fingerprint(TINY, "cpu", "sweep"), fresh=False)
    console = Console(file=io.StringIO(), force_terminal=False)
    bars = RunProgress(console, [job.planned for job in jobs], TINY.steps)
    with bars:
        run_here(jobs, "cpu", partial, bars)
    deep, shallow = (partial.load(job) for job in jobs)
    assert deep is not None and shallow is not None
    assert all(len(point.norms) == 2 for point in deep.block_grad_norms or [])
    assert (deep.config.depth, deep.config.init, deep.config.row_key) == (2, "pytorch", "both")
    assert (tmp_path / "s.json.partial" / "depth2-pytorch-both-seed0.json").exists()
    # A kept run whose settings are not its job's (here its depth) is trained again.
    (tmp_path / "s.json.partial" / "depth1-pytorch-both-seed0.json").write_text(
        deep.model_dump_json(), encoding="utf-8"
    )
    assert partial.load(jobs[1]) is None
    assert "[2/2] depth 1 pytorch both seed 0" in console.file.getvalue()  # type: ignore[attr-defined]
