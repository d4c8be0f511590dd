"""Grading the lesson's six typed answers: the Fraction reference (tests/fraction_grading.py,
how numeric/ graded before) against the scaled-integer grading, side by side in one process:

    .venv/bin/python bench/grading.py [--repeats 7] [--number 2000]

Two sets of six answers: a learner's right ones (tests/lesson_answers.py, "2/3" among them)
and bench/load.py's wrong ones, made unique by trailing digits as the load mix makes them
("2.5000<nonce>7": 17 significant digits, and a wrong answer is tried against every slip).
For each set, three figures, each the least CPU time (time.process_time) of --repeats runs of
--number passes over the six, the two gradings' runs interleaved:

- grade: the verdict alone, on a value parsed beforehand (a Fraction against a ParsedAnswer);
- parse + grade: from the typed text (the reference reads it with Decimal, which skips the
  format checks parse_answer makes, so it flatters the reference);
- check: what check_numbers spends on the six, each changed since the field's last graded
  answer: before, each answer parsed twice and the last one once, then graded; now each
  answer and the last one parsed once, then graded.

Both gradings are asserted to give the same verdicts before anything is timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fraction_grading import reference_grade, reference_parse
from lesson_answers import LESSON, RIGHT_NUMBERS
from normdive.numeric.answers import ParsedAnswer, parse_answer
from normdive.numeric.targets import Grade, Step, grade

REPEATS = 7
NUMBER = 2000
# bench/load.py's WRONG_NUMBERS with a nonce and a counter behind them, as its mix types them.
WRONG_NUMBERS = {
    "row1_mean": "2.5000123456789007",
    "row1_variance": "1.0000123456789007",
    "row1_denominator": "1.5000123456789007",
    "row2_mean": "0.5000123456789007",
    "row2_variance": "2.5000123456789007",
    "row2_denominator": "0.25000123456789007",
}
FIELDS = {number_field.id: number_field for number_field in LESSON.number_fields}


def _targets(field_id: str) -> tuple[list[int], Step]:
    number_field = FIELDS[field_id]
    return LESSON.hand_rows[number_field.row], number_field.step


def _parsed(text: str) -> ParsedAnswer:
    parsed = parse_answer(text)
    assert isinstance(parsed, ParsedAnswer), text
    return parsed


def _reference_verdicts(answers: dict[str, str]) -> list[Grade]:
    verdicts = []
    for field_id, text in answers.items():
        row, step = _targets(field_id)
        value, _ = reference_parse(text)
        verdicts.append(reference_grade(value, row, LESSON.eps, step, LESSON.tolerance))
    return verdicts


def _verdicts(answers: dict[str, str]) -> list[Grade]:
    verdicts = []
    for field_id, text in answers.items():
        row, step = _targets(field_id)
        verdicts.append(grade(_parsed(text), row, LESSON.eps, step, LESSON.tolerance))
    return verdicts


def passes(answers: dict[str, str]) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """Per figure, (the reference's pass over the six, the integer grading's pass)."""
    eps, tolerance = LESSON.eps, LESSON.tolerance
    work = [(*_targets(field_id), text) for field_id, text in answers.items()]
    values = [(row, step, reference_parse(text)[0]) for row, step, text in work]
    parsed = [(row, step, _parsed(text)) for row, step, text in work]

    def grade_reference() -> None:
        for row, step, value in values:
            reference_grade(value, row, eps, step, tolerance)

    def grade_integers() -> None:
        for row, step, answer in parsed:
            grade(answer, row, eps, step, tolerance)

    def parse_grade_reference() -> None:
        for row, step, text in work:
            reference_grade(reference_parse(text)[0], row, eps, step, tolerance)

    def parse_grade_integers() -> None:
        for row, step, text in work:
            answer = parse_answer(text)
            assert isinstance(answer, ParsedAnswer)
            grade(answer, row, eps, step, tolerance)

    def check_reference() -> None:
        for row, step, text in work:
            now, _ = reference_parse(text)
            before, _ = reference_parse(f"{text}1")  # the field's last graded answer
            if before != now:
                reference_grade(reference_parse(text)[0], row, eps, step, tolerance)

    def check_integers() -> None:
        for row, step, text in work:
            now = parse_answer(text)
            before = parse_answer(f"{text}1")
            assert isinstance(now, ParsedAnswer) and isinstance(before, ParsedAnswer)
            if not before.same_value(now):
                grade(now, row, eps, step, tolerance)

    return {
        "grade": (grade_reference, grade_integers),
        "parse + grade": (parse_grade_reference, parse_grade_integers),
        "check": (check_reference, check_integers),
    }


def cpu_microseconds(run: Callable[[], object], number: int) -> float:
    """The CPU time of `number` passes, per pass, in microseconds: the process's own CPU
    clock, which a busy machine's other processes do not advance."""
    started = time.process_time()
    for _ in range(number):
        run()
    return (time.process_time() - started) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--number", type=int, default=NUMBER)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"Python {sys.version.split()[0]}, least of {args.repeats} x {args.number} passes")
    print(f"{'answers':<8} {'figure':<14} {'Fraction us':>12} {'integers us':>12} {'ratio':>7}")
    print("(microseconds of CPU per six answers)")
    for name, answers in (("right", RIGHT_NUMBERS), ("wrong", WRONG_NUMBERS)):
        verdicts = _verdicts(answers)
        if verdicts != _reference_verdicts(answers):
            raise SystemExit(f"The two gradings disagree on the {name} answers: {verdicts}")
        for figure, (reference, integers) in passes(answers).items():
            # Interleaved, so that a busy spell on the machine falls on both alike.
            old = new = float("inf")
            for _ in range(args.repeats):
                old = min(old, cpu_microseconds(reference, args.number))
                new = min(new, cpu_microseconds(integers, args.number))
            print(f"{name:<8} {figure:<14} {old:>12.1f} {new:>12.1f} {old / new:>6.1f}x")
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
