"""The throughput benchmark compares like with like: the reference is the same size, causal,
and its FLOP count follows the stated formula."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from normdive.recording.format import RunConfig
from normdive.training.model import build_model

BENCH = Path(__file__).resolve().parents[1] / "bench" / "throughput.py"
TINY = RunConfig(depth=2, d_model=16, n_heads=2, copy_length=4, vocab_size=5, batch_size=3)


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_throughput", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_matches_our_model_in_size_and_output_shape() -> None:
    bench = load_bench()
    torch.manual_seed(0)
    ours = build_model(TINY, layernorm=True, residual=True)
    reference = bench.Reference(TINY)
    assert bench.matmul_parameters(ours) == bench.matmul_parameters(reference)
    assert sum(p.numel() for p in ours.parameters()) == sum(
        p.numel() for p in reference.parameters()
    )
    tokens = torch.randint(TINY.vocab_size + 1, (2, TINY.sequence_length))
    assert reference(tokens).shape == ours(tokens).shape


def test_the_reference_is_causal() -> None:
    bench = load_bench()
    torch.manual_seed(0)
    reference = bench.Reference(TINY)
    tokens = torch.randint(TINY.vocab_size + 1, (1, TINY.sequence_length))
    changed = tokens.clone()
    changed[0, 4] = (changed[0, 4] + 1) % (TINY.vocab_size + 1)
    before, after = reference(tokens), reference(changed)
    assert torch.allclose(before[:, :4], after[:, :4], atol=1e-6)
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_flops_follow_the_formula() -> None:
    bench = load_bench()
    ours = build_model(TINY, layernorm=True, residual=True)
    d, t = TINY.d_model, TINY.sequence_length
    matmul = TINY.depth * 12 * d * d + d * (TINY.vocab_size + 1)
    assert bench.matmul_parameters(ours) == matmul
    expected = TINY.batch_size * t * (6 * matmul + 12 * TINY.depth * t * d)
    assert bench.flops_per_step(TINY, ours) == expected


@pytest.mark.slow
def test_one_step_of_each_runs() -> None:
    bench = load_bench()
    batch_source = torch.Generator().manual_seed(0)
    from normdive.training.task import copy_batch

    batch = copy_batch(TINY.batch_size, TINY.copy_length, TINY.vocab_size, batch_source)
    for model in (build_model(TINY, layernorm=True, residual=True), bench.Reference(TINY)):
        before = [p.detach().clone() for p in model.parameters()]
        bench.make_step(model, TINY)(batch)
        assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
