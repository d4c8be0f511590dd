"""The lab's config (normdive.lab.config) and its grid's file (normdive.recording.lab_grid):
defaults, validation, the cell lookup, the reader's problems, and the shipped grid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from normdive.lab.config import (
    LAB_EPS,
    LAB_EPS_ONLY_DEPTHS,
    OFFERED_DEPTHS,
    OFFERED_EPS,
    OFFERED_INITS,
    OFFERED_SEEDS,
    LabBase,
    LabConfig,
)
from normdive.recording.format import RunConfig
from normdive.recording.lab_grid import LabGridProblem, lab_path_for, parse_lab_grid, read_lab_grid
from normdive.recording.runs import LabOffered, LabPlan, Runs

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "recordings" / "the-transformer-block-lab.json"

PROVENANCE = {
    "script": "tests",
    "normdive_version": "0",
    "git_commit": None,
    "git_dirty": None,
    "command": "made up for the tests",
    "python_version": "3",
    "torch_version": "0",
    "platform": "test",
    "device": "cpu: test",
    "jobs": 1,
    "threads_per_job": 1,
    "created_at": "2026-01-01T00:00:00+00:00",
    "wall_s": 0.0,
    "rows_resumed": 0,
}


def cell(curve: object = None, final: object = None, **config: object) -> dict[str, object]:
    """A recorded cell (a run of the lab plan) at depth 2, both rows' switches on, eps 1e-05,
    GPT-2's init and seed 0 unless `config` says otherwise; a diverged one by default."""
    return {
        "config": {**LabConfig().model_dump(), "seed": 0, **config},
        "curve": curve
        or [
            {"step": 0, "train_loss": None, "heldout_loss": 2.83, "heldout_accuracy": 0.06},
            {"step": 300, "train_loss": "nan", "heldout_loss": "nan", "heldout_accuracy": 0.06},
        ],
        "final": final or {"step": 300, "heldout_loss": "nan", "heldout_accuracy": 0.06},
        "wall_s": 1.5,
    }


def grid(runs: object = None, **plan: object) -> dict[str, object]:
    """A lab grid file offering depth 2, eps 0 and 1e-05, GPT-2's init and seed 0, with one
    cell recorded unless `runs` says otherwise."""
    return {
        "format_version": 2,
        "kind": "runs",
        "lesson": "8.5 The transformer block",
        "plan": {
            "kind": "lab_grid",
            "base": LabConfig().run_config().model_dump(),
            "first": {"depth": 2, "layernorm": True, "residual": True, "eps": 1e-05, "seed": 0},
            "depths": [2],
            "eps": [0, 1e-05],
            "inits": ["gpt2"],
            "seeds": [0],
            **plan,
        },
        "provenance": [PROVENANCE],
        "runs": [cell()] if runs is None else runs,
    }


def test_the_lab_config_has_every_run_config_field_and_the_lab_defaults() -> None:
    assert set(RunConfig.model_fields) <= set(LabConfig.model_fields)
    assert set(LabConfig.model_fields) - set(RunConfig.model_fields) == {
        "layernorm",
        "residual",
        "eps",
    }
    config = LabConfig()
    assert (config.d_model, config.batch_size, config.copy_length) == (32, 16, 8)
    assert (config.layernorm, config.residual, config.eps) == (True, True, LAB_EPS)
    assert config.run_config().d_model == 32 and config.base == LabBase()
    # The recording's constraints come along with its fields.
    with pytest.raises(ValidationError, match="greater than or equal to 4"):
        LabConfig(d_model=2)
    with pytest.raises(ValidationError, match="not divisible"):
        LabBase(d_model=30)
    with pytest.raises(ValidationError, match="Extra inputs"):
        LabConfig.model_validate({"colour": "red"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"layernorm": True, "eps": None}, "give its eps"),
        ({"layernorm": False, "eps": 1e-5}, "eps must be null"),
        ({"eps": -1.0}, "greater than or equal to 0"),
        ({"eps": float("inf")}, "finite"),
    ],
)
def test_eps_goes_with_layer_norm(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LabConfig.model_validate(changes)


def test_eps_zero_is_allowed() -> None:
    assert LabConfig(eps=0.0).eps == 0.0


def test_a_grid_keeps_non_finite_figures_and_looks_cells_up() -> None:
    loaded = Runs.model_validate(grid())
    found = loaded.row("both")
    assert found is not None and found.final.heldout_loss == "nan"
    assert loaded.row("both", eps=0.0) is None
    assert loaded.row("both", depth=3) is None
    # Offered: two eps with layer norm on (both rows), one point each without.
    assert len(loaded.plan.planned()) == 2 + 1 + 2 + 1
    assert found.config.model_copy(update={"eps": 0.0}) in loaded.missing()
    assert len(loaded.missing()) == 5


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"runs": [cell(), cell()]}, "appears twice"),
        ({"runs": [cell(eps=None)]}, "layer norm is on: give its eps"),
        ({"runs": [cell(layernorm=False)]}, "layer norm is off: eps must be null"),
        ({"runs": [cell(eps=1.0)]}, "eps 1 seed 0 is not in the plan"),
        ({"colour": "red"}, "Extra inputs"),
        (
            {"runs": [cell(final={"step": 3, "heldout_loss": "lots", "heldout_accuracy": 1})]},
            "lots",
        ),
    ],
)
def test_a_bad_grid_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Runs.model_validate(grid(**changes))


