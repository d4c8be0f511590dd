"""Layer norm step by step: the seed's numbers, an independent reference, IEEE edge cases."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np
import pytest

from normdive.numeric.display import format_number
from normdive.numeric.layernorm import LayerNormSteps, ieee_divide, layer_norm_steps

EPS_ON = 1e-5
EPS_OFF = 0.0
NAN = "not a number"

# Every number the seed prints, plus the same rows with the switch off (worked by hand:
# [1, 2, 3] has variance 2/3, so the denominator is sqrt(2/3) = 0.8164966 and the outer entries
# are -+sqrt(3/2) = 1.2247449; [2, 2, 2, 6] has variance 3: sqrt(3) = 1.7320508 and
# -1/sqrt(3) = -0.5773503).
SEED_TABLE = [
    # row, eps, mean, variance, denominator, normalised
    ((1, 2, 3), EPS_ON, "2.000000", "0.666667", "0.816503", ["-1.224736", "0.000000", "1.224736"]),
    (
        (2, 2, 2, 6),
        EPS_ON,
        "3.000000",
        "3.000000",
        "1.732054",
        ["-0.577349", "-0.577349", "-0.577349", "1.732048"],
    ),
    ((4, 4, 4, 4), EPS_ON, "4.000000", "0.000000", "0.003162", ["0.000000"] * 4),
    ((1, 2, 3), EPS_OFF, "2.000000", "0.666667", "0.816497", ["-1.224745", "0.000000", "1.224745"]),
    (
        (2, 2, 2, 6),
        EPS_OFF,
        "3.000000",
        "3.000000",
        "1.732051",
        ["-0.577350", "-0.577350", "-0.577350", "1.732051"],
    ),
    ((4, 4, 4, 4), EPS_OFF, "4.000000", "0.000000", "0.000000", [NAN] * 4),
]


@pytest.mark.parametrize(
    ("row", "eps", "mean", "variance", "denominator", "normalised"), SEED_TABLE
)
def test_every_number_of_the_seed_to_six_decimals(
    row: tuple[int, ...],
    eps: float,
    mean: str,
    variance: str,
    denominator: str,
    normalised: list[str],
) -> None:
    steps = layer_norm_steps(row, eps)
    assert format_number(steps.mean) == mean
    assert format_number(steps.variance) == variance
    assert format_number(steps.denominator) == denominator
    assert [format_number(x) for x in steps.normalised] == normalised


def test_the_zero_variance_row_is_nan_without_eps_and_exact_zeros_with_it() -> None:
    off = layer_norm_steps([4, 4, 4, 4], EPS_OFF)
    assert off.variance == 0.0
    assert off.denominator == 0.0
    assert all(math.isnan(x) for x in off.normalised)
    on = layer_norm_steps([4, 4, 4, 4], EPS_ON)
    assert on.normalised == (0.0, 0.0, 0.0, 0.0)


def test_the_result_carries_its_inputs_as_floats() -> None:
    steps = layer_norm_steps([1, 2, 3], EPS_ON)
    assert steps == LayerNormSteps(
        row=(1.0, 2.0, 3.0),
        eps=EPS_ON,
        mean=steps.mean,
        variance=steps.variance,
        denominator=steps.denominator,
        normalised=steps.normalised,
    )
    assert all(type(x) is float for x in steps.row)


Reference = Callable[[list[float], float], tuple[float, float, float, list[float]]]


def _fsum_reference(row: list[float], eps: float) -> tuple[float, float, float, list[float]]:
    """Correctly rounded sums (math.fsum), otherwise the textbook formula."""
    n = len(row)
    mean = math.fsum(row) / n
    variance = math.fsum((x - mean) ** 2 for x in row) / n
    denominator = math.sqrt(variance + eps)
    normalised = [(x - mean) / denominator if denominator else math.nan for x in row]
    return mean, variance, denominator, normalised


def _numpy_reference(row: list[float], eps: float) -> tuple[float, float, float, list[float]]:
    """numpy's own mean and population variance (pairwise summation, a different order)."""
    values = np.asarray(row, dtype=np.float64)  # (n,)
    mean = float(np.mean(values))
    variance = float(np.var(values))  # ddof=0: population
    denominator = float(np.sqrt(variance + eps))
    with np.errstate(invalid="ignore", divide="ignore"):
        normalised = ((values - mean) / denominator).tolist()  # (n,)
    return mean, variance, denominator, normalised


