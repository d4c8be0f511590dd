"""The lesson content: the packaged d9.toml loads with every fact the spec fixes, and each kind
of broken file is refused with a message naming the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from importlib import resources
from pathlib import Path

import pytest

from normdive.lesson import plurals
from normdive.lesson.content import (
    ANSWER_FIELDS,
    BAND_FIELDS,
    COMPONENT_ROWS,
    OUTCOME_IDS,
    PREDICT_CHOICE_IDS,
    ROW_COMPARE_FIELDS,
    RUN_FIELDS,
    SECTION_IDS,
    SHARE_FIELDS,
    Lesson,
    LessonError,
    load_lesson,
    parse_lesson,
    placeholders,
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
    assert "less than 0.00001" in right[0].label
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


def test_the_ablation_data_the_spec_fixes(lesson: Lesson) -> None:
    assert [row.key for row in lesson.rows] == [
        "both",
        "residual_only",
        "layernorm_only",
        "neither",
    ]
    assert [row.label for row in lesson.rows] == [
        "Both",
        "Residuals only",
        "Layer norm only",
        "Neither",
    ]
    assert all(row.description for row in lesson.rows)
    assert [o.id for o in lesson.outcomes] == list(OUTCOME_IDS)
    assert [o.label for o in lesson.outcomes] == [
        "Learns the copy",
        "Gets part of the way",
        "Stays at chance",
    ]
    assert lesson.bands.learns_min_accuracy == Decimal("0.90")
    assert lesson.bands.chance_max_multiple == Decimal("2")
    assert lesson.aggregate.min_learners == 5
    assert sorted(lesson.components) == sorted(PREDICT_CHOICE_IDS) == sorted(COMPONENT_ROWS)
    assert set(COMPONENT_ROWS.values()) == {"layernorm_only", "residual_only"}
    assert set(lesson.init_names) == {"gpt2", "pytorch"}
    assert lesson.row("neither") is not None and lesson.row("all") is None
    assert lesson.outcome("chance") is not None and lesson.outcome("wins") is None
    assert lesson.predict_choice("residual") is not None


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in _texts(item)]
    return []


def test_no_text_names_the_answer(lesson: Lesson) -> None:
    # Which component recovers more and which row is best come from the recording: every
    # sentence that says so takes them from placeholders.
    texts = [text.lower() for text in _texts(lesson.model_dump())]
    assert texts
    for text in texts:
        for name in lesson.components.values():
            for claim in ("recovers more", "recovered more", "matters more"):
                assert f"{name.lower()} {claim}" not in text, text
        for row in lesson.rows:
            # Sentences quote a row's label only through the {row} / {other_row} placeholders.
            assert f"“{row.label.lower()}”" not in text, text
            for claim in ("is the best", "does best", "learns the copy", "stays at chance"):
                assert f"{row.label.lower()} row {claim}" not in text, text
        assert "best row is" not in text


def test_the_texts_state_the_runs_scope_and_the_initialisation(lesson: Lesson) -> None:
    statement = lesson.ablation.statement
    assert {"depth", "seed"} <= placeholders(statement)
    assert "nothing more general" in statement
    assert placeholders(lesson.ablation.initialisation_named) == {"init"}
    assert "residuals-only row" in lesson.ablation.initialisation_named


def test_every_template_fills_from_its_fields(lesson: Lesson) -> None:
    def fill(template: str, fields: tuple[str, ...]) -> str:
        return template.format_map({name: f"<{name}>" for name in fields})

    opening = ("predicted", *ANSWER_FIELDS)
    cases = [
        (lesson.hints.rungs[1].text, ANSWER_FIELDS),
        (lesson.hints.answer_tie, ANSWER_FIELDS),
        (lesson.takeaway.composed_line, ANSWER_FIELDS + RUN_FIELDS),
        (lesson.takeaway.composed_line_tie, ANSWER_FIELDS + RUN_FIELDS),
        (lesson.ablation.statement, RUN_FIELDS),
        (lesson.compare.opening_agrees, opening),
        (lesson.compare.opening_differs, opening),
        (lesson.compare.opening_tie, opening),
        *((form, ROW_COMPARE_FIELDS) for form in plurals.forms(lesson.compare.row_agrees).values()),
        *(
            (form, ROW_COMPARE_FIELDS)
            for form in plurals.forms(lesson.compare.row_differs).values()
        ),
        (lesson.aggregate.share, SHARE_FIELDS),
        *((outcome.band, BAND_FIELDS) for outcome in lesson.outcomes),
    ]
    for template, fields in cases:
        filled = fill(template, fields)
        assert "{" not in filled and "}" not in filled, template
    assert "<component>" in fill(lesson.hints.rungs[1].text, ANSWER_FIELDS)


@pytest.mark.parametrize(
    ("template", "names"),
    [
        ("plain", set()),
        ("{a} and {b} and {a}", {"a", "b"}),
        ("{{literal}} {x:>3}", {"x"}),
    ],
)
def test_placeholders(template: str, names: set[str]) -> None:
    assert placeholders(template) == names


@pytest.mark.parametrize("template", ["{", "}", "{0}", "{}", "{a.b}", "{a[0]}"])
def test_placeholders_refuses_what_is_not_a_plain_name(template: str) -> None:
    with pytest.raises(ValueError):
        placeholders(template)


def test_hint_runs_text_takes_the_run_count(lesson: Lesson) -> None:
    assert lesson.hints.runs_sentence(4) == "You have run it 4 times."


def test_the_run_count_is_singular_for_one_run(lesson: Lesson) -> None:
    assert lesson.hints.runs_sentence(1) == "You have run it 1 time."
    assert lesson.hints.runs_sentence(0) == "You have run it 0 times."
    assert lesson.hints.runs_sentence(2) == "You have run it 2 times."


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
        ("reading.choices.0.feedback", "[4, 4, 4, 4]"),
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
        ("hints", "runs_text.other", "{runs}"),
    ),
    (
        "too-long message without the limit",
        _replace("and the limit is {max}", "and that is too many"),
        ("takeaway", "too_long", "{max}"),
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
    # --- the ablation's data ---
    (
        "a rung 2 placeholder that does not exist",
        _replace("putting back {component} recovers more: the", "{winner} recovers more: the"),
        ("hints.rungs", "1.text", "unknown placeholder {winner}"),
    ),
    (
        "rung 2 without the component",
        _replace("putting back {component} recovers more: the", "one recovers more: the"),
        ("hints.rungs", "1.text", "{component}"),
    ),
    (
        "rung 1 with a placeholder",
        _replace("layer norm only. Which of them", "layer norm only. Which of {row}"),
        ("hints.rungs", "0.text", "takes none"),
    ),
    (
        "a lone brace in a compare sentence",
        _replace('row_unpredicted = "{row}: no', 'row_unpredicted = "{row: no'),
        ("compare", "row_unpredicted", "not a valid template"),
    ),
    (
        "a statement without the depth",
        _replace("a stack {depth} blocks deep", "a deep stack"),
        ("ablation", "{depth}"),
    ),
    (
        "a band edge as a float",
        _replace('learns_min_accuracy = "0.90"', "learns_min_accuracy = 0.9"),
        ("bands.learns_min_accuracy", "quoted"),
    ),
    (
        "a band edge over 1",
        _replace('learns_min_accuracy = "0.90"', 'learns_min_accuracy = "1.5"'),
        ("bands.learns_min_accuracy",),
    ),
    (
        "a chance band under chance",
        _replace('chance_max_multiple = "2"', 'chance_max_multiple = "0.5"'),
        ("bands.chance_max_multiple",),
    ),
    (
        "an unknown outcome",
        _replace('id = "partial"', 'id = "halfway"'),
        ("outcomes.1.id",),
    ),
    (
        "a repeated outcome",
        _replace('id = "partial"', 'id = "chance"'),
        ("outcomes", "repeated"),
    ),
    (
        "a row the recording does not have",
        _replace('key = "neither"', 'key = "none"'),
        ("rows.3.key",),
    ),
    (
        "a row twice",
        _replace('key = "neither"', 'key = "both"'),
        ("rows", "repeated"),
    ),
    (
        "a row missing",
        _drop_block('[[rows]]\nkey = "neither"', "# A row's outcome is read"),
        ("rows", "needs one row for each of", "neither"),
    ),
    (
        "a component without a name",
        _replace('residual = "the residual connections"\n', ""),
        ("components", "residual"),
    ),
    (
        "an aggregate minimum of zero",
        _replace("min_learners = 5", "min_learners = 0"),
        ("aggregate.min_learners",),
    ),
    (
        "a share without its count",
        _replace('share = "{count} of {total} ({share})"', 'share = "{total} ({share})"'),
        ("aggregate", "{count}"),
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