def test_the_reader_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "lab.json"
    with pytest.raises(LabGridProblem, match="no lab grid") as missing:
        read_lab_grid(path)
    assert missing.value.reason == "missing"
    path.write_text('{"format_version": 2, ', encoding="utf-8")
    with pytest.raises(LabGridProblem, match="not valid JSON") as cut:
        read_lab_grid(path)
    assert cut.value.reason == "bad_json" and "record-runs --lab" in cut.value.message
    path.write_text(json.dumps({**grid(), "format_version": 7}), encoding="utf-8")
    with pytest.raises(LabGridProblem, match="reads format_version 2"):
        read_lab_grid(path)
    path.write_text(json.dumps({"format_version": 1, "kind": "lab_grid"}), encoding="utf-8")
    with pytest.raises(LabGridProblem, match="Re-record it: run `normdive record-runs --lab`"):
        read_lab_grid(path)
    path.write_text(json.dumps(grid(depths=[])), encoding="utf-8")
    with pytest.raises(LabGridProblem, match="depths") as invalid:
        read_lab_grid(path)
    assert invalid.value.reason == "invalid"
    path.write_bytes(b'{"base": "\xff"}')
    with pytest.raises(LabGridProblem, match="UTF-8"):
        read_lab_grid(path)
    path.write_text(json.dumps(grid()), encoding="utf-8")
    assert read_lab_grid(path) == parse_lab_grid(json.dumps(grid()), "x")


def test_a_depth_may_be_offered_at_fewer_eps() -> None:
    offered = LabOffered(
        depths=[2, 8], eps=[0.0, 1e-5], inits=["gpt2"], seeds=[0], depth_eps={8: [1e-5]}
    )
    plan = LabPlan(kind="lab_grid", base=RunConfig(), first={}, **offered.model_dump()).planned()
    at_8 = [p for p in plan if p.depth == 8]
    assert [p.eps for p in at_8] == [1e-5, None, 1e-5, None]
    assert len(plan) == 6 + 4
    assert offered.depth_eps_trimmed() == "Depth 8 recorded at eps 1e-05 only."
    # Read from JSON (keys are strings there) by the one reader, the rule is checked.
    data = grid(**{**offered.model_dump(mode="json"), "depth_eps": {"8": [1e-05]}})
    read = parse_lab_grid(json.dumps(data), "g.json")
    assert read.plan_as(LabPlan).depth_eps == {8: [1e-5]}
    for depth_eps, message in (
        ({"3": [1e-05]}, "depth_eps names depth 3, which is not offered"),
        ({"8": [1.0]}, "give some of the offered eps \\(0, 1e-05\\), not 1"),
        ({"8": []}, "not none"),
    ):
        bad = grid(**{**offered.model_dump(mode="json"), "depth_eps": depth_eps})
        with pytest.raises(LabGridProblem, match=message):
            parse_lab_grid(json.dumps(bad), "g.json")


def test_the_grid_lives_beside_the_recording() -> None:
    assert lab_path_for(Path("recordings/the-transformer-block.json")) == Path(
        "recordings/the-transformer-block-lab.json"
    )


def test_the_shipped_grid_covers_what_it_offers_or_says_what_it_trimmed() -> None:
    shipped = read_lab_grid(SHIPPED)
    plan = shipped.plan_as(LabPlan)
    assert plan.base == LabConfig.at(LabBase()).run_config()
    assert plan.depths == list(OFFERED_DEPTHS)
    # The deep depths carry the default eps only, and the file says so.
    assert plan.depth_eps == {depth: [LAB_EPS] for depth in LAB_EPS_ONLY_DEPTHS}
    assert plan.trimmed is not None
    assert f"at eps {LAB_EPS:g} only" in plan.trimmed
    assert plan.eps == list(OFFERED_EPS)
    assert plan.inits == list(OFFERED_INITS)
    seeds = plan.seeds
    assert seeds == list(OFFERED_SEEDS[: len(seeds)])
    if len(seeds) < len(OFFERED_SEEDS):
        assert "not recorded" in plan.trimmed
    missing = shipped.missing()
    if missing:
        assert "recorded at seed 0 only" in plan.trimmed
        # Only the extra eps values are trimmed: every row at the default eps (or without
        # layer norm) is there at every seed, and the first seed is whole.
        assert all(p.eps not in (None, LAB_EPS) for p in missing)
        assert all(p.seed != OFFERED_SEEDS[0] for p in missing)
    else:
        assert plan.trimmed is None
    # "Both" learns the copy at the default depth and eps, at every seed and init.
    for init in OFFERED_INITS:
        for seed in seeds:
            both = shipped.row("both", depth=2, eps=LAB_EPS, init=init, seed=seed)
            assert both is not None and both.final.heldout_accuracy == 1.0
