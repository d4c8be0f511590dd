"""The lesson as data (content/d9.toml), validated with pydantic.

Authors edit the TOML; nothing in code repeats its prose. The loader fails loudly, naming the
field, when the file is malformed (missing text, two right readings, an unknown slip, ...).

`load_lesson(path=None) -> Lesson` reads the packaged content/d9.toml by default and raises
`LessonError` (a ValueError) whose message names the file and the dotted path of each field
that is wrong. Every model forbids unknown keys, so a typo in the TOML is an error, not a
silently ignored line.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from normdive.numeric.display import format_input_row
from normdive.numeric.targets import SLIPS

# The packaged lesson. Authors edit this file; the loader is the only reader.
DEFAULT_LESSON_RESOURCE = "d9.toml"
# The predict question's two answers; the compare section and the recording use these ids.
PREDICT_CHOICE_IDS = ("layer_norm", "residual")
# The five sections of the page, in the order the seed gives them.
SECTION_IDS = ("question", "predict", "try", "compare", "check")
# The three step results a learner types for each hand row.
NUMBER_STEPS = ("mean", "variance", "denominator")
# The reading question offers one right reading and three plausible wrong ones.
READING_CHOICE_COUNT = 4
# The issue caps a saved takeaway at 2,000 characters.
TAKEAWAY_MAX_CHARS_LIMIT = 2000

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
# Ids double as HTML form field names and event payload keys.
Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=40)]


class LessonError(ValueError):
    """The lesson file is missing, is not TOML, or does not validate. The message says where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Choice(_Model):
    id: Identifier
    label: Text


class ReadingChoice(Choice):
    correct: bool
    feedback: Text  # shown after this choice is locked


class NumberField(_Model):
    id: Identifier  # form field name and the key in a numbers_checked event
    row: int = Field(ge=0)  # index into Lesson.hand_rows
    step: Literal["mean", "variance", "denominator"]
    label: Text  # accessible name, e.g. "Mean of [1, 2, 3]"


class Section(_Model):
    id: Identifier
    number: Text  # "01"
    title: Text
    paragraphs: list[Text]


class Prerequisite(_Model):
    id: Text  # "8.5"
    title: Text  # "The transformer block"
    locked_text: Text  # what the page says while 8.5 is not done
    dev_note: Text  # the discreet line when a development setting treats 8.5 as done


class Predict(_Model):
    heading: Text  # "Before anything runs"
    question: Text
    choices: list[Choice]
    prompt: Text  # shown while nothing is chosen
    locked_note: Text  # why "Try it" is locked until the prediction is committed
    commit_label: Text
    committed_text: Text  # introduces the committed choice, which never changes

    @field_validator("choices")
    @classmethod
    def _two_known_choices(cls, choices: list[Choice]) -> list[Choice]:
        ids = tuple(choice.id for choice in choices)
        if sorted(ids) != sorted(PREDICT_CHOICE_IDS) or len(ids) != len(PREDICT_CHOICE_IDS):
            raise ValueError(
                f"needs exactly two choices with ids {list(PREDICT_CHOICE_IDS)}, got {list(ids)}"
            )
        return choices


class HandWork(_Model):
    """Texts of "Layer norm, by hand" and the edge row; the numbers come from numeric."""

    heading: Text
    intro: Text
    panel_title: Text  # "Layer norm, one row at a time"
    computed_here: Text  # badge: these numbers are computed on this device
    switch_label: Text
    mean_step: Text  # each step's words; the page appends the number
    variance_step: Text
    denominator_step: Text
    out_label: Text
    edge_heading: Text
    edge_text: Text  # what the edge row does in both switch states
    edge_now_on: Text  # "the switch is on now" sentence start
    edge_now_off: Text
    summary_caption: Text  # caption under the plain-text summary
    table_summary: Text  # the <summary> of the steps table


class Numbers(_Model):
    heading: Text
    intro: Text  # says the tolerance and that all six must land
    check_label: Text
    landed_text: Text


