"""The lab in PyTorch (normdive.training.lab) against a direct reading of docs/lab.md on a tiny
config: the parameters' names, shapes, order and draws; the batches; one cell trained twice;
and `record-runs --lab` end to end through the command."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from normdive.lab.config import LabBase, LabConfig
from normdive.lab.random import BATCHES, HELDOUT, WEIGHTS, Lab32
from normdive.recording.lab_grid import lab_path_for, read_lab_grid
from normdive.recording.runs import LabPlan
from normdive.training.lab import (
    build_lab_model,
    heldout,
    initial_parameters,
    lab_batch,
    losses,
    train_lab_cell,
)

# Width 8, 2 heads, 2 blocks, copy length 3 (6 positions), 5 symbols (6 tokens).
TINY = {
    "d_model": 8,
    "n_heads": 2,
    "mlp_ratio": 2,
    "depth": 2,
    "copy_length": 3,
    "vocab_size": 5,
    "batch_size": 4,
    "steps": 6,
    "warmup_steps": 2,
    "eval_every": 4,
    "heldout_size": 8,
}


def tiny(**changes: object) -> LabConfig:
    return LabConfig.model_validate({**TINY, **changes})


def spec_shapes(c: LabConfig) -> list[tuple[str, tuple[int, ...]]]:
    """docs/lab.md, "Parameters, in order", read as written."""
    d, r, v1, t = c.d_model, c.mlp_ratio * c.d_model, c.vocab_size + 1, 2 * c.copy_length
    shapes: list[tuple[str, tuple[int, ...]]] = [
        ("token_embedding", (v1, d)),
        ("position_embedding", (t, d)),
    ]
    for i in range(c.depth):
        p = f"blocks.{i}"
        norm = [(f"{p}.norm_attn.weight", (d,)), (f"{p}.norm_attn.bias", (d,))]
        norm2 = [(f"{p}.norm_mlp.weight", (d,)), (f"{p}.norm_mlp.bias", (d,))]
        shapes += norm if c.layernorm else []
        shapes += [
            (f"{p}.attn.qkv.weight", (3 * d, d)),
            (f"{p}.attn.qkv.bias", (3 * d,)),
            (f"{p}.attn.out.weight", (d, d)),
            (f"{p}.attn.out.bias", (d,)),
        ]
        shapes += norm2 if c.layernorm else []
        shapes += [
            (f"{p}.mlp.up.weight", (r, d)),
            (f"{p}.mlp.up.bias", (r,)),
            (f"{p}.mlp.down.weight", (d, r)),
            (f"{p}.mlp.down.bias", (d,)),
        ]
    if c.layernorm:
        shapes += [("final_norm.weight", (d,)), ("final_norm.bias", (d,))]
    return [*shapes, ("head.weight", (v1, d)), ("head.bias", (v1,))]


def spec_values(c: LabConfig, seed: int) -> dict[str, list[float]]:
    """docs/lab.md, "Initialisation, from stream WEIGHTS", read as written."""
    source = Lab32(seed, WEIGHTS)
    values: dict[str, list[float]] = {}
    fan_in = 0
    for name, shape in spec_shapes(c):
        n = math.prod(shape)
        if "norm" in name:
            values[name] = [1.0 if name.endswith("weight") else 0.0] * n
        elif c.init == "gpt2":
            if name.endswith("bias"):
                values[name] = [0.0] * n
            else:
                scaled = name.endswith(("attn.out.weight", "mlp.down.weight"))
                std = 0.02 / math.sqrt(2 * c.depth) if scaled else 0.02
                values[name] = [source.normal() * std for _ in range(n)]
        elif name.endswith("embedding"):
            values[name] = [source.normal() for _ in range(n)]
        else:
            if name.endswith("weight"):
                fan_in = shape[1]
            values[name] = [(2 * source.uniform() - 1) / math.sqrt(fan_in) for _ in range(n)]
    return values


@pytest.mark.parametrize("init", ["gpt2", "pytorch"])
@pytest.mark.parametrize(("layernorm", "residual"), [(True, True), (False, False)])
def test_initial_parameters_are_the_spec_read_directly(
    init: str, layernorm: bool, residual: bool
) -> None:
    config = tiny(
        init=init, layernorm=layernorm, residual=residual, eps=1e-5 if layernorm else None
    )
    got = initial_parameters(config, seed=3)
    expected = spec_values(config, seed=3)
    assert list(got) == list(expected)  # the names, in the documented order
    for name, shape in spec_shapes(config):
        assert len(got[name]) == math.prod(shape), name
        assert got[name] == pytest.approx(expected[name], abs=1e-15, rel=0), name


def test_gpt2_scales_the_residual_projections_and_zeroes_the_biases() -> None:
    config = tiny(depth=2)
    got = initial_parameters(config, seed=0)
    assert set(got["blocks.1.attn.qkv.bias"]) == {0.0}
    assert set(got["blocks.0.norm_mlp.weight"]) == {1.0}

    def rms(values: list[float]) -> float:
        return math.sqrt(sum(v * v for v in values) / len(values))

    # 192 draws of N(0, 0.02) and 128 of N(0, 0.02 / sqrt(2 x 2)): each RMS within 15 %.
    assert rms(got["blocks.0.attn.qkv.weight"]) == pytest.approx(0.02, rel=0.15)
    assert rms(got["blocks.0.mlp.down.weight"]) == pytest.approx(0.01, rel=0.15)
    assert rms(got["blocks.1.attn.out.weight"]) == pytest.approx(0.01, rel=0.3)  # 64 draws


def test_every_row_of_a_seed_starts_from_the_same_weights() -> None:
    both = initial_parameters(tiny(), seed=5)
    neither = initial_parameters(tiny(layernorm=False, residual=False, eps=None), seed=5)
    assert {k: v for k, v in both.items() if "norm" not in k} == neither


def test_layernorm_takes_the_configs_eps_and_exists_only_when_on() -> None:
    norms = [m for m in build_lab_model(tiny(eps=0.0)).modules() if isinstance(m, nn.LayerNorm)]
    assert len(norms) == 2 * 2 + 1 and {m.eps for m in norms} == {0.0}
    off = build_lab_model(tiny(layernorm=False, eps=None))
    assert not any(isinstance(m, nn.LayerNorm) for m in off.modules())
    assert all(p.dtype == torch.float64 for p in off.parameters())


def test_batches_are_the_spec_read_directly() -> None:
    config = tiny()
    batch = lab_batch(config, 2, Lab32(9, BATCHES))
    source = Lab32(9, BATCHES)
    for b in range(2):
        symbols = [source.below(5) for _ in range(3)]
        assert batch.targets[b].tolist() == symbols
        assert batch.inputs[b].tolist() == [*symbols, 5, *symbols[:-1]]
    held = heldout(config)
    source = Lab32(config.heldout_seed, HELDOUT)
    assert held.targets[0].tolist() == [source.below(5) for _ in range(3)]
    assert held.targets.shape == (8, 3)


def test_a_cell_trains_to_the_same_numbers_twice() -> None:
    config = tiny()
    first = train_lab_cell(config, seed=1)
    second = train_lab_cell(config, seed=1)
    assert first.model_dump(exclude={"wall_s"}) == second.model_dump(exclude={"wall_s"})
    assert [p.step for p in first.curve] == [0, 4, 6]
    assert first.final.step == 6
    assert first.curve[0].train_loss is None
    # The first update's loss is the untrained model's on its first batch: near ln(6), the
    # head's 6 outputs being near uniform at GPT-2's small init.
    first_losses = losses(config, seed=1, steps=3)
    assert first_losses == losses(config, seed=1, steps=3)
    assert abs(first_losses[0] - math.log(6)) < 0.05
    assert first.curve[1].train_loss == pytest.approx(
        sum(losses(config, seed=1, steps=4)) / 4, rel=1e-12
    )


def test_eps_zero_on_a_constant_row_is_not_a_number_and_is_kept() -> None:
    # With layer norm on and eps 0, a row whose entries are all equal divides 0 by 0. The
    # untrained model's embeddings are random, so force one: zero every embedding.
    config = tiny(eps=0.0)
    model = build_lab_model(config)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    logits = model(torch.zeros((1, 6), dtype=torch.int64))
    assert torch.isnan(logits).all()


NORMDIVE = str(Path(sys.executable).parent / "normdive")
TINY_LAB = [
    "record-runs",
    "--lab",
    "--lab-depths",
    "1,2",
    "--lab-eps",
    "0,1e-5",
    "--lab-eps-seeds",
    "0",
    "--seeds",
    "0,1",
    "--rows",
    "both,layernorm_only",
    "--steps",
    "4",
    "--eval-every",
    "2",
    "--jobs",
    "2",
]


@pytest.mark.slow
def test_record_runs_lab_writes_the_grid_beside_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "the-transformer-block.json"
    done = subprocess.run(
        [NORMDIVE, *TINY_LAB, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not out.exists()
    grid = read_lab_grid(lab_path_for(out))
    plan = grid.plan_as(LabPlan)
    # The lab's own settings, less the two given: not the ablation's defaults for the others.
    base = LabBase(steps=4, eval_every=2)
    assert plan.base == LabConfig.at(base).run_config()
    assert plan.depths == [1, 2] and plan.eps == [0.0, 1e-5]
    # Per depth and init: seed 0 has both and layernorm_only at eps 0 and 1e-5 (4 cells),
    # seed 1 at 1e-5 only (2 cells).
    assert len(grid.runs) == 2 * 2 * (4 + 2)
    assert plan.trimmed is not None and "eps 0 recorded at seed 0 only" in plan.trimmed
    assert "residual_only" in plan.trimmed
    at = {"depth": 2, "eps": 0.0, "init": "pytorch"}
    cell = grid.row("layernorm_only", **at, seed=0)
    assert cell is not None and cell.final.step == 4
    assert grid.row("layernorm_only", **at, seed=1) is None
    assert any(p == cell.config.model_copy(update={"seed": 1}) for p in grid.missing())
    # The same command trains the same numbers (cells from fresh worker processes).
    assert cell == train_lab_cell(
        LabConfig.at(base, depth=2, layernorm=True, residual=False, eps=0.0, init="pytorch"),
        seed=0,
    ).model_copy(update={"wall_s": cell.wall_s})
    assert "Wrote" in done.stdout and "depth 2:" in done.stdout
    assert not (tmp_path / "the-transformer-block-lab.json.partial").exists()


def test_record_runs_lab_records_depth_8_at_the_default_eps_only(tmp_path: Path) -> None:
    out = tmp_path / "the-transformer-block.json"
    asked = [*TINY_LAB, "--out", str(out)]
    asked[asked.index("1,2")] = "1,8"
    done = subprocess.run(
        [NORMDIVE, *asked], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    grid = read_lab_grid(lab_path_for(out))
    plan = grid.plan_as(LabPlan)
    assert plan.depths == [1, 8] and plan.depth_eps == {8: [1e-5]}
    assert plan.trimmed is not None and "depth 8 recorded at eps 1e-05 only" in plan.trimmed
    # Depth 8: both and layernorm_only at eps 1e-5, seeds 0 and 1, each init; none of their
    # points missing, since eps 0 is not offered at depth 8.
    deep = grid.select(depth=8)
    assert len(deep) == 2 * 2 * 2 and all(c.config.eps == 1e-5 for c in deep)
    assert not [p for p in grid.missing() if p.depth == 8 and p.layernorm and p.seed in (0, 1)]


def test_record_runs_lab_refuses_the_sweeps_options(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from normdive.cli import app

    for extra in (["--sweep"], ["--depth", "3"], ["--device", "cuda"]):
        result = CliRunner().invoke(app, ["record-runs", "--lab", *extra])
        assert result.exit_code == 2, extra
        assert "--lab" in result.output
    result = CliRunner().invoke(app, ["record-runs", "--lab-eps", "0"])
    assert result.exit_code == 2
    result = CliRunner().invoke(app, ["record-runs", "--lab", "--lab-eps", "x"])
    assert result.exit_code == 2 and "not a comma-separated list" in result.output
    result = CliRunner().invoke(app, ["record-runs", "--lab", "--d-model", "10", "--heads", "4"])
    assert result.exit_code == 2 and "not divisible" in result.output
    assert not list(tmp_path.iterdir())


def test_training_gives_the_thread_back_as_it_found_it() -> None:
    # The flush of denormals is the calling thread's processor state: left on, it broke every
    # later test in the same process that draws floats with Hypothesis.
    threads = torch.get_num_threads()
    losses(tiny(), seed=0, steps=2)
    train_lab_cell(tiny(steps=2, eval_every=1), seed=0)
    smallest_normal = sys.float_info.min
    assert smallest_normal / 2 > 0  # a subnormal survives: no flush to zero
    assert torch.get_num_threads() == threads


@pytest.mark.slow
def test_shards_of_the_lab_grid_merge_into_the_grid(tmp_path: Path) -> None:
    out = tmp_path / "the-transformer-block.json"
    for index in (1, 2):
        done = subprocess.run(
            [NORMDIVE, *TINY_LAB, "--shard", f"{index}/2", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    parts = [tmp_path / f"the-transformer-block-lab.shard-{i}-of-2.json" for i in (1, 2)]
    halves = [{run.config for run in read_lab_grid(part).runs} for part in parts]
    assert halves[0] and halves[1] and not halves[0] & halves[1]
    merged = subprocess.run(
        [NORMDIVE, "merge-recordings", *map(str, parts), "--out", str(lab_path_for(out))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    grid = read_lab_grid(lab_path_for(out))
    # The whole grid's 24 cells (test above), each trained once, and what it trimmed.
    assert len(grid.runs) == 24 and grid.plan.trimmed is not None
    cell = grid.row("layernorm_only", depth=2, eps=0.0, init="pytorch", seed=0)
    assert cell is not None
    base = LabBase(steps=4, eval_every=2)
    assert cell == train_lab_cell(
        LabConfig.at(base, depth=2, layernorm=True, residual=False, eps=0.0, init="pytorch"),
        seed=0,
    ).model_copy(update={"wall_s": cell.wall_s})
