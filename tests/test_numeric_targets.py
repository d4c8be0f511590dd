"""Exact targets for the six numbers, the classic slips, and the grade a typed answer gets."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from normdive.numeric.answers import ParsedAnswer, parse_answer
from normdive.numeric.targets import (
    SLIPS,
    SLIPS_BY_STEP,
    STEPS,
    ExactSteps,
    Grade,
    Step,
    exact_steps,
    exact_value,
    grade,
    slip_values,
)

EPS = Fraction(1, 100_000)  # the switch's on value, 1e-5
TOLERANCE = Fraction(1, 1000)
ROW_A = (1, 2, 3)
ROW_B = (2, 2, 2, 6)


def _value(typed: str) -> Fraction:
    parsed = parse_answer(typed)
    assert isinstance(parsed, ParsedAnswer), parsed
    return parsed.value


def _grade(typed: str, row: tuple[int, ...], step: Step) -> Grade:
    return grade(_value(typed), row, EPS, step, TOLERANCE)


def test_exact_steps_of_the_two_hand_rows() -> None:
    a = exact_steps(ROW_A, EPS)
    assert a.mean == 2
    assert a.variance == Fraction(2, 3)
    # sqrt(2/3 + 1e-5) = 0.816502704629119...; squared back to within 1e-48 (50 digits).
    assert abs(a.denominator**2 - (Fraction(2, 3) + EPS)) < Fraction(1, 10**48)
    assert float(a.denominator) == 0.8165027046291192
    b = exact_steps(ROW_B, EPS)
    assert (b.mean, b.variance) == (Fraction(3), Fraction(3))
    assert abs(b.denominator - Fraction("1.7320536943178174")) < Fraction(1, 10**15)
    assert abs(b.denominator**2 - Fraction("3.00001")) < Fraction(1, 10**48)


def test_exact_steps_accept_fractions_and_decimals_and_eps_zero() -> None:
    steps = exact_steps([Fraction(1, 2), Decimal("1.5")], 0)
    assert steps == ExactSteps(
        mean=Fraction(1), variance=Fraction(1, 4), denominator=Fraction(1, 2)
    )
    assert exact_steps([4, 4, 4, 4], 0).denominator == 0


@pytest.mark.parametrize(
    ("row", "eps", "message"),
    [((), EPS, "at least one number"), ((1, 2), Fraction(-1), "eps must be >= 0")],
)
def test_bad_rows_and_eps_are_refused(row: tuple[int, ...], eps: Fraction, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        exact_steps(row, eps)


def test_slips_are_grouped_by_step_in_slips_order() -> None:
    assert sum(len(names) for names in SLIPS_BY_STEP.values()) == len(SLIPS)
    assert set(SLIPS_BY_STEP) == set(STEPS)
    for step, names in SLIPS_BY_STEP.items():
        assert list(names) == [s for s in SLIPS if s in names]
        assert list(slip_values(ROW_B, EPS, step)) == list(names)
    for required in ("mean_not_divided", "variance_n_minus_1", "denominator_no_sqrt"):
        assert required in SLIPS  # the three slips the spec names


# What a learner making each slip would type, worked by hand, and the text they would type.
SLIP_TABLE = [
    # row, step, slip, exact slip value, a typed answer within tolerance of it
    (ROW_A, "mean", "mean_not_divided", Fraction(6), "6"),
    (ROW_A, "mean", "mean_divided_by_n_minus_1", Fraction(3), "3.0"),
    (ROW_A, "variance", "variance_n_minus_1", Fraction(1), "1"),
    (ROW_A, "variance", "variance_not_divided", Fraction(2), "2"),
    (ROW_A, "variance", "variance_is_std", None, "0.8165"),
    (ROW_A, "denominator", "denominator_no_sqrt", Fraction("0.66667666666666666666666"), "0.6667"),
    (ROW_A, "denominator", "denominator_n_minus_1", None, "1.000005"),
    (ROW_A, "denominator", "denominator_not_divided", None, "1.41422"),
    (ROW_B, "mean", "mean_not_divided", Fraction(12), "12"),
    (ROW_B, "mean", "mean_divided_by_n_minus_1", Fraction(4), "4"),
    (ROW_B, "variance", "variance_n_minus_1", Fraction(4), "4"),
    (ROW_B, "variance", "variance_not_divided", Fraction(12), "12"),
    (ROW_B, "variance", "variance_is_std", None, "1.732"),
    (ROW_B, "denominator", "denominator_no_sqrt", Fraction("3.00001"), "3"),
    (ROW_B, "denominator", "denominator_n_minus_1", None, "2"),
    (ROW_B, "denominator", "denominator_not_divided", None, "3.4641"),
    (ROW_A, "mean", "mean_sign_flipped", Fraction(-2), "−2"),  # U+2212
    (ROW_B, "mean", "mean_sign_flipped", Fraction(-3), "-3"),
    (ROW_B, "variance", "variance_negative", Fraction(-3), "-3.0004"),
    (ROW_A, "denominator", "denominator_negative", None, "-0.8165"),
]


@pytest.mark.parametrize(("row", "step", "slip", "value", "typed"), SLIP_TABLE)
def test_each_slip_of_each_hand_row_is_recognised(
    row: tuple[int, ...], step: Step, slip: str, value: Fraction | None, typed: str
) -> None:
    values = slip_values(row, EPS, step)
    if value is not None and slip != "denominator_no_sqrt":
        assert values[slip] == value
    elif value is not None:
        assert abs(values[slip] - value) < Fraction(1, 10**20)
    assert _grade(typed, row, step) == Grade(right=False, slip=slip)


@pytest.mark.parametrize(
    ("row", "step", "typed"),
    [
        (ROW_A, "mean", "2"),
        (ROW_A, "variance", "2/3"),
        (ROW_A, "variance", "0.667"),
        (ROW_A, "variance", "0.6667"),
        (ROW_A, "denominator", "0.8165"),
        (ROW_A, "denominator", "0.816503"),
        (ROW_A, "denominator", "0.816497"),  # eps left out moves only the 6th decimal
        (ROW_A, "mean", "+2"),
        (ROW_A, "mean", " 2 "),
        (ROW_A, "mean", "2e0"),
        (ROW_B, "mean", "3"),
        (ROW_B, "variance", "3.000"),
        (ROW_B, "denominator", "1.732054"),
        (ROW_B, "denominator", "1.732"),
    ],
)
def test_right_answers(row: tuple[int, ...], step: Step, typed: str) -> None:
    assert _grade(typed, row, step) == Grade(right=True, slip=None)


@pytest.mark.parametrize(
    ("row", "step", "typed", "expected"),
    [
        (ROW_A, "mean", "2.5", Grade(right=False, slip=None)),
        (ROW_A, "mean", "−1.5", Grade(right=False, slip=None)),  # U+2212
        (ROW_A, "variance", "1E-3", Grade(right=False, slip=None)),
        (ROW_B, "mean", "-12", Grade(right=False, slip=None)),  # two slips in one: no name
        (ROW_B, "variance", "9", Grade(right=False, slip=None)),
    ],
)
def test_wrong_answers_without_a_slip(
    row: tuple[int, ...], step: Step, typed: str, expected: Grade
) -> None:
    assert _grade(typed, row, step) == expected


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("2.001", Grade(right=True, slip=None)),  # exactly 0.001 away lands
        ("1.999", Grade(right=True, slip=None)),
        ("2.0010001", Grade(right=False, slip=None)),  # 0.0010001 away does not
        ("1.9989999", Grade(right=False, slip=None)),
        ("6.001", Grade(right=False, slip="mean_not_divided")),  # slips are inclusive too
        ("6.0010001", Grade(right=False, slip=None)),
    ],
)
def test_the_tolerance_boundary_is_inclusive_and_exact(typed: str, expected: Grade) -> None:
    assert _grade(typed, ROW_A, "mean") == expected


def test_the_boundary_holds_for_an_irrational_target() -> None:
    exact = exact_value(ROW_A, EPS, "denominator")
    assert grade(exact + TOLERANCE, ROW_A, EPS, "denominator", TOLERANCE).right
    assert grade(exact - TOLERANCE, ROW_A, EPS, "denominator", TOLERANCE).right
    over = exact + TOLERANCE + Fraction(1, 10**40)
    assert not grade(over, ROW_A, EPS, "denominator", TOLERANCE).right


def test_coinciding_slips_resolve_to_the_first_in_slips_order() -> None:
    # With n = 2, dividing by n - 1 is not dividing at all: two slips, one value.
    row = (1, 3)
    means = slip_values(row, EPS, "mean")
    assert means["mean_not_divided"] == means["mean_divided_by_n_minus_1"] == 4
    assert _grade("4", row, "mean").slip == "mean_not_divided"
    variances = slip_values(row, EPS, "variance")
    assert variances["variance_n_minus_1"] == variances["variance_not_divided"] == 2
    assert _grade("2", row, "variance").slip == "variance_n_minus_1"
    denominators = slip_values(row, EPS, "denominator")
    assert denominators["denominator_n_minus_1"] == denominators["denominator_not_divided"]
    assert _grade("1.4142", row, "denominator").slip == "denominator_n_minus_1"


def test_a_slip_within_tolerance_of_the_exact_answer_never_counts() -> None:
    # [5, 5]: the variance is 0, and so is its square root (variance_is_std): typing 0 is right.
    assert _grade("0", (5, 5), "variance") == Grade(right=True, slip=None)
    # [0, 1, 2, 3]: the variance is 1.25, its square root 1.118: a distinct slip at 0.001.
    row = (0, 1, 2, 3)
    assert _grade("1.118", row, "variance") == Grade(right=False, slip="variance_is_std")
    # With a tolerance of 0.2 the root is within reach of the exact 1.25, so 1.0 (0.118 from the
    # root, 0.25 from the answer) is plainly wrong rather than that slip.
    wide = Fraction(2, 10)
    assert grade(Fraction(1), row, EPS, "variance", wide) == Grade(right=False, slip=None)


def test_a_one_entry_row_has_no_n_minus_1_slips() -> None:
    assert list(slip_values((7,), EPS, "mean")) == ["mean_not_divided", "mean_sign_flipped"]
    assert "variance_n_minus_1" not in slip_values((7,), EPS, "variance")
    assert "denominator_n_minus_1" not in slip_values((7,), EPS, "denominator")
    assert _grade("7", (7,), "mean") == Grade(right=True, slip=None)


def test_eps_and_tolerance_may_come_as_decimals_from_the_lesson_file() -> None:
    verdict = grade(Fraction(2, 3), ROW_A, Decimal("1e-5"), "variance", Decimal("0.001"))
    assert verdict == Grade(right=True, slip=None)


@pytest.mark.parametrize("bad_step", ["median", ""])
def test_unknown_steps_are_refused(bad_step: str) -> None:
    with pytest.raises(ValueError, match="unknown step"):
        slip_values(ROW_A, EPS, bad_step)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown step"):
        grade(Fraction(1), ROW_A, EPS, bad_step, TOLERANCE)  # type: ignore[arg-type]


def test_a_negative_tolerance_is_refused() -> None:
    with pytest.raises(ValueError, match="tolerance must be >= 0"):
        grade(Fraction(2), ROW_A, EPS, "mean", Fraction(-1, 1000))
