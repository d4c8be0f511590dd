"""Training one row: schedule, sampling points, curve, determinism."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pytest
import torch

from normdive.recording.format import RunConfig
from normdive.recording.runs import RunPoint, settings_at
from normdive.training.train import (
    Progress,
    grad_norm_steps,
    learning_rate,
    pin_cpu,
    thin,
    train_row,
)

TINY = RunConfig(
    depth=2,
    d_model=32,
    n_heads=2,
    steps=30,
    batch_size=16,
    eval_every=10,
    heldout_size=32,
    warmup_steps=5,
    grad_norm_points=4,
)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """The recording's CPU settings for each test, undone after it: flushing denormals is the
    process's floating-point mode, and the tests that run next in this process (the numeric
    core's, against JavaScript's doubles) must see subnormal numbers as they are."""
    threads = torch.get_num_threads()
    pin_cpu()
    yield
    torch.set_flush_denormal(False)
    torch.set_num_threads(threads)


def test_block_norms_are_sampled_densely_early_and_at_both_ends() -> None:
    points = grad_norm_steps(600, 10)
    assert points[0] == 1 and points[-1] == 600
    assert points == sorted(set(points)) and len(points) <= 10
    assert sum(p <= 40 for p in points) >= 4  # the collapse happens in the first few dozen
    assert grad_norm_steps(1, 10) == [1]
    assert grad_norm_steps(3, 10) == [1, 2, 3]


def test_learning_rate_warms_up_then_decays_to_the_floor() -> None:
    config = RunConfig(steps=100, warmup_steps=10, learning_rate=1e-3, min_lr_ratio=0.1)
    assert learning_rate(1, config) == pytest.approx(1e-4)
    assert learning_rate(10, config) == pytest.approx(1e-3)
    assert learning_rate(100, config) == pytest.approx(1e-4)
    rates = [learning_rate(s, config) for s in range(10, 101)]
    assert all(a >= b for a, b in itertools.pairwise(rates))
    no_warmup = config.model_copy(update={"warmup_steps": 0})
    assert learning_rate(1, no_warmup) == pytest.approx(1e-3, rel=1e-3)  # straight to the peak


def point(step: int) -> RunPoint:
    return RunPoint(
        step=step,
        train_loss=1.0,
        grad_norm=1.0,
        heldout_loss=1.0,
        heldout_accuracy=0.5,
        heldout_exact_match=0.0,
    )


def test_thin_keeps_the_ends_and_the_limit() -> None:
    points = [point(s) for s in range(1001)]
    kept = thin(points, 200)
    assert len(kept) == 200 and kept[0].step == 0 and kept[-1].step == 1000
    assert thin(points[:5], 200) == points[:5]


@pytest.mark.slow
def test_a_row_has_its_curve_norms_and_final_figures() -> None:
    seen: list[Progress] = []
    row = train_row(TINY, "both", 0, report=seen.append)
    assert [p.step for p in row.curve] == [0, 10, 20, 30]
    assert row.curve[0].train_loss is None
    assert row.curve[0].heldout_accuracy == pytest.approx(1 / 16, abs=0.05)  # chance
    norms = row.block_grad_norms or []
    assert [b.step for b in norms] == grad_norm_steps(30, 4)
    assert all(len(b.norms) == 2 for b in norms)
    last = row.curve[-1]
    assert (row.final.step, row.final.heldout_loss, row.final.heldout_accuracy) == (
        30,
        last.heldout_loss,
        last.heldout_accuracy,
    )
    assert isinstance(last.train_loss, float) and last.train_loss < row.curve[1].heldout_loss
    assert [p.step for p in seen] == [5, 10, 15, 20, 25, 30]
    assert all(p.steps == 30 and math.isfinite(p.train_loss) for p in seen)
    assert row.config == settings_at(TINY, layernorm=True, residual=True, seed=0)
    assert row.wall_s > 0


@pytest.mark.slow
def test_the_same_seed_and_config_give_the_same_row() -> None:
    one = train_row(TINY, "residual_only", 1)
    torch.manual_seed(999)  # whatever ran before does not matter
    two = train_row(TINY, "residual_only", 1)
    assert one.model_dump(exclude={"wall_s"}) == two.model_dump(exclude={"wall_s"})
    other = train_row(TINY, "residual_only", 2)
    assert other.curve != one.curve
