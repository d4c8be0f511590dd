"""Layer norm step by step, exactly: the seed's numbers, equal entries, an independent
reference in 60-digit decimal arithmetic, and what the steps refuse."""

from __future__ import annotations

import random
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from normdive.numeric.display import (
    NOT_A_NUMBER,
    format_number,
    format_row,
    variance_too_small_to_show,
)
from normdive.numeric.layernorm import Exact, LayerNormSteps, Root, layer_norm_steps
from normdive.numeric.rows import MAX_ROW_CHARS, MAX_ROW_LENGTH, parse_row_exact
from normdive.numeric.targets import exact_steps

EPS_ON = Decimal("0.00001")  # the lesson's epsilon (content/d9.toml), exactly
EPS_OFF = 0
NAN = NOT_A_NUMBER
PROPERTY = settings(derandomize=True, database=None, deadline=None)

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
    eps: Exact,
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
    assert off.variance == 0
    assert off.denominator == Root(square=Fraction(0))
    assert off.normalised == (None,) * 4
    on = layer_norm_steps([4, 4, 4, 4], EPS_ON)
    assert on.denominator == Root(square=Fraction(1, 100_000))
    assert on.normalised == (Root(square=Fraction(0)),) * 4


# Rows of equal decimals whose mean is not their entry in binary floating point (0.1 and 1e-7
# are not binary fractions): float steps gave a variance near 1e-34 and outputs of +-1.
EQUAL_ROWS = [
    "0.1 0.1 0.1",
    " ".join(["0.1"] * 7),
    "1e-7 1e-7",
    "-2.5 -2.5 -2.5 -2.5",
    "1e100 1e100",
    "0.3, 0.3, 0.3, 0.3, 0.3",
    ", ".join(["-0.7"] * MAX_ROW_LENGTH),
    "３．３ ３．３ ３．３",  # full-width digits and points
]


@pytest.mark.parametrize("text", EQUAL_ROWS)
def test_a_row_of_equal_decimals_has_variance_zero_and_no_outputs_without_eps(text: str) -> None:
    row = parse_row_exact(text)
    assert isinstance(row, tuple)
    off = layer_norm_steps(row, EPS_OFF)
    assert off.variance == 0
    assert off.mean == row[0]
    assert format_number(off.variance) == format_number(off.denominator) == "0.000000"
    assert format_row(off.normalised) == "[" + ", ".join([NAN] * len(row)) + "]"
    assert not variance_too_small_to_show(off)
    # With the epsilon: every output exactly 0.
    on = layer_norm_steps(row, EPS_ON)
    assert format_row(on.normalised) == "[" + ", ".join(["0.000000"] * len(row)) + "]"
    assert format_number(on.denominator) == "0.003162"


# An entry a learner can type: 0, or 1e-100 to 1e100 in size (numeric/rows.py), with up to
# 20 significant digits.
_ENTRY = st.one_of(
    st.just(Decimal(0)),
    st.builds(
        lambda digits, exponent, negative: Decimal(f"{'-' if negative else ''}{digits}e{exponent}"),
        st.integers(1, 10**20 - 1).filter(lambda d: d % 10 != 0),
        st.integers(-100, 80),
        st.booleans(),
    ),
)


@PROPERTY
@given(entry=_ENTRY, length=st.integers(1, MAX_ROW_LENGTH), separator=st.sampled_from([" ", ", "]))
def test_any_row_of_equal_entries_is_not_a_number_at_eps_zero(
    entry: Decimal, length: int, separator: str
) -> None:
    text = separator.join([format(entry, "E")] * length)
    assume(len(text) <= MAX_ROW_CHARS)
    row = parse_row_exact(text)
    assert isinstance(row, tuple), text
    assert len(row) == length
    steps = layer_norm_steps(row, EPS_OFF)
    assert steps.variance == 0
    assert [format_number(x) for x in steps.normalised] == [NAN] * length


@PROPERTY
@given(entry=_ENTRY, length=st.integers(1, MAX_ROW_LENGTH))
def test_any_row_of_equal_entries_is_zero_at_the_lessons_eps(entry: Decimal, length: int) -> None:
    steps = layer_norm_steps([entry] * length, EPS_ON)
    assert [format_number(x) for x in steps.normalised] == ["0.000000"] * length


