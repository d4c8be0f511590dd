"""lab32 (normdive.lab.random) against its test vectors, its ranges, and its spread."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from normdive.lab.random import BATCHES, HELDOUT, WEIGHTS, Lab32, mix32

VECTORS = Path(__file__).resolve().parent / "lab_vectors.json"


def cases() -> list[dict[str, object]]:
    loaded: list[dict[str, object]] = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    return loaded


def test_the_vectors_cover_every_stream_of_three_seeds() -> None:
    covered = {(case["seed"], case["stream"]) for case in cases()}
    assert covered == {(s, k) for s in (0, 1, 20240905) for k in (WEIGHTS, BATCHES, HELDOUT)}


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"seed{c['seed']}-stream{c['stream']}")
def test_the_first_draws_are_the_vectors(case: dict[str, object]) -> None:
    seed, stream = int(str(case["seed"])), int(str(case["stream"]))
    source = Lab32(seed, stream)
    assert [source.next_u32() for _ in range(8)] == case["next_u32"]
    source = Lab32(seed, stream)
    assert [source.uniform() for _ in range(4)] == case["uniform"]  # exact: same doubles
    source = Lab32(seed, stream)
    assert [source.normal() for _ in range(4)] == pytest.approx(case["normal"], abs=1e-15)
    source = Lab32(seed, stream)
    assert [source.below(16) for _ in range(8)] == case["below_16"]


def test_the_generator_agrees_with_a_c_reading_of_the_spec() -> None:
    # Printed by a 10-line C program written from docs/lab.md alone (uint32_t arithmetic,
    # double for the uniform), not from this code: the Python masks must wrap as C does.
    source = Lab32(20240905, HELDOUT)
    assert [source.next_u32() for _ in range(3)] == [2904594495, 4042738988, 4052985942]
    assert Lab32(0, WEIGHTS).uniform() == 0.6921572372853666
    assert mix32(0) == 0  # the finaliser fixes zero; the Weyl step moves the state off it


def test_streams_and_seeds_differ() -> None:
    firsts = {
        (seed, stream): Lab32(seed, stream).next_u32()
        for seed in range(4)
        for stream in (WEIGHTS, BATCHES, HELDOUT)
    }
    assert len(set(firsts.values())) == len(firsts)


def test_ranges() -> None:
    source = Lab32(7, WEIGHTS)
    for _ in range(5_000):
        assert 0 <= source.next_u32() < 2**32
        assert 0.0 < source.uniform() <= 1.0
        assert math.isfinite(source.normal())
        assert 0 <= source.below(5) < 5
    assert {source.below(1) for _ in range(50)} == {0}


@pytest.mark.parametrize(("seed", "stream"), [(-1, WEIGHTS), (2**32, WEIGHTS), (0, -1)])
def test_a_seed_or_stream_out_of_range_is_refused(seed: int, stream: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        Lab32(seed, stream)


@pytest.mark.parametrize("n", [0, 2**16 + 1])
def test_below_refuses_n_out_of_range(n: int) -> None:
    with pytest.raises(ValueError, match="below"):
        Lab32(0, BATCHES).below(n)


def test_below_is_close_to_uniform() -> None:
    # Pearson's chi-square over 16 bins, 16,000 draws at a fixed seed: 15 degrees of freedom,
    # whose 99.9th percentile is 37.7. A generator that favoured one symbol by 10 % would
    # score about 100 here.
    source = Lab32(20240905, BATCHES)
    counts = [0] * 16
    for _ in range(16_000):
        counts[source.below(16)] += 1
    chi2 = sum((c - 1000) ** 2 / 1000 for c in counts)
    assert chi2 < 37.7


def test_normal_has_unit_moments() -> None:
    source = Lab32(1, WEIGHTS)
    draws = [source.normal() for _ in range(20_000)]
    mean = sum(draws) / len(draws)
    variance = sum((d - mean) ** 2 for d in draws) / len(draws)
    # Standard errors: 0.007 for the mean, 0.01 for the variance; 5 of them each.
    assert abs(mean) < 0.035
    assert abs(variance - 1) < 0.05


def test_below_stays_under_n_when_uniform_rounds_to_one() -> None:
    # (2^53 - 1 + 0.5) / 2^53 rounds to 1.0: a draw once in 2^53 must still not be n (for the
    # copy task, n is the separator). The JS twin caps the same way (random.js).
    class AtTheTop(Lab32):
        def uniform(self) -> float:
            return 1.0

    assert AtTheTop(0, BATCHES).below(16) == 15
    assert (2**53 - 1 + 0.5) / 2**53 == 1.0
