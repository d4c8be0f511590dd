"""Property tests (Hypothesis) of the two parsers that take a learner's raw text: the answer
parser (numeric.answers) and the row parser (numeric.rows). Whatever is typed, they never
raise; they tell a format error from a value; a value survives a round trip through its text;
and the inclusive tolerance is monotonic. Derandomised and without the example database, so
every run checks the same cases."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from normdive.lesson.content import NumberField, load_lesson
from normdive.numeric.answers import (
    LARGEST_VALUE,
    MAX_ABS_EXPONENT,
    MAX_ANSWER_CHARS,
    FormatError,
    ParsedAnswer,
    parse_answer,
    within_tolerance,
)
from normdive.numeric.rows import (
    MAX_MAGNITUDE,
    MAX_ROW_CHARS,
    MAX_ROW_LENGTH,
    MIN_MAGNITUDE,
    RowError,
    parse_row,
)
from normdive.numeric.targets import exact_value, grade

# As many examples as the Hypothesis profile says (tests/conftest.py).
PROPERTY = settings(derandomize=True, database=None, deadline=None)
LESSON = load_lesson()
TOLERANCE = Fraction(LESSON.tolerance)
UNICODE_MINUS = "\u2212"

# Any text at all, including control characters, surrogates and very long runs.
any_text = st.text(alphabet=st.characters(codec=None), max_size=200)
# Text near the grammar: mostly number characters, so the parser's branches are all reached.
number_ish = st.text(alphabet=" \t+-−0123456789.,eE/∞naifINF", max_size=80)


@st.composite
def decimal_texts(draw: st.DrawFn, max_exponent: int = 300) -> str:
    """A decimal as a learner might type it: sign, digits, point, exponent."""
    sign = draw(st.sampled_from(["", "+", "-", UNICODE_MINUS]))
    whole = draw(st.text("0123456789", max_size=18))
    point = draw(st.booleans())
    fraction = draw(st.text("0123456789", min_size=0 if whole else 1, max_size=18)) if point else ""
    if not whole and not fraction:
        whole = draw(st.text("0123456789", min_size=1, max_size=5))
    exponent = ""
    if draw(st.booleans()):
        letter = draw(st.sampled_from("eE"))
        exponent_sign = draw(st.sampled_from(["", "+", "-"]))
        exponent = f"{letter}{exponent_sign}{draw(st.integers(0, max_exponent))}"
    return f"{sign}{whole}{'.' if point else ''}{fraction}{exponent}"


def exact(text: str) -> Fraction:
    """The value of a decimal text by Python's own Decimal: the oracle."""
    return Fraction(Decimal(text.strip().replace(UNICODE_MINUS, "-")))


# --- the answer parser -----------------------------------------------------------------------


@PROPERTY
@given(raw=st.one_of(any_text, number_ish))
def test_the_answer_parser_never_raises_and_keeps_the_raw_text(raw: str) -> None:
    result = parse_answer(raw)
    assert isinstance(result, ParsedAnswer | FormatError)
    assert result.raw == raw
    if isinstance(result, FormatError):
        assert re.search(r"[A-Za-z]{3,}", result.message)
    else:
        assert abs(result.value) <= LARGEST_VALUE
        assert len(raw) <= MAX_ANSWER_CHARS
        # Only number characters make a value: letters other than the exponent never do.
        used = {character for character in raw if not character.isspace()}
        assert used <= set("0123456789.eE+-/" + UNICODE_MINUS)


@PROPERTY
@given(text=decimal_texts())
def test_a_decimal_is_its_exact_value_or_a_format_error_saying_why(text: str) -> None:
    result = parse_answer(text)
    if len(text) > MAX_ANSWER_CHARS:
        assert isinstance(result, FormatError) and "too long" in result.message
    elif abs(exact(text)) > LARGEST_VALUE:
        assert isinstance(result, FormatError) and "too large" in result.message
    else:
        assert isinstance(result, ParsedAnswer), result
        assert result.value == exact(text)


@PROPERTY
@given(mantissa=st.integers(1, 9), exponent=st.integers(MAX_ABS_EXPONENT + 1, 10**12))
def test_a_huge_exponent_is_a_format_error_before_any_arithmetic(
    mantissa: int, exponent: int
) -> None:
    for sign in ("", "-"):
        result = parse_answer(f"{mantissa}e{sign}{exponent}")
        assert isinstance(result, FormatError) and "exponent is out of range" in result.message