def test_a_variance_too_small_for_six_decimals_is_said_to_be_so() -> None:
    # [1e-7, 2e-7]: variance 2.5e-15, shown as 0.000000, yet the outputs are -1 and 1 exactly.
    steps = layer_norm_steps([Decimal("1e-7"), Decimal("2e-7")], EPS_OFF)
    assert steps.variance == Fraction(1, 4 * 10**14)
    assert format_number(steps.variance) == "0.000000"
    assert format_row(steps.normalised) == "[-1.000000, 1.000000]"
    assert variance_too_small_to_show(steps)
    assert not variance_too_small_to_show(layer_norm_steps([1, 2, 3], EPS_OFF))


def test_a_wide_range_of_sizes_is_worked_exactly() -> None:
    # Floats lost the small entries against the large ones; exact steps keep them.
    row = [Decimal("1e100"), Decimal("-1e100"), Decimal("1e-100"), Decimal("-1e-100")]
    steps = layer_norm_steps(row, EPS_OFF)
    assert steps.mean == 0
    assert format_number(steps.variance) == "5" + "0" * 199 + ".000000"
    assert format_row(steps.normalised) == "[1.414214, -1.414214, 0.000000, 0.000000]"
    # A deviation 1e-100 of an entry 1: floats round it away (1 + 1e-100 == 1).
    steps = layer_norm_steps([1, 1 + Fraction(1, 10**100)], EPS_OFF)
    assert format_row(steps.normalised) == "[-1.000000, 1.000000]"


# --- an independent reference: the textbook formula in 60-digit decimal arithmetic ---------

REFERENCE = Context(prec=60)
SIX = Decimal("0.000001")


def _six(value: Decimal) -> str:
    text = format(value.quantize(SIX, rounding=ROUND_HALF_EVEN, context=REFERENCE), "f")
    return "0.000000" if text == "-0.000000" else text


def _random_rows(count: int, seed: int) -> list[list[Decimal]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        scale = rng.randint(-8, 8)
        rows.append(
            [
                Decimal(rng.randint(-(10**9), 10**9)).scaleb(scale - 9)
                for _ in range(rng.randint(1, MAX_ROW_LENGTH))
            ]
        )
    return rows


@pytest.mark.parametrize("eps", [EPS_ON, EPS_OFF])
def test_matches_an_independent_reference_on_random_rows(eps: Exact) -> None:
    for row in _random_rows(500, seed=20240917):
        steps = layer_norm_steps(row, eps)
        # The mean and the variance are exact in both.
        reference = exact_steps(row, eps)
        assert (steps.mean, steps.variance) == (reference.mean, reference.variance)
        # The roots, to 60 digits and then to six decimals (no tie is near enough to matter).
        under_root = REFERENCE.add(
            REFERENCE.divide(
                Decimal(steps.variance.numerator), Decimal(steps.variance.denominator)
            ),
            Decimal(eps),
        )
        root = REFERENCE.sqrt(under_root)
        assert format_number(steps.denominator) == _six(root)
        mean = REFERENCE.divide(sum(row, Decimal(0)), Decimal(len(row)))
        expected = [NAN if root == 0 else _six(REFERENCE.divide(x - mean, root)) for x in row]
        assert [format_number(x) for x in steps.normalised] == expected


def test_one_element_normalises_to_zero_with_eps_and_nan_without() -> None:
    assert format_row(layer_norm_steps([Decimal("7.5")], EPS_ON).normalised) == "[0.000000]"
    assert layer_norm_steps([Decimal("7.5")], EPS_OFF).normalised == (None,)


def test_the_result_carries_its_inputs_exactly() -> None:
    steps = layer_norm_steps([1, Decimal("0.1"), Fraction(1, 3)], EPS_ON)
    assert steps == LayerNormSteps(
        row=(Fraction(1), Fraction(1, 10), Fraction(1, 3)),
        eps=Fraction(1, 100_000),
        mean=steps.mean,
        variance=steps.variance,
        denominator=steps.denominator,
        normalised=steps.normalised,
    )


@pytest.mark.parametrize(
    ("row", "eps", "error", "message"),
    [
        ([], EPS_ON, ValueError, "at least one number"),
        ([1], Decimal("-0.00001"), ValueError, "eps must be"),
        ([1], Decimal("NaN"), ValueError, "finite"),
        ([Decimal("Infinity")], EPS_ON, ValueError, "finite"),
        ([0.1], EPS_ON, TypeError, "not 0.1"),  # a float brings its binary rounding in
        ([1], 1e-5, TypeError, "exact numbers"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(
    row: list[Exact], eps: Exact, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        layer_norm_steps(row, eps)