class Reading(_Model):
    heading: Text
    question: Text
    choices: list[ReadingChoice]
    prompt: Text
    lock_label: Text

    @field_validator("choices")
    @classmethod
    def _one_right_of_four(cls, choices: list[ReadingChoice]) -> list[ReadingChoice]:
        if len(choices) != READING_CHOICE_COUNT:
            raise ValueError(f"needs exactly {READING_CHOICE_COUNT} choices, got {len(choices)}")
        right = [choice.id for choice in choices if choice.correct]
        if len(right) != 1:
            raise ValueError(f"needs exactly one correct choice, got {len(right)}: {right}")
        _unique_ids("choice", [choice.id for choice in choices])
        return choices


class Ablation(_Model):
    """Texts around the recorded rows. They never say which row wins: the recording does."""

    heading: Text
    intro: Text
    honesty: Text
    initialisation_note: Text  # the middle row depends on the initialisation setting
    panel_title: Text
    loading: Text
    compare_placeholder: Text  # what "Compare" says before the rows have been played


class HintRung(_Model):
    label: Text  # "A question", "The answer"
    threshold: int = Field(ge=1)  # evaluated runs needed before this rung opens


class Hints(_Model):
    heading: Text
    intro: Text
    runs_text: Text  # contains "{runs}", the learner's evaluated-run count
    rungs: list[HintRung]

    @field_validator("runs_text")
    @classmethod
    def _has_runs_placeholder(cls, text: str) -> str:
        if "{runs}" not in text:
            raise ValueError("must contain the placeholder {runs}")
        return text

    @field_validator("rungs")
    @classmethod
    def _two_rising_rungs(cls, rungs: list[HintRung]) -> list[HintRung]:
        if len(rungs) != 2:
            raise ValueError(f"needs exactly two rungs, got {len(rungs)}")
        if rungs[0].threshold >= rungs[1].threshold:
            raise ValueError(
                "rung 1 must open before rung 2: thresholds "
                f"{rungs[0].threshold} and {rungs[1].threshold}"
            )
        return rungs


class Gate(_Model):
    """Texts of "Check your understanding"; the progress figures come from the derived state."""

    heading: Text
    requirement: Text
    not_met: Text
    met: Text
    target_note: Text  # the target is the recording's best row, not a value written here
    cannot_close_prefix: Text  # followed by RecordingFacts.problem


class Takeaway(_Model):
    heading: Text
    label: Text
    help: Text
    default_line: Text
    save_label: Text
    max_chars: int = Field(ge=1, le=TAKEAWAY_MAX_CHARS_LIMIT)

    @model_validator(mode="after")
    def _default_fits(self) -> Takeaway:
        if len(self.default_line) > self.max_chars:
            raise ValueError(
                f"default_line is {len(self.default_line)} characters, over max_chars "
                f"{self.max_chars}"
            )
        return self


class OwnRow(_Model):
    label: Text
    placeholder: Text
    help: Text