def _random_rows(count: int, seed: int) -> list[list[float]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        scale = 10.0 ** rng.randint(-3, 3)
        rows.append([rng.uniform(-10, 10) * scale for _ in range(rng.randint(1, 16))])
    return rows


# Tolerance against the references, and why: the only differences are summation order and
# rounding. Left-to-right summation of n <= 16 terms is off by at most (n-1)*u*sum|x| with
# u = 2**-53 ~ 1.1e-16, i.e. about 2e-15 of the row's scale, and numpy's pairwise order and
# fsum's exact sum differ from ours by the same order. 1e-12 of the scale (scale = the largest
# |x| for the mean, its square for the variance) leaves a margin of about 500x. The denominator
# and the normalised row are divided by sqrt(variance), which can amplify relative error when
# the variance is small against the scale, so they are compared relative to that ratio.
REFERENCE_TOLERANCE = 1e-12


@pytest.mark.parametrize("eps", [EPS_ON, EPS_OFF])
@pytest.mark.parametrize("reference", [_fsum_reference, _numpy_reference])
def test_matches_an_independent_reference_on_random_rows(eps: float, reference: Reference) -> None:
    worst = 0.0
    for row in _random_rows(2000, seed=20240917):
        steps = layer_norm_steps(row, eps)
        mean, variance, denominator, normalised = reference(row, eps)
        scale = max(abs(x) for x in row)
        # sqrt amplification: how small the variance is relative to the row's scale.
        conditioning = max(scale / denominator, 1.0) if denominator else math.inf
        errors = [
            abs(steps.mean - mean) / scale,
            abs(steps.variance - variance) / scale**2,
            abs(steps.denominator - denominator) / max(denominator, 1e-300) / conditioning**2,
        ]
        for ours, theirs in zip(steps.normalised, normalised, strict=True):
            if math.isnan(theirs):
                assert math.isnan(ours)
            else:
                errors.append(abs(ours - theirs) / conditioning**2)
        worst = max(worst, *errors)
    assert worst <= REFERENCE_TOLERANCE
    print(f"largest scaled difference from {reference.__name__} at eps={eps}: {worst:.3e}")


def test_one_element_normalises_to_zero_with_eps_and_nan_without() -> None:
    assert layer_norm_steps([7.5], EPS_ON).normalised == (0.0,)
    assert math.isnan(layer_norm_steps([7.5], EPS_OFF).normalised[0])


def test_sums_run_left_to_right_without_compensation() -> None:
    # 1 + 1e-16 rounds back to 1 in float64, twice; fsum would keep the 2e-16.
    steps = layer_norm_steps([1.0, 1e-16, 1e-16], EPS_OFF)
    assert steps.mean == 1.0 / 3
    assert math.fsum([1.0, 1e-16, 1e-16]) / 3 != steps.mean


def test_overflowing_squares_give_infinity_not_an_exception() -> None:
    steps = layer_norm_steps([1e200, -1e200], EPS_OFF)
    assert steps.variance == math.inf
    assert steps.normalised == (0.0, -0.0)


def test_a_variance_that_underflows_to_zero_divides_like_ieee() -> None:
    # The deviations (+-5e-201) are nonzero but their squares underflow to 0.
    steps = layer_norm_steps([1e-200, 0.0], EPS_OFF)
    assert steps.denominator == 0.0
    assert steps.normalised == (math.inf, -math.inf)


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [
        (1.0, 2.0, 0.5),
        (0.0, 0.0, math.nan),
        (-0.0, 0.0, math.nan),
        (math.nan, 0.0, math.nan),
        (3.0, 0.0, math.inf),
        (-3.0, 0.0, -math.inf),
        (3.0, -0.0, -math.inf),
        (-3.0, -0.0, math.inf),
        (math.inf, 0.0, math.inf),
    ],
)
def test_ieee_divide(numerator: float, denominator: float, expected: float) -> None:
    result = ieee_divide(numerator, denominator)
    if math.isnan(expected):
        assert math.isnan(result)
    else:
        assert result == expected


@pytest.mark.parametrize(
    ("row", "eps", "message"),
    [
        ([], EPS_ON, "at least one number"),
        ([1.0], -1e-5, "eps must be"),
        ([1.0], math.nan, "eps must be"),
        ([1.0], math.inf, "eps must be"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(
    row: list[float], eps: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        layer_norm_steps(row, eps)
