"""Parsing and grading a typed answer, PrairieLearn style: raw text and parsed value kept apart,
format errors cost nothing.

CONTRACT:
    MAX_ANSWER_CHARS = 64
    @dataclass(frozen=True) class ParsedAnswer:
        raw: str
        value: Fraction          # exact value of what was typed ("2/3" -> Fraction(2, 3))
        canonical: str           # normalised text of the value, e.g. "0.6667" or "2/3"
    @dataclass(frozen=True) class FormatError:
        raw: str
        message: str             # what is wrong and how to write it, for a learner
    def parse_answer(raw: str) -> ParsedAnswer | FormatError
        accepts surrounding spaces, leading +, Unicode minus (U+2212), decimals, exponents
        ("1e-3", "6.67E-1"), fractions "2/3" / "-2/3" (both parts decimals allowed? integers
        at least). Blank, non-numeric, NaN, infinity, overflow (beyond float range), division
        by zero, longer than 64 characters -> FormatError.

    def within_tolerance(value: Fraction, exact: Fraction, tolerance: Fraction) -> bool
        |value - exact| <= tolerance, inclusive, exact arithmetic.
"""
