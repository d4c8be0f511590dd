"""The depth sweep's format: the plan, what a valid file holds, its schema, its summary in
`check-recording`, its size at the default plan, and merging shards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from normdive.cli import app
from normdive.recording.format import RunConfig
from normdive.recording.merge import MergeProblem, merge_runs
from normdive.recording.reader import RecordingProblem
from normdive.recording.runs import Runs, ShardPart
from normdive.recording.sweep import default_plan, shard_path_for, sweep_path_for
from normdive.recording.sweep_reader import cells, parse_sweep, verdicts
from sample_sweeps import FLIP_AT_8, sample_sweep

SHIPPED_MAX_BYTES = 2 * 1024 * 1024
TINY_PLAN = default_plan(depths=(2, 4), seeds=(0, 1), trim_depth=4, seeds_from_trim_depth=1)


def test_the_default_plan() -> None:
    plan = default_plan()
    assert [(e.depth, e.seeds) for e in plan.depths] == [
        (2, [0, 1, 2]),
        (4, [0, 1, 2]),
        (8, [0, 1, 2]),
        (16, [0]),
    ]
    assert plan.inits == ["gpt2", "pytorch"]
    assert plan.trimmed == "depth 16 trained seed(s) 0 only (the sweep's time budget)."
    runs = plan.planned()
    assert len(runs) == 3 * 24 + 8 == 80
    assert len({run.model_dump_json() for run in runs}) == len(runs)
    first = runs[0]  # the longest first
    assert (first.depth, first.init, first.row_key, first.seed) == (16, "gpt2", "both", 0)
    assert runs[-1].depth == 2


def test_shards_are_disjoint_and_cover_the_plan() -> None:
    plan = default_plan()
    whole = sorted(run.model_dump_json() for run in plan.planned())
    for count in (1, 2, 3, 7, 80, 100):
        parts = [
            plan.model_copy(update={"shard": ShardPart(index=index, count=count)}).sharded()
            for index in range(1, count + 1)
        ]
        joined = [run.model_dump_json() for part in parts for run in part]
        assert sorted(joined) == whole


def test_beside_the_recording() -> None:
    path = sweep_path_for(Path("recordings/the-transformer-block.json"))
    assert path == Path("recordings/the-transformer-block-sweep.json")
    assert shard_path_for(path, 2, 4) == Path(
        "recordings/the-transformer-block-sweep.shard-2-of-4.json"
    )


def test_a_whole_sweep_round_trips() -> None:
    sweep = sample_sweep(plan=TINY_PLAN)
    assert parse_sweep(sweep.model_dump_json(), "s") == sweep


def _data(sweep: Runs) -> dict[str, object]:
    return json.loads(sweep.model_dump_json())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["runs"].pop(), "runs missing from the plan: "),
        (lambda d: d["runs"].append(d["runs"][0]), "appears twice"),
        (
            lambda d: d["runs"][0]["config"].update(seed=7),
            "depth 2 gpt2 both eps 1e-05 seed 7 is not in the plan",
        ),
        (
            lambda d: d["runs"][0]["block_grad_norms"][0]["norms"].pop(),
            "1 block gradient norms at step 1, expected depth 2",
        ),
        (lambda d: d["runs"][0].update(block_grad_norms=None), "no block gradient norms"),
        (lambda d: d["plan"]["depths"].reverse(), "must be distinct and in increasing order"),
        (lambda d: d.update(kind="recording"), "kind"),
        (lambda d: d["plan"].update(kind="ablation"), "plan"),
    ],
)
def test_an_invalid_sweep_is_refused_with_the_reason(change, message: str) -> None:  # type: ignore[no-untyped-def]
    data = _data(sample_sweep(plan=TINY_PLAN))
    change(data)
    with pytest.raises((RecordingProblem, ValidationError)) as caught:
        parse_sweep(json.dumps(data), "s.json")
    assert message in str(caught.value)


def test_an_unknown_version_is_named() -> None:
    data = _data(sample_sweep(plan=TINY_PLAN))
    data["format_version"] = 7
    with pytest.raises(RecordingProblem) as caught:
        parse_sweep(json.dumps(data), "s.json")
    assert caught.value.reason == "unknown_version"


def test_the_default_sweep_at_full_shape_fits_the_shipped_size() -> None:
    # Every run with the curve the default config records (600 steps, one point every 20:
    # 31 points) and ten per-block gradient norm points, in full float64 precision: the
    # default sweep (80 runs, 619 KB), and a CUDA sweep (depth 32 too, no seed trimmed: 120
    # runs, 1,078 KB).
    config = RunConfig()
    finals = {**FLIP_AT_8, **{(32, i): FLIP_AT_8[(16, i)] for i in ("gpt2", "pytorch")}}
    for plan in (default_plan(), default_plan(depths=(2, 4, 8, 16, 32), trim_depth=None)):
        sweep = sample_sweep(finals, plan=plan, config=config, points=31)
        size = len(sweep.model_dump_json().encode())
        assert size <= SHIPPED_MAX_BYTES, size


def test_check_recording_validates_a_sweep_and_prints_its_summary(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(sample_sweep().model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 0, result.output
    assert "depth sweep, lesson" in result.output
    assert "| depth | init | row | accuracy at seeds 0, 1, 2 | mean | spread |" in result.output
    assert "| 4 | gpt2 | layernorm_only | 87.9 % / 87.9 % / 87.9 % | 87.9 % |" in result.output
    assert "| 16 | pytorch | residual_only | 100.0 % / - / - | 100.0 % |" in result.output
    assert "depth 2, gpt2: single component recovering more: layernorm_only" in result.output
    assert "depth 8, gpt2: single component recovering more: residual_only" in result.output
    assert "depth 16 trained seed(s) 0 only" in result.output
    assert "OK: a valid sweep of 80 runs." in result.output


def test_check_recording_refuses_a_broken_sweep(tmp_path: Path) -> None:
    data = _data(sample_sweep(plan=TINY_PLAN))
    data["runs"].pop()  # type: ignore[attr-defined]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = CliRunner().invoke(app, ["check-recording", str(path)])
    assert result.exit_code == 1
    assert "does not match the format" in result.output and "runs missing" in result.output


def test_the_seed_spread_and_the_verdicts() -> None:
    noise = {0: 0.0, 1: 0.05, 2: -0.05}
    sweep = sample_sweep(plan=TINY_PLAN, seed_noise=lambda seed, key: noise[seed])
    cell = next(c for c in cells(sweep) if (c.depth, c.init, c.key) == (4, "gpt2", "residual_only"))
    assert cell.by_seed == ((0, 0.186),)  # trimmed to one seed from depth 4
    cell = next(c for c in cells(sweep) if (c.depth, c.init, c.key) == (2, "gpt2", "residual_only"))
    assert cell.by_seed == ((0, 0.10), (1, pytest.approx(0.15)))
    assert cell.high - cell.low == pytest.approx(0.05)
    found = {(v.depth, v.init): v.verdict for v in verdicts(sweep)}
    assert found == {
        (2, "gpt2"): "layernorm_only",
        (4, "gpt2"): "layernorm_only",
        (2, "pytorch"): "residual_only",
        (4, "pytorch"): "residual_only",
    }


def _shards(sweep: Runs, count: int) -> list[tuple[str, Runs]]:
    parts = []
    for index in range(1, count + 1):
        plan = sweep.plan.model_copy(update={"shard": ShardPart(index=index, count=count)})
        wanted = plan.sharded()
        held = [r for r in sweep.runs if r.config in wanted]
        parts.append((f"part{index}", sweep.model_copy(update={"plan": plan, "runs": held})))
    return parts


def test_merging_shards_gives_the_whole_sweep() -> None:
    sweep = sample_sweep(plan=TINY_PLAN)
    parts = _shards(sweep, 3)
    for _, part in parts:  # each part is a valid file on its own
        Runs.model_validate_json(part.model_dump_json())
    merged = merge_runs(list(reversed(parts)))
    assert merged.runs == sweep.runs
    assert merged.model_copy(update={"provenance": sweep.provenance}) == sweep
    assert len(merged.provenance) == 3


def test_merge_refuses_gaps_duplicates_and_disagreement() -> None:
    sweep = sample_sweep(plan=TINY_PLAN)
    parts = _shards(sweep, 3)
    with pytest.raises(MergeProblem, match=r"Shard\(s\) 2 of 3 are missing"):
        merge_runs([parts[0], parts[2]])
    with pytest.raises(MergeProblem, match="Shard 1 of 3 is given twice: part1 and again"):
        merge_runs([parts[0], ("again", parts[0][1]), parts[1], parts[2]])
    moved = parts[1][1].plan.model_copy(update={"base": RunConfig(steps=7)})
    other = parts[1][1].model_copy(update={"plan": moved})
    with pytest.raises(MergeProblem, match="trained with different settings"):
        merge_runs([parts[0], ("part2", other), parts[2]])
    with pytest.raises(MergeProblem, match="is a whole sweep, not a shard"):
        merge_runs([("whole", sweep)])
    four = _shards(sweep, 4)
    with pytest.raises(MergeProblem, match="different numbers of shards"):
        merge_runs([parts[0], ("p4", four[1][1]), parts[2]])
