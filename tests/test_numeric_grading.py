"""Grading in scaled integers gives exactly the verdicts exact Fraction arithmetic gives.

The reference (tests/fraction_grading.py) is the Fraction grading numeric/ used before: the
value Fraction(Decimal(text)), the canonical text Decimal.normalize() formatted, and
|value - target| <= tolerance in Fractions. The tolerance here is none: for every accepted
text, the value, the canonical text and the verdict (right, and the slip named) are equal.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fraction_grading import reference_grade, reference_parse
from normdive.lesson.content import load_lesson
from normdive.numeric.answers import (
    LARGEST_VALUE,
    MAX_ANSWER_CHARS,
    FormatError,
    ParsedAnswer,
    parse_answer,
)
from normdive.numeric.numbers import MAX_ABS_EXPONENT, UNICODE_MINUS
from normdive.numeric.targets import STEPS, Grade, Step, exact_value, grade, slip_values

PROPERTY = settings(derandomize=True, database=None, deadline=None)
LESSON = load_lesson()
TOLERANCE = Fraction(LESSON.tolerance)
EPS_VALUES = (LESSON.eps, 0)  # the switch on and off
# The targets a boundary answer is built around: the exact answer and each slip of each field.
TARGETS = [
    (number_field, eps, target)
    for number_field in LESSON.number_fields
    for eps in EPS_VALUES
    for target in (
        exact_value(LESSON.hand_rows[number_field.row], eps, number_field.step),
        *slip_values(LESSON.hand_rows[number_field.row], eps, number_field.step).values(),
    )
]


def _same_as_reference(text: str) -> ParsedAnswer | None:
    """Parse `text` both ways; for an accepted answer, assert equal values, canonical texts and
    verdicts for all six fields at both eps values, and return it."""
    parsed = parse_answer(text)
    if isinstance(parsed, FormatError):
        return None
    value, canonical = reference_parse(text)
    assert (parsed.value, parsed.canonical) == (value, canonical), text
    assert Fraction(parsed.numerator, parsed.denominator) == value
    assert parsed.denominator > 0
    for number_field in LESSON.number_fields:
        row = LESSON.hand_rows[number_field.row]
        for eps in EPS_VALUES:
            got = grade(parsed, row, eps, number_field.step, LESSON.tolerance)
            want = reference_grade(value, row, eps, number_field.step, LESSON.tolerance)
            assert got == want, (text, number_field.id, eps)
    return parsed


signs = st.sampled_from(["", "+", "-", UNICODE_MINUS])
digit_runs = st.text("0123456789", min_size=0, max_size=40)


@st.composite
def decimal_texts(draw: st.DrawFn) -> str:
    """Decimals a learner could type: either sign, leading and trailing zeros, many digits, an
    exponent of either case and sign up to the limit, spaces around."""
    whole = draw(digit_runs)
    point = draw(st.booleans())
    fraction = draw(digit_runs) if point else ""
    if not whole and not fraction:
        whole = draw(st.sampled_from(["0", "1", "7"]))
    exponent = ""
    if draw(st.booleans()):
        letter = draw(st.sampled_from("eE"))
        exponent_sign = draw(st.sampled_from(["", "+", "-"]))
        size = draw(st.one_of(st.integers(0, 5), st.integers(0, MAX_ABS_EXPONENT)))
        exponent = f"{letter}{exponent_sign}{size:0{draw(st.integers(1, 4))}d}"
    space = draw(st.sampled_from(["", " ", "\t"]))
    return f"{space}{draw(signs)}{whole}{'.' if point else ''}{fraction}{exponent}{space}"


@st.composite
def fraction_texts(draw: st.DrawFn) -> str:
    """ "p/q" with plain decimals on both sides, one optional sign in front."""
    top = draw(st.from_regex(r"[0-9]{1,12}(\.[0-9]{0,8})?", fullmatch=True))
    bottom = draw(st.from_regex(r"[0-9]{0,3}[1-9][0-9]{0,8}(\.[0-9]{0,8})?", fullmatch=True))
    gap = draw(st.sampled_from(["", " "]))
    return f"{draw(signs)}{top}{gap}/{gap}{bottom}"


def _decimal_text(scaled: int, places: int) -> str:
    """scaled / 10**places written out with exactly `places` decimals."""
    sign = "-" if scaled < 0 else ""
    digits = str(abs(scaled)).rjust(places + 1, "0")
    if places == 0:
        return f"{sign}{digits}"
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


@st.composite
def boundary_texts(draw: st.DrawFn) -> str:
    """A decimal at target +- tolerance, cut to some number of places, then moved by -1, 0 or
    +1 in its last place: exactly on the inclusive boundary where the target allows it (a
    terminating decimal with few enough digits), and one unit either side of it."""
    _, _, target = draw(st.sampled_from(TARGETS))
    edge = target + draw(st.sampled_from([TOLERANCE, -TOLERANCE]))
    places = draw(st.integers(0, 58))
    cut = draw(st.sampled_from([math.floor, math.ceil]))
    scaled = cut(edge * 10**places) + draw(st.sampled_from([-1, 0, 1]))
    text = _decimal_text(scaled, places)
    if draw(st.booleans()) and scaled:
        # The same number written with an exponent: digits moved by `shift` places.
        shift = draw(st.integers(-3, 3))
        text = f"{_decimal_text(scaled, places + shift)}e{shift}"
    return text


@PROPERTY
@given(text=decimal_texts())
@example(text="0.0000000000000000000000000000012345e-0")
@example(text="-00012.3400e+040")
@example(text="1e308")
@example(text="1.7976931348623157e308")
def test_a_typed_decimal_grades_as_the_fraction_reference(text: str) -> None:
    parsed = _same_as_reference(text)
    if parsed is None and len(text) <= MAX_ANSWER_CHARS:
        # The only decimals refused are those beyond float64's range.
        value, _ = reference_parse(text)
        assert abs(value) > LARGEST_VALUE, text


@PROPERTY
@given(text=boundary_texts())
def test_answers_at_the_tolerance_boundary_grade_as_the_fraction_reference(text: str) -> None:
    if len(text) <= MAX_ANSWER_CHARS:
        assert _same_as_reference(text) is not None, text


def test_the_boundary_texts_reach_the_boundary_itself() -> None:
    """Each rational target the lesson grades against is a terminating decimal or not; for one
    that terminates (the mean 2 of [1, 2, 3]), target + tolerance typed out lands and one unit
    further does not, in both gradings."""
    for text, right in (("2.001", True), ("2.0010", True), ("2.0011", False), ("1.9989", False)):
        parsed = _same_as_reference(text)
        assert parsed is not None
        assert grade(parsed, LESSON.hand_rows[0], LESSON.eps, "mean", TOLERANCE).right is right


@PROPERTY
@given(text=fraction_texts())
def test_a_typed_fraction_grades_as_the_fraction_reference(text: str) -> None:
    _same_as_reference(text)


@PROPERTY
@given(
    row=st.lists(st.integers(-20, 20), min_size=1, max_size=5),
    eps=st.sampled_from([0, Fraction(1, 100_000), Fraction(1, 10)]),
    step=st.sampled_from(STEPS),
    data=st.data(),
)
def test_any_row_and_tolerance_grade_as_the_fraction_reference(
    row: list[int], eps: Fraction, step: Step, data: st.DataObject
) -> None:
    """Beyond the lesson's rows: slips that coincide, or lie within tolerance of the answer or
    exactly at it (the tolerance is then a slip's distance from the answer), and values within
    a couple of tolerances of a target, on its boundary included."""
    centres = [exact_value(row, eps, step), *slip_values(row, eps, step).values()]
    distances = [abs(centre - centres[0]) for centre in centres[1:]]
    tolerance = data.draw(
        st.one_of(
            st.fractions(min_value=0, max_value=1, max_denominator=1000),
            st.sampled_from(distances),
        )
    )
    centre = data.draw(st.sampled_from(centres))
    shift = data.draw(
        st.one_of(st.sampled_from([-1, 0, 1]), st.fractions(-2, 2, max_denominator=50))
    )
    value = centre + shift * tolerance
    assert grade(value, row, eps, step, tolerance) == reference_grade(
        value, row, eps, step, tolerance
    )


@PROPERTY
@given(first=st.one_of(decimal_texts(), fraction_texts()), second=st.data())
def test_two_answers_have_the_same_value_exactly_when_their_fractions_are_equal(
    first: str, second: st.DataObject
) -> None:
    one = parse_answer(first)
    if isinstance(one, FormatError):
        return
    # Half the time a respelling of the same value: its canonical text.
    respelled = second.draw(st.booleans())
    other = parse_answer(one.canonical if respelled else second.draw(decimal_texts()))
    if isinstance(other, FormatError):
        return
    assert one.same_value(other) == (one.value == other.value) == other.same_value(one)


@pytest.mark.parametrize("value", [Fraction(2, 3), Fraction(-3, 2), 2, "2/3", "0.8165", "-12"])
def test_grade_takes_a_fraction_an_int_or_a_parsed_answer_alike(
    value: Fraction | int | str,
) -> None:
    if isinstance(value, str):
        parsed = parse_answer(value)
        assert isinstance(parsed, ParsedAnswer)
        as_fraction = parsed.value
    else:
        parsed, as_fraction = None, Fraction(value)
    for number_field in LESSON.number_fields:
        row = LESSON.hand_rows[number_field.row]
        want = reference_grade(as_fraction, row, LESSON.eps, number_field.step, TOLERANCE)
        for typed in (as_fraction, parsed if parsed is not None else value):
            assert grade(typed, row, LESSON.eps, number_field.step, TOLERANCE) == want


def test_a_decimal_keeps_its_power_of_ten_and_the_fraction_its_lowest_terms() -> None:
    parsed = parse_answer("0.50")
    assert isinstance(parsed, ParsedAnswer)
    assert (parsed.numerator, parsed.denominator) == (5, 10)
    assert parsed.value == Fraction(1, 2) and parsed.canonical == "0.5"
    assert grade(parsed, (1, 2), 0, "mean", TOLERANCE) == Grade(right=False, slip=None)
