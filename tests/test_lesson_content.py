"""The lesson content: the packaged d9.toml loads with every fact the spec fixes, and each kind
of broken file is refused with a message naming the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from importlib import resources
from pathlib import Path

import pytest

from normdive.lesson.content import (
    PREDICT_CHOICE_IDS,
    SECTION_IDS,
    Lesson,
    LessonError,
    load_lesson,
    parse_lesson,
)
from normdive.numeric.display import format_input_row
from normdive.numeric.targets import SLIPS

PACKAGED = resources.files("normdive").joinpath("content", "d9.toml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_lesson()


def test_the_packaged_lesson_holds_the_numbers_the_spec_fixes(lesson: Lesson) -> None:
    assert lesson.id == "d9"
    assert lesson.eps == Decimal("0.00001")
    assert lesson.tolerance == Decimal("0.001")
    assert lesson.hand_rows == [[1, 2, 3], [2, 2, 2, 6]]
    assert lesson.edge_row == [4, 4, 4, 4]
    assert lesson.prerequisite.id == "8.5"
    assert lesson.prerequisite.title == "The transformer block"
    assert [rung.threshold for rung in lesson.hints.rungs] == [3, 5]
    assert lesson.takeaway.max_chars == 2000
    assert len(lesson.takeaway.default_line) <= lesson.takeaway.max_chars


def test_sections_come_in_the_seed_order(lesson: Lesson) -> None:
    assert tuple(section.id for section in lesson.sections) == SECTION_IDS
    assert [section.number for section in lesson.sections] == ["01", "02", "03", "04", "05"]
    assert lesson.section("check").title == "Check your understanding"


def test_predict_offers_layer_norm_and_residual(lesson: Lesson) -> None:
    assert tuple(choice.id for choice in lesson.predict.choices) == PREDICT_CHOICE_IDS


def test_six_fields_cover_the_three_steps_of_both_rows_in_page_order(lesson: Lesson) -> None:
    assert [(f.row, f.step) for f in lesson.number_fields] == [
        (0, "mean"),
        (0, "variance"),
        (0, "denominator"),
        (1, "mean"),
        (1, "variance"),
        (1, "denominator"),
    ]
    for number_field in lesson.number_fields:
        row = lesson.hand_rows[number_field.row]
        assert format_input_row(row) in number_field.label
    assert lesson.field("row2_variance") is not None
    assert lesson.field("nope") is None


def test_one_right_reading_of_four_and_every_wrong_one_points_at_the_edge_row(
    lesson: Lesson,
) -> None:
    choices = lesson.reading.choices
    assert len(choices) == 4
    right = [choice for choice in choices if choice.correct]
    assert len(right) == 1
    assert "finite" in right[0].label
    assert "sixth decimal" in right[0].label
    for choice in choices:
        if not choice.correct:
            assert "[4, 4, 4, 4]" in choice.feedback
    assert lesson.reading_choice(right[0].id) == right[0]
    assert lesson.reading_choice("nope") is None


def test_every_slip_the_grader_knows_has_its_own_feedback(lesson: Lesson) -> None:
    assert set(lesson.slip_feedback) == set(SLIPS)


def test_the_ablation_texts_leave_the_outcome_to_the_recording(lesson: Lesson) -> None:
    # The winner is read from the recording; the prose must not announce it.
    texts = " ".join(lesson.ablation.model_dump().values()).lower()
    for claim in ("recovers more", "best row is", "wins", "better than"):
        assert claim not in texts


def test_hint_runs_text_takes_the_run_count(lesson: Lesson) -> None:
    assert lesson.hints.runs_text.format(runs=4) != lesson.hints.runs_text


def test_load_lesson_reads_a_file_given_by_path(tmp_path: Path) -> None:
    path = tmp_path / "lesson.toml"
    path.write_text(PACKAGED.replace('title = "Layer norm and residuals"', 'title = "Other"'))
    assert load_lesson(path).title == "Other"


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(LessonError, match=re.escape(str(path))):
        load_lesson(path)


def _replace(old: str, new: str) -> Callable[[str], str]:
    def mutate(text: str) -> str:
        assert old in text, f"the test's anchor {old!r} is no longer in d9.toml"
        return text.replace(old, new, 1)

    return mutate


def _drop_block(start: str, end: str) -> Callable[[str], str]:
    """Remove the text from `start` up to (not including) `end`."""

    def mutate(text: str) -> str:
        begin = text.index(start)
        return text[:begin] + text[text.index(end, begin) :]

    return mutate


# (case, mutation of the packaged TOML, text the error must contain: the field's path)
BROKEN: list[tuple[str, Callable[[str], str], tuple[str, ...]]] = [
    ("not TOML", _replace('title = "Layer norm', 'title = Layer "norm'), ("not valid TOML",)),
    ("missing title", _replace('title = "Layer norm and residuals"\n', ""), ("title", "required")),
    ("unknown key", _replace('id = "d9"', 'id = "d9"\ncolour = "red"'), ("colour", "xtra")),
    (
        "blank text",
        _replace(
            '"""Not within 0.001 yet. Work this step again from the row\'s own entries."""', '"   "'
        ),
        ("wrong_feedback", "at least 1 character"),
    ),
    ("eps as a float", _replace('eps = "0.00001"', "eps = 1e-5"), ("eps", "quoted")),
    ("negative tolerance", _replace('tolerance = "0.001"', 'tolerance = "-0.001"'), ("tolerance",)),
    (
        "two right readings",
        _replace("correct = false", "correct = true"),
        ("reading.choices", "exactly one correct"),
    ),
    (
        "no right reading",
        _replace("correct = true", "correct = false"),
        ("reading.choices", "exactly one correct"),
    ),
    (
        "three readings",
        _drop_block('[[reading.choices]]\nid = "regulariser"', "# The ablation player"),
        ("reading.choices", "exactly 4"),
    ),
    (
        "a wrong reading that does not point at the edge row",
        _replace("look at [4, 4, 4, 4]", "look at the flat row"),
        ("reading.choices.1.feedback", "[4, 4, 4, 4]"),
    ),
    (
        "unknown predict choice",
        _replace('id = "residual"', 'id = "residuals"'),
        ("predict.choices", "layer_norm"),
    ),
    (
        "three predict choices",
        _replace(
            'label = "Residual connections"\n',
            'label = "Residual connections"\n\n'
            '[[predict.choices]]\nid = "attention"\nlabel = "Attention"\n',
        ),
        ("predict.choices", "exactly two"),
    ),
    (
        "a missing number field",
        _drop_block(
            '[[number_fields]]\nid = "row2_denominator"', "# Feedback for the classic slips"
        ),
        ("number_fields", "missing [(1, 'denominator')]"),
    ),
    (
        "two reading choices with one id",
        _replace('id = "smoothing"', 'id = "keeps_finite"'),
        ("reading.choices", "repeated"),
    ),
    (
        "a step twice",
        _replace('row = 1\nstep = "denominator"', 'row = 1\nstep = "variance"'),
        ("number_fields", "missing"),
    ),
    (
        "an unknown step",
        _replace('step = "denominator"', 'step = "stddev"'),
        ("number_fields.2.step",),
    ),
    (
        "a row out of range",
        _replace('row = 1\nstep = "mean"', 'row = 2\nstep = "mean"'),
        ("number_fields.3.row", "hand_rows"),
    ),
    (
        "a duplicate field id",
        _replace('id = "row2_mean"', 'id = "row1_mean"'),
        ("number_fields: ids must be unique", "row1_mean"),
    ),
    (
        "a field id unfit for a form",
        _replace('id = "row1_mean"', 'id = "Row 1 mean"'),
        ("number_fields.0.id",),
    ),
    (
        "an unknown slip",
        _replace("[slip_feedback]\n", '[slip_feedback]\nmean_typo = "x"\n'),
        ("slip_feedback", "mean_typo"),
    ),
    (
        "hint rungs out of order",
        _replace("threshold = 3", "threshold = 6"),
        ("hints.rungs", "rung 1 must open before rung 2"),
    ),
    (
        "one hint rung",
        _drop_block('[[hints.rungs]]\nlabel = "The answer"', "[gate]"),
        ("hints.rungs", "exactly two"),
    ),
    (
        "runs text without the count",
        _replace("You have run it {runs} times.", "You have run it."),
        ("hints.runs_text", "{runs}"),
    ),
    (
        "takeaway over the limit",
        _replace("max_chars = 2000", "max_chars = 2001"),
        ("takeaway.max_chars",),
    ),
    (
        "default line over max_chars",
        _replace("max_chars = 2000", "max_chars = 10"),
        ("takeaway", "default_line"),
    ),
    (
        "sections out of order",
        _replace('id = "compare"', 'id = "check_"'),
        ("sections", "in that order"),
    ),
    (
        "an edge row with variance",
        _replace("edge_row = [4, 4, 4, 4]", "edge_row = [4, 4, 4, 5]"),
        ("edge_row",),
    ),
]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [pytest.param(mutate, expected, id=case) for case, mutate, expected in BROKEN],
)
def test_a_broken_lesson_is_refused_naming_the_field(
    mutate: Callable[[str], str], expected: tuple[str, ...]
) -> None:
    with pytest.raises(LessonError) as refused:
        parse_lesson(mutate(PACKAGED), "d9-broken.toml")
    message = str(refused.value)
    assert message.startswith("d9-broken.toml: ")
    for part in expected:
        assert part in message, message


def test_the_unbroken_text_parses() -> None:
    # The broken cases above differ from a file that loads only by their mutation.
    assert parse_lesson(PACKAGED).id == "d9"
