"""The one format of runs: each plan's axes and what a file of it may hold, the selection the
player, the sweep panel and the lab ask ("the runs at this configuration", "this row here"),
shards of any plan merged, and the one reader's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from normdive.cli import app
from normdive.recording.files import write_runs
from normdive.recording.format import ROW_KEYS
from normdive.recording.kinds import read_runs
from normdive.recording.merge import MergeProblem, merge_runs
from normdive.recording.reader import RecordingProblem, parse_runs
from normdive.recording.runs import LabPlan, Runs
from normdive.recording.selection import select, select_one
from normdive.recording.sweep import default_plan
from sample_lab import sample_lab_grid
from sample_recordings import sample_recording
from sample_sweeps import sample_sweep

TINY_PLAN = default_plan(depths=(2, 4), seeds=(0, 1), trim_depth=4, seeds_from_trim_depth=1)


def test_a_row_is_asked_of_the_runs_at_the_plans_first_settings_or_those_given() -> None:
    recording = sample_recording(seeds=(0, 1))
    both = recording.row("both")
    assert both is not None and (both.config.row_key, both.config.seed) == ("both", 0)
    other = recording.row("neither", seed=1)
    assert other is not None and (other.config.row_key, other.config.seed) == ("neither", 1)
    assert recording.row("both", seed=7) is None
    sweep = sample_sweep(plan=TINY_PLAN)
    cell = sweep.row("residual_only", depth=4, init="pytorch", seed=0)
    assert cell is not None and (cell.config.depth, cell.config.init) == (4, "pytorch")
    assert sweep.row("residual_only", depth=4, init="pytorch", seed=1) is None  # trimmed
    grid = sample_lab_grid()
    # The lab's first settings name an eps; a row without layer norm has none.
    assert grid.row("neither") is not None and grid.row("neither", depth=3) is not None
    assert grid.row("both", eps=1.0) is not None


def test_each_run_carries_its_whole_configuration() -> None:
    runs = sample_sweep(plan=TINY_PLAN)
    for run in runs.runs:
        config = run.config
        assert config.d_model == runs.plan.base.d_model and config.steps == runs.plan.base.steps
        assert config.eps == (1e-5 if config.layernorm else None)
    assert {run.config.depth for run in runs.runs} == {2, 4}
    grid = sample_lab_grid()
    assert {run.config.eps for run in grid.runs} == {0.0, 1e-5, 1.0, None}
    assert all(run.block_grad_norms is None for run in grid.runs)


def test_the_runs_at_a_configuration() -> None:
    runs = sample_sweep(plan=TINY_PLAN)
    at_two = runs.select(depth=2, init="gpt2", layernorm=False, residual=True)
    assert [run.config.seed for run in at_two] == [0, 1]
    assert runs.run_at(depth=4, init="pytorch", layernorm=True, residual=True, seed=1) is None
    assert len(runs.select()) == len(runs.runs)
    with pytest.raises(ValueError, match="no run setting is called colour"):
        runs.select(colour="red")
    grid = sample_lab_grid()
    # eps within a relative 1e-9: the lesson's decimal and the file's number are one eps.
    assert grid.run_at(depth=1, layernorm=True, residual=True, eps=1.0000000001e-5, seed=0)
    assert grid.run_at(depth=1, layernorm=True, eps=1.1e-5) is None
    assert [run.config.seed for run in grid.first_runs()] == [0]


def test_a_bool_is_not_a_number_in_a_selection() -> None:
    items = [{"layernorm": True}, {"layernorm": 1}]
    assert select(items, dict, layernorm=True) == [{"layernorm": True}]
    assert select_one(items, dict, layernorm=1) == {"layernorm": 1}


def test_a_run_outside_its_plan_or_twice_is_refused() -> None:
    data = json.loads(sample_sweep(plan=TINY_PLAN).model_dump_json())
    data["runs"].append(data["runs"][0])
    with pytest.raises(ValidationError, match="appears twice"):
        Runs.model_validate(data)
    data["runs"] = data["runs"][2:-1]
    with pytest.raises(ValidationError, match="runs missing from the plan"):
        Runs.model_validate(data)
    ablation = json.loads(sample_recording().model_dump_json())
    ablation["runs"][0]["config"]["seed"] = 7
    with pytest.raises(ValidationError, match="seed 7 is not in the plan"):
        Runs.model_validate(ablation)
    ablation["runs"][0]["config"].update(seed=0, layernorm=False)
    with pytest.raises(ValidationError, match="layer norm is off: eps must be null"):
        Runs.model_validate(ablation)


@pytest.mark.parametrize("count", [2, 3])
def test_shards_of_any_plan_merge_into_the_whole(count: int) -> None:
    for whole in (
        sample_recording(seeds=(0, 1, 2)),
        sample_lab_grid(),
        sample_sweep(plan=TINY_PLAN),
    ):
        parts = []
        for index in range(1, count + 1):
            plan = type(whole.plan).model_validate(
                {**whole.plan.model_dump(), "shard": {"index": index, "count": count}}
            )
            wanted = plan.sharded()
            held = [r for r in whole.runs if any(r.config == c for c in wanted)]
            parts.append((f"part{index}", whole.model_copy(update={"plan": plan, "runs": held})))
        merged = merge_runs(list(reversed(parts)))
        assert merged.plan == whole.plan
        assert sorted(r.model_dump_json() for r in merged.runs) == sorted(
            r.model_dump_json() for r in whole.runs
        )
        assert len(merged.provenance) == count
        with pytest.raises(MergeProblem, match=f"Shard\\(s\\) 1 of {count} are missing"):
            merge_runs(parts[1:])
        with pytest.raises(MergeProblem, match="not a shard"):
            merge_runs([("whole", whole)])


def _lab_part(whole: Runs, depths: list[int], eps: list[float]) -> Runs:
    """The runs of `whole` at `depths` and (with layer norm) `eps`, as a whole lab grid."""
    plan = type(whole.plan).model_validate(
        {**whole.plan.model_dump(), "depths": depths, "eps": eps, "trimmed": None}
    )
    held = [
        run for run in whole.runs if run.config.depth in depths and run.config.eps in (None, *eps)
    ]
    return whole.model_copy(update={"plan": plan, "runs": held})


def test_lab_grids_of_other_depths_join_keeping_every_run() -> None:
    whole = sample_lab_grid()
    old = _lab_part(whole, [1, 2, 3], [0.0, 1e-5, 1.0])
    old = old.model_copy(update={"plan": old.plan.model_copy(update={"trimmed": "Old words."})})
    new = _lab_part(whole, [4], [1e-5])
    joined = merge_runs([("old.json", old), ("new.json", new)])
    plan = joined.plan_as(LabPlan)
    assert (plan.depths, plan.eps, plan.depth_eps) == ([1, 2, 3, 4], [0.0, 1e-5, 1.0], {4: [1e-5]})
    assert plan.trimmed == "Old words. Depth 4 recorded at eps 1e-05 only."
    assert joined.provenance == [*old.provenance, *new.provenance]
    # Every run of the old grid is in the joined one, equal; the new ones too, nothing else.
    dumped = {run.model_dump_json() for run in joined.runs}
    assert {run.model_dump_json() for run in old.runs + new.runs} == dumped
    assert len(joined.runs) == len(old.runs) + len(new.runs)
    # The grid the panel reads offers depth 4 at eps 1e-05 only, and misses nothing else.
    assert joined.row("both", depth=4, eps=1e-5, init="gpt2", seed=0) is not None
    assert all(p.depth != 4 for p in joined.missing() if p.seed == 0 and p.init == "gpt2")
    # Read back through the one reader, the rule stands.
    again = parse_runs(joined.model_dump_json(), "joined.json", "lab_grid")
    assert again == joined
    with pytest.raises(MergeProblem, match=r"Depth 3 is in both old\.json and again\.json"):
        merge_runs([("old.json", old), ("again.json", _lab_part(whole, [3], [1e-5]))])
    other_seeds = new.model_copy(update={"plan": new.plan.model_copy(update={"seeds": [0]})})
    with pytest.raises(MergeProblem, match="only their depths may differ"):
        merge_runs([("old.json", old), ("seeds.json", other_seeds)])


def test_the_one_reader_names_the_plan_a_file_holds() -> None:
    text = sample_sweep(plan=TINY_PLAN).model_dump_json()
    with pytest.raises(RecordingProblem, match="holds the sweep, not the recording") as caught:
        parse_runs(text, "s.json", "ablation")
    assert "`normdive record-runs`" in caught.value.message
    assert parse_runs(text, "s.json", "sweep").plan.kind == "sweep"


def test_the_ablation_plan_lists_its_rows_in_the_pages_order() -> None:
    runs = sample_recording(rows=("neither", "both"))
    assert runs.plan.kind == "ablation"
    assert runs.plan.rows == [key for key in ROW_KEYS if key in ("both", "neither")]


def test_merge_recordings_joins_lab_grids_of_other_depths(tmp_path: Path) -> None:
    whole = sample_lab_grid()
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    write_runs(old, _lab_part(whole, [1, 2, 3], [0.0, 1e-5, 1.0]))
    write_runs(new, _lab_part(whole, [4], [1e-5]))
    target = tmp_path / "joined.json"
    done = CliRunner().invoke(app, ["merge-recordings", str(old), str(new), "--out", str(target)])
    assert done.exit_code == 0, done.output
    assert "Merged 2 lab grids" in done.output
    joined = read_runs(target)
    assert joined.plan_as(LabPlan).depth_eps == {4: [1e-5]}
    assert len(joined.provenance) == 2
    again = CliRunner().invoke(app, ["merge-recordings", str(old), str(old), "--out", str(target)])
    assert again.exit_code != 0 and "Depth 1 is in both" in again.output