@PROPERTY
@given(text=decimal_texts(max_exponent=MAX_ABS_EXPONENT), data=st.data())
def test_spaces_a_plus_and_the_unicode_minus_change_nothing(text: str, data: st.DataObject) -> None:
    first = parse_answer(text)
    padding = data.draw(st.sampled_from(["", " ", "\t", "  \n"]))
    padded = parse_answer(f"{padding}{text}{padding[::-1]}")
    if len(padding) * 2 + len(text) <= MAX_ANSWER_CHARS:
        assert type(padded) is type(first)
        if isinstance(first, ParsedAnswer) and isinstance(padded, ParsedAnswer):
            assert (padded.value, padded.canonical) == (first.value, first.canonical)
    unsigned = text.lstrip("+-" + UNICODE_MINUS)
    if len(unsigned) + 1 <= MAX_ANSWER_CHARS:
        plus, minus, hyphen = (parse_answer(s + unsigned) for s in ("+", UNICODE_MINUS, "-"))
        if isinstance(plus, ParsedAnswer):
            assert isinstance(minus, ParsedAnswer) and isinstance(hyphen, ParsedAnswer)
            assert minus.value == hyphen.value == -plus.value


@PROPERTY
@given(result=st.builds(parse_answer, st.one_of(decimal_texts(), number_ish)))
def test_a_value_round_trips_through_its_canonical_text(result: ParsedAnswer | FormatError) -> None:
    if isinstance(result, FormatError) or len(result.canonical) > MAX_ANSWER_CHARS:
        return
    again = parse_answer(result.canonical)
    assert isinstance(again, ParsedAnswer), result.canonical
    assert again.value == result.value
    assert again.canonical == result.canonical


def test_the_canonical_text_keeps_every_digit() -> None:
    """Found by the round trip above: Decimal.normalize() rounded to 28 digits, so the stored
    "parsed" text of a 29-digit answer named another number than the one graded."""
    typed = "10000000000000.000000000000001"
    result = parse_answer(typed)
    assert isinstance(result, ParsedAnswer)
    assert result.canonical == typed and result.value == exact(typed)


@PROPERTY
@given(top=st.integers(-(10**9), 10**9), bottom=st.integers(-(10**9), 10**9))
def test_a_fraction_is_exact(top: int, bottom: int) -> None:
    result = parse_answer(f"{top}/{bottom}")
    if bottom <= 0:
        # Zero divides by nothing; a sign belongs in front of the fraction, not under it.
        assert isinstance(result, FormatError)
    else:
        assert isinstance(result, ParsedAnswer)
        assert result.value == Fraction(top, bottom)
        assert result.canonical == str(Fraction(top, bottom))


# --- the tolerance ---------------------------------------------------------------------------

fractions = st.fractions(max_denominator=10**6).filter(lambda f: abs(f) < 10**6)
tolerances = st.fractions(min_value=0, max_value=10, max_denominator=10**4)


@PROPERTY
@given(value=fractions, target=fractions, small=tolerances, extra=tolerances)
def test_the_tolerance_is_inclusive_symmetric_and_monotonic(
    value: Fraction, target: Fraction, small: Fraction, extra: Fraction
) -> None:
    inside = within_tolerance(value, target, small)
    assert inside == (abs(value - target) <= small)
    assert inside == within_tolerance(target, value, small)
    if inside:
        assert within_tolerance(value, target, small + extra)
    assert within_tolerance(target + small, target, small)  # the boundary counts
    assert within_tolerance(target - small, target, small)


fields = st.sampled_from(LESSON.number_fields)