class Lesson(_Model):
    id: Identifier
    track: Text
    kicker: Text
    title: Text
    summary: Text
    optional_note: Text
    gate_summary: Text
    prerequisite: Prerequisite
    sections: list[Section]
    predict: Predict
    hand: HandWork
    eps: Decimal = Field(gt=0)  # the switch's on value; off is 0
    tolerance: Decimal = Field(gt=0)
    hand_rows: list[list[int]]
    edge_row: list[int]
    number_fields: list[NumberField]
    numbers: Numbers
    slip_feedback: dict[str, Text]
    wrong_feedback: Text
    reading: Reading
    ablation: Ablation
    hints: Hints
    gate: Gate
    takeaway: Takeaway
    own_row: OwnRow

    @field_validator("eps", "tolerance", mode="before")
    @classmethod
    def _decimal_from_text(cls, value: object) -> object:
        # A TOML float would pass through binary floating point; the lesson states exact values.
        if not isinstance(value, str):
            raise ValueError('write it as a quoted decimal string, e.g. "0.001"')
        return value

    @field_validator("sections")
    @classmethod
    def _sections_in_order(cls, sections: list[Section]) -> list[Section]:
        ids = tuple(section.id for section in sections)
        if ids != SECTION_IDS:
            raise ValueError(f"needs sections {list(SECTION_IDS)} in that order, got {list(ids)}")
        return sections

    @field_validator("hand_rows")
    @classmethod
    def _rows_not_empty(cls, rows: list[list[int]]) -> list[list[int]]:
        if not rows or any(len(row) < 2 for row in rows):
            raise ValueError("needs at least one row, each of at least two numbers")
        return rows

    @field_validator("edge_row")
    @classmethod
    def _edge_row_has_zero_variance(cls, row: list[int]) -> list[int]:
        # The edge row exists to show the division by zero the epsilon prevents.
        if len(row) < 2 or len(set(row)) != 1:
            raise ValueError("must repeat one number (variance exactly zero), e.g. [4, 4, 4, 4]")
        return row

    @field_validator("slip_feedback")
    @classmethod
    def _known_slips(cls, feedback: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(feedback) - set(SLIPS))
        if unknown:
            raise ValueError(f"unknown slip names {unknown}; known: {list(SLIPS)}")
        return feedback

    @model_validator(mode="after")
    def _fields_cover_every_step(self) -> Lesson:
        _unique_ids("number_fields", [f.id for f in self.number_fields])
        for index, number_field in enumerate(self.number_fields):
            if number_field.row >= len(self.hand_rows):
                raise ValueError(
                    f"number_fields.{index}.row: {number_field.row} is not an index into "
                    f"hand_rows (which has {len(self.hand_rows)} rows)"
                )
        wanted = {(row, step) for row in range(len(self.hand_rows)) for step in NUMBER_STEPS}
        have = [(f.row, f.step) for f in self.number_fields]
        if len(have) != len(wanted) or set(have) != wanted:
            missing = sorted(wanted - set(have))
            raise ValueError(
                f"number_fields: needs one field per (row, step), {len(wanted)} in all; "
                f"got {len(have)}, missing {missing}"
            )
        return self

    @model_validator(mode="after")
    def _wrong_readings_point_at_edge_row(self) -> Lesson:
        edge = format_input_row(self.edge_row)
        for index, choice in enumerate(self.reading.choices):
            if not choice.correct and edge not in choice.feedback:
                raise ValueError(
                    f"reading.choices.{index}.feedback: a wrong reading's feedback must point "
                    f"at the edge row {edge}"
                )
        return self

    def field(self, field_id: str) -> NumberField | None:
        """The number field with this id, or None."""
        return next((f for f in self.number_fields if f.id == field_id), None)

    def section(self, section_id: str) -> Section:
        return next(s for s in self.sections if s.id == section_id)

    def reading_choice(self, choice_id: str) -> ReadingChoice | None:
        return next((c for c in self.reading.choices if c.id == choice_id), None)


def _unique_ids(where: str, ids: list[str]) -> None:
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{where}: ids must be unique, repeated: {duplicates}")


def parse_lesson(text: str, source: str = "<lesson>") -> Lesson:
    """Validate lesson TOML text. Raises LessonError naming `source` and each bad field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LessonError(f"{source}: not valid TOML: {exc}") from None
    try:
        return Lesson.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        raise LessonError(f"{source}: {problems}") from None


def _describe(error: object) -> str:
    assert isinstance(error, dict)
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    # Whole-lesson checks already start their message with the field they are about.
    return f"{where}: {message}" if where else message


def load_lesson(path: Path | None = None) -> Lesson:
    """The lesson at `path`, or the packaged content/d9.toml. Raises LessonError."""
    if path is None:
        return _packaged_lesson()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LessonError(f"{path}: cannot read the lesson file: {exc.strerror}") from None
    return parse_lesson(text, str(path))


@lru_cache(maxsize=1)
def _packaged_lesson() -> Lesson:
    resource = resources.files("normdive").joinpath("content", DEFAULT_LESSON_RESOURCE)
    return parse_lesson(resource.read_text(encoding="utf-8"), f"content/{DEFAULT_LESSON_RESOURCE}")