@PROPERTY
@given(number_field=fields, text=decimal_texts(max_exponent=3), eps_on=st.booleans())
def test_typed_text_is_right_exactly_when_it_lies_within_the_tolerance(
    number_field: NumberField, text: str, eps_on: bool
) -> None:
    parsed = parse_answer(text)
    if not isinstance(parsed, ParsedAnswer):
        return
    row = LESSON.hand_rows[number_field.row]
    eps = LESSON.eps if eps_on else 0
    target = exact_value(row, eps, number_field.step)
    verdict = grade(parsed.value, row, eps, number_field.step, LESSON.tolerance)
    assert verdict.right == (abs(parsed.value - target) <= TOLERANCE)
    # A wider tolerance never turns a right answer wrong.
    wider = grade(parsed.value, row, eps, number_field.step, TOLERANCE * 2)
    assert wider.right or not verdict.right
    # Nor does an answer closer to the exact value.
    closer = target + (parsed.value - target) / 2
    assert grade(closer, row, eps, number_field.step, LESSON.tolerance).right or not verdict.right


# --- the row parser --------------------------------------------------------------------------

# The entries a row takes: 0, or 1e-100 to 1e100 in size, either sign (numeric/rows.py).
in_range = st.floats(min_value=MIN_MAGNITUDE, max_value=MAX_MAGNITUDE)
entry = st.one_of(st.sampled_from([0.0, -0.0]), in_range, in_range.map(lambda v: -v))
# Finite, and outside that range: too large or too small (not 0).
too_large = st.floats(min_value=MAX_MAGNITUDE, allow_infinity=False).filter(
    lambda v: v > MAX_MAGNITUDE
)
too_small = st.floats(min_value=0.0, max_value=MIN_MAGNITUDE, exclude_min=True).filter(
    lambda v: v < MIN_MAGNITUDE
)
separators = st.sampled_from([", ", ",", " ", "\t", " , ", "\u00a0", "\u202f", "\n"])


@PROPERTY
@given(text=st.one_of(any_text, number_ish, st.text(alphabet="[]0123456789., -", max_size=500)))
def test_the_row_parser_never_raises(text: str) -> None:
    result = parse_row(text)
    if isinstance(result, RowError):
        assert re.search(r"[A-Za-z]{3,}", result.message)
    else:
        assert 1 <= len(result) <= MAX_ROW_LENGTH
        assert all(isinstance(value, float) and math.isfinite(value) for value in result)
        assert len(text) <= MAX_ROW_CHARS


@PROPERTY
@given(
    values=st.lists(entry, min_size=1, max_size=MAX_ROW_LENGTH),
    separator=separators,
    brackets=st.booleans(),
    unicode_minus=st.booleans(),
)
def test_a_row_round_trips_through_its_text(
    values: list[float], separator: str, brackets: bool, unicode_minus: bool
) -> None:
    text = separator.join(repr(value) for value in values)
    if unicode_minus:
        text = text.replace("-", UNICODE_MINUS)
    if brackets:
        text = f"[{text}]"
    result = parse_row(text)
    if len(text) > MAX_ROW_CHARS:
        assert isinstance(result, RowError) and "too long" in result.message
    else:
        assert result == tuple(values)
        assert [math.copysign(1, v) for v in result] == [math.copysign(1, v) for v in values]


@PROPERTY
@given(
    size=st.one_of(too_large, too_small), negative=st.booleans(), others=st.lists(entry, max_size=3)
)
def test_an_entry_out_of_range_is_refused_by_name(
    size: float, negative: bool, others: list[float]
) -> None:
    value = -size if negative else size
    result = parse_row(" ".join(repr(v) for v in [*others, value]))
    assert isinstance(result, RowError)
    assert ("too large" if size > MAX_MAGNITUDE else "too small") in result.message


@PROPERTY
@given(values=st.lists(st.integers(-99, 99), min_size=MAX_ROW_LENGTH + 1, max_size=40))
def test_more_than_sixteen_numbers_is_an_error_saying_how_many(values: list[int]) -> None:
    result = parse_row(" ".join(str(value) for value in values))
    assert isinstance(result, RowError)
    assert f"this one has {len(values)}" in result.message


@PROPERTY
@given(
    values=st.lists(st.integers(-99, 99), min_size=1, max_size=8),
    junk=st.text(alphabet="abcxyz$%&*#!?", min_size=1, max_size=5),
    at=st.integers(0, 8),
)
def test_a_token_that_is_not_a_number_is_named(values: list[int], junk: str, at: int) -> None:
    tokens = [str(value) for value in values]
    tokens.insert(min(at, len(tokens)), junk)
    result = parse_row(", ".join(tokens))
    assert isinstance(result, RowError)
    assert junk[:20] in result.message
