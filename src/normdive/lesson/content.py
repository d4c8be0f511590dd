"""The lesson as data (content/d9.toml, whose comments say what each text is for), validated
with pydantic. load_lesson raises LessonError naming the file and each wrong field; unknown keys
are errors. Templates use str.format placeholders, each template's checked at load (the
*_FIELDS below); a counted one may be a table of plural forms (lesson/plurals.py)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from functools import lru_cache
from importlib import resources
from pathlib import Path
from string import Formatter
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from normdive.lesson import plurals
from normdive.lesson.plurals import Counted
from normdive.numeric.display import format_input_row
from normdive.numeric.targets import SLIPS
from normdive.recording.format import ROW_KEYS, RowKey

# The deepest stack the lab offers: a browser trains it in about a minute (docs/lab.md).
LAB_MAX_DEPTH = 8
DEFAULT_LESSON_RESOURCE = "d9.toml"
PREDICT_CHOICE_IDS = ("layer_norm", "residual")
SECTION_IDS = ("question", "predict", "try", "compare", "check")
NUMBER_STEPS = ("mean", "variance", "denominator")
READING_CHOICE_COUNT = 4
TAKEAWAY_MAX_CHARS_LIMIT = 2000
OUTCOME_IDS = ("learns", "partial", "chance")
OutcomeId = Literal["learns", "partial", "chance"]
# Each predict choice's answer is read from the row that keeps only that component.
COMPONENT_ROWS: dict[str, RowKey] = {"layer_norm": "layernorm_only", "residual": "residual_only"}

# Placeholders each kind of template may use (progress fills exactly these in).
BAND_FIELDS = ("learns_min", "chance_max", "chance_level", "chance_multiple", "vocab_size")
# The component that recovers more (in a tie, the first of COMPONENT_ROWS), then the other.
ANSWER_FIELDS = (
    "component",
    "row",
    "accuracy",
    "loss",
    "other_component",
    "other_row",
    "other_accuracy",
    "other_loss",
)
RUN_FIELDS = ("depth", "copy_length", "seed", "steps", "init")
ROW_COMPARE_FIELDS = ("row", "predicted", "actual", "accuracy", "loss", "exact_match", "step")
SHARE_FIELDS = ("count", "total", "share")

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
# Ids double as HTML form field names and event payload keys.
Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=40)]


class LessonError(ValueError):
    """The lesson file is missing, is not TOML, or does not validate; the message says where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def placeholders(template: str) -> set[str]:
    """The named placeholders of a str.format template. Raises ValueError for a malformed one
    (a lone brace) or a positional or indexed placeholder."""
    names: set[str] = set()
    for _literal, name, _spec, _conversion in Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"placeholder {{{name}}} must be a plain name such as {{row}}")
        names.add(name)
    return names


def _template(text: str, allowed: Iterable[str], required: Iterable[str] = ()) -> str:
    allowed_names, required_names = set(allowed), set(required)
    try:
        used = placeholders(text)
    except ValueError as exc:
        raise ValueError(f"is not a valid template: {exc}") from None
    unknown = sorted(used - allowed_names)
    if unknown:
        raise ValueError(
            f"uses unknown placeholder {{{unknown[0]}}}; allowed: "
            + ", ".join(f"{{{name}}}" for name in sorted(allowed_names))
            if allowed_names
            else f"uses placeholder {{{unknown[0]}}} but takes none"
        )
    missing = sorted(required_names - used)
    if missing:
        raise ValueError(f"must contain the placeholder {{{missing[0]}}}")
    return text


def _decimal_text(value: object) -> object:
    # A TOML float would pass through binary floating point; the lesson states exact values.
    if not isinstance(value, str):
        raise ValueError('write it as a quoted decimal string, e.g. "0.001"')
    return value


ExactDecimal = Annotated[Decimal, BeforeValidator(_decimal_text)]


class Choice(_Model):
    id: Identifier
    label: Text


class ReadingChoice(Choice):
    correct: bool
    feedback: Text


class NumberField(_Model):
    id: Identifier  # the form field's name and the key in a numbers_checked event
    row: int = Field(ge=0)  # index into Lesson.hand_rows
    step: Literal["mean", "variance", "denominator"]
    label: Text


class Section(_Model):
    id: Identifier
    number: Text
    title: Text
    paragraphs: list[Text]


class Prerequisite(_Model):
    id: Text
    title: Text
    locked_text: Text
    dev_note: Text


class Predict(_Model):
    heading: Text
    question: Text
    choices: list[Choice]
    prompt: Text
    locked_note: Text
    commit_label: Text
    committed_text: Text

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
    panel_title: Text
    computed_here: Text
    computed_by_server: Text
    switch_label: Text
    mean_step: Text
    variance_step: Text
    denominator_step: Text
    out_label: Text
    edge_heading: Text
    edge_text: Text
    edge_now_on: Text
    edge_now_off: Text
    summary_caption: Text
    table_summary: Text

    @model_validator(mode="after")
    def _templates(self) -> HandWork:
        _named("edge_text", self.edge_text, ("row",), ("row",))
        _named("summary_caption", self.summary_caption, ("where",), ("where",))
        return self


class Numbers(_Model):
    heading: Text
    intro: Text
    check_label: Text
    landed_text: Text
    all_landed_text: Text
    not_checked_text: Text


class Reading(_Model):
    heading: Text
    question: Text
    choices: list[ReadingChoice]
    prompt: Text
    lock_label: Text
    wrong_opening: Text

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
    initialisation_note: Text
    panel_title: Text
    player_placeholder: Text
    compare_placeholder: Text
    statement: Text
    initialisation_named: Text
    unavailable: Text
    predict_prompt: Text
    predict_label: Text
    prediction_prompt: Text
    committed_text: Text
    play_label: Text
    replay_label: Text
    playing_text: Text
    play_locked: Text
    final_heading: Text
    accuracy_label: Text
    loss_label: Text
    exact_match_label: Text
    full_accuracy_label: Text
    full_accuracy_value: Text
    never_full: Text
    gradients_heading: Text
    gradients_intro: Text
    gradients_first_label: Text
    gradients_later_label: Text
    gradients_scale_note: Text
    gradients_chart_label: Text
    gradients_placeholder: Text
    together_heading: Text
    together_label: Text
    together_row: Text

    @model_validator(mode="after")
    def _templates(self) -> Ablation:
        _template(self.statement, RUN_FIELDS, ("depth", "seed"))
        _template(self.initialisation_named, ("init",), ("init",))
        _template(self.play_locked, ("missing", "total"), ("missing",))
        _template(self.playing_text, ("row",), ("row",))
        _template(self.full_accuracy_value, ("step",), ("step",))
        _template(self.gradients_scale_note, ("low", "high"), ("low", "high"))
        _template(self.gradients_chart_label, ("step", "low", "high"), ("step",))
        _template(self.gradients_placeholder, ("missing", "total"), ("missing",))
        _template(self.together_label, ("rows",), ("rows",))
        _template(self.together_row, ("row", "accuracy"), ("row", "accuracy"))
        templates = (
            "statement",
            "initialisation_named",
            "play_locked",
            "playing_text",
            "full_accuracy_value",
            "gradients_scale_note",
            "gradients_chart_label",
            "gradients_placeholder",
            "together_label",
            "together_row",
        )
        for name in type(self).model_fields:
            if name not in templates:
                _template(getattr(self, name), ())
        return self


class HintRung(_Model):
    label: Text
    threshold: int = Field(ge=1)  # evaluated runs needed before this rung opens
    text: Text


class Hints(_Model):
    heading: Text
    intro: Text
    runs_text: Counted
    runs_meaning: Text
    rungs: list[HintRung]
    answer_tie: Text
    answer_unavailable: Text
    open_label: Text
    rung_waiting: Counted
    rung_ready: Text
    rung_after_earlier: Text
    answer_needs_predictions: Counted
    answer_also_needs_predictions: Counted

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
        try:
            _template(rungs[0].text, ())
        except ValueError as exc:
            raise ValueError(f"0.text: {exc}") from None
        try:
            _template(rungs[1].text, ANSWER_FIELDS, ("component", "accuracy", "other_accuracy"))
        except ValueError as exc:
            raise ValueError(f"1.text: {exc}") from None
        return rungs

    @model_validator(mode="after")
    def _templates(self) -> Hints:
        _named("answer_tie", self.answer_tie, ANSWER_FIELDS, ("accuracy",))
        _counted("runs_text", self.runs_text, "runs", ("runs",), ("runs",))
        _counted("rung_waiting", self.rung_waiting, "threshold", ("threshold", "more"), ("more",))
        _named("rung_after_earlier", self.rung_after_earlier, ("earlier",), ("earlier",))
        for name in ("answer_needs_predictions", "answer_also_needs_predictions"):
            _counted(name, getattr(self, name), "rows", ("rows",), ("rows",))
        _named("answer_unavailable", self.answer_unavailable, ())
        _named("runs_meaning", self.runs_meaning, ())
        return self

    def runs_sentence(self, runs: int) -> str:
        """ "You have run it 1 time." / "... 4 times.", in the current locale's plural form."""
        return plurals.counted(self.runs_text, runs, runs=runs)


class Gate(_Model):
    """Texts of "Check your understanding"; the progress figures come from the derived state."""

    heading: Text
    requirement: Text
    not_met: Text
    met: Text
    target_note: Text
    cannot_close_prefix: Text
    closed_on: Text

    @model_validator(mode="after")
    def _templates(self) -> Gate:
        _named("closed_on", self.closed_on, ("file", "digest"), ("file", "digest"))
        return self


class Takeaway(_Model):
    heading: Text
    label: Text
    help: Text
    default_line: Text
    save_label: Text
    not_saved_text: Text
    saved_text: Text
    cleared_text: Text
    max_chars: int = Field(ge=1, le=TAKEAWAY_MAX_CHARS_LIMIT)
    # Filled by the server's refusal and by page.js as the learner types.
    too_long: Text
    stale: Text
    stale_cleared: Text
    merging_text: Text
    composed_line: Text
    composed_line_tie: Text

    @model_validator(mode="after")
    def _default_fits(self) -> Takeaway:
        if len(self.default_line) > self.max_chars:
            raise ValueError(
                f"default_line is {len(self.default_line)} characters, over max_chars "
                f"{self.max_chars}"
            )
        _named(
            "composed_line",
            self.composed_line,
            ANSWER_FIELDS + RUN_FIELDS,
            ("component",),
        )
        _named("composed_line_tie", self.composed_line_tie, ANSWER_FIELDS + RUN_FIELDS)
        _named("stale", self.stale, ("saved",), ("saved",))
        _named("stale_cleared", self.stale_cleared, ())
        _named("too_long", self.too_long, ("length", "max"), ("length", "max"))
        return self


class Outcome(_Model):
    """One of the three outcomes a learner predicts for a row."""

    id: OutcomeId
    label: Text
    predicted: Text
    actual: Text
    band: Text

    @model_validator(mode="after")
    def _band_template(self) -> Outcome:
        _named("band", self.band, BAND_FIELDS)
        return self


class Bands(_Model):
    """The outcome bands of a row's final held-out accuracy (progress.ablation.row_band): learns
    from learns_min_accuracy, chance up to chance_max_multiple / vocab_size, partial between."""

    intro: Text
    learns_min_accuracy: ExactDecimal = Field(gt=0, le=1)
    chance_max_multiple: ExactDecimal = Field(ge=1)


class RowText(_Model):
    """One ablation row as the page names it. The key is the recording's."""

    key: RowKey
    label: Text
    description: Text


class Compare(_Model):
    """The compare section's sentences. Each is a template; progress picks one and fills it."""

    opening_waiting: Text
    opening_waiting_one: Text
    opening_agrees: Text
    opening_differs: Text
    opening_tie: Text
    opening_unavailable: Text
    row_unpredicted: Text
    row_waiting: Text
    row_agrees: Counted
    row_differs: Counted
    reading_none: Text
    reading_wrong: Text
    reading_right_first: Text
    reading_right_after: Counted

    @model_validator(mode="after")
    def _templates(self) -> Compare:
        opening = ("predicted", *ANSWER_FIELDS)
        _named("opening_waiting", self.opening_waiting, ("predicted", "row", "other_row"))
        _named("opening_waiting_one", self.opening_waiting_one, ("predicted", "row"))
        _named("opening_agrees", self.opening_agrees, opening, ("component",))
        _named("opening_differs", self.opening_differs, opening, ("component",))
        _named("opening_tie", self.opening_tie, opening)
        _named("opening_unavailable", self.opening_unavailable, ("predicted", "problem"))
        _named("row_unpredicted", self.row_unpredicted, ("row",), ("row",))
        _named("row_waiting", self.row_waiting, ("row", "predicted"), ("row",))
        for name in ("row_agrees", "row_differs"):
            _counted(name, getattr(self, name), "step", ROW_COMPARE_FIELDS, ("row", "actual"))
        for name in ("reading_none", "reading_wrong", "reading_right_first"):
            _named(name, getattr(self, name), ())
        _counted("reading_right_after", self.reading_right_after, "locks", ("locks",))
        return self


class Aggregate(_Model):
    """How all learners of this server predicted: totals only, hidden below min_learners."""

    heading: Text
    intro: Text
    opening_label: Text
    min_learners: int = Field(ge=1)
    hidden: Counted
    hidden_again: Text
    share: Text
    committed: Counted

    @model_validator(mode="after")
    def _templates(self) -> Aggregate:
        _counted("hidden", self.hidden, "minimum", ("minimum",), ("minimum",))
        _named("share", self.share, SHARE_FIELDS, ("count",))
        _counted("committed", self.committed, "count", ("count",), ("count",))
        return self


class RecordingProblems(_Model):
    """One learner-facing sentence per reason the recording's reader gives
    (normdive.recording.reader.ProblemReason); a missing reason is a load error."""

    missing: Text
    unreadable: Text
    bad_json: Text
    unknown_version: Text
    invalid: Text
    no_ablation_rows: Text

    def sentence(self, reason: str) -> str:
        """The sentence for `reason`; an unknown reason reads as an unusable file."""
        text = getattr(self, reason, None) if reason in type(self).model_fields else None
        return text if isinstance(text, str) else self.invalid


class LabOffered(_Model):
    depths: list[Annotated[int, Field(ge=1, le=LAB_MAX_DEPTH)]] = Field(min_length=1)
    eps: list[ExactDecimal] = Field(min_length=1)
    inits: list[Identifier] = Field(min_length=1)
    seeds: list[Annotated[int, Field(ge=0, lt=2**32)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> LabOffered:
        for name in ("depths", "eps", "inits", "seeds"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: each value once, got {values}")
        if any(value < 0 for value in self.eps):
            raise ValueError(f"eps: 0 or more, got {self.eps}")
        return self


class LabText(_Model):
    """The panel "Train one yourself" and what it offers (filled by normdive.progress.lab)."""

    heading: Text
    intro: Text
    config_line: Text
    open_label: Text
    loading: Text
    needs_js: Text
    page_label: Text
    missing: Text
    unusable: Text
    locked: Text
    back_label: Text
    pick_legend: Text
    depth_label: Text
    rows_label: Text
    eps_label: Text
    init_label: Text
    seed_label: Text
    predict_legend: Text
    commit_label: Text
    commit_note: Text
    # Whole sentences per outcome (verdicts: predicted, then reached), never a slotted clause.
    committed: dict[OutcomeId, Text]
    verdicts: dict[OutcomeId, dict[OutcomeId, Text]]
    open_run: Text
    train_label: Text
    stop_label: Text
    resume_label: Text
    progress_label: Text
    progress_text: Text
    hidden_text: Text
    stopped_text: Text
    milestone: Text
    chart_label: Text
    chart_legend: Text
    result_heading: Text
    result_figures: Text
    agrees: Counted
    differs: Counted
    above: Text
    below: Text
    agreement_points: ExactDecimal = Field(gt=0)
    no_cell: Text
    trimmed: Text
    runs_heading: Text
    run_untrained: Text
    run_done: Text
    too_many: Counted
    grid_caption: Text
    grid_none: Text
    instructor_heading: Text
    offered: LabOffered

    @model_validator(mode="after")
    def _templates(self) -> LabText:
        _named("config_line", self.config_line, ("config",), ("config",))
        _every_outcome("committed", self.committed)
        for outcome, sentence in self.committed.items():
            _named(f"committed.{outcome}", sentence, ("config",), ("config",))
        _every_outcome("verdicts", self.verdicts)
        for predicted, by_actual in self.verdicts.items():
            _every_outcome(f"verdicts.{predicted}", by_actual)
            for actual, sentence in by_actual.items():
                _named(f"verdicts.{predicted}.{actual}", sentence, ())
        _named("open_run", self.open_run, ("config",), ("config",))
        _named("progress_text", self.progress_text, ("step", "steps", "rate", "left"), ("step",))
        _named("stopped_text", self.stopped_text, ("step",), ("step",))
        _named("milestone", self.milestone, ("percent",), ("percent",))
        _named("result_figures", self.result_figures, ("step", "accuracy", "loss"))
        _counted("agrees", self.agrees, "points", ("points", "live", "recorded"), ("points",))
        differs = ["points", "direction", "step", "live", "recorded", "tolerance"]
        differs += ["end_live", "end_recorded"]
        _counted("differs", self.differs, "points", differs, ("points", "step"))
        _named("trimmed", self.trimmed, ("count", "offered"), ("count", "offered"))
        _named("run_untrained", self.run_untrained, ("config", "predicted"), ("config",))
        run_done = ("config", "predicted", "actual", "accuracy")
        _named("run_done", self.run_done, run_done, ("config",))
        _counted("too_many", self.too_many, "count", ("count",))
        _named("grid_caption", self.grid_caption, ("init", "seeds"), ("init",))
        return self

    def committed_sentence(self, predicted: str, config: str) -> str:
        """What a run committed with the outcome `predicted` says ("" for an unknown one)."""
        sentence = next((s for key, s in self.committed.items() if key == predicted), "")
        return sentence.format(config=config)

    def verdict(self, predicted: str, actual: str) -> str:
        """The prediction beside what the run did ("" for an unknown outcome)."""
        by_actual = next((v for key, v in self.verdicts.items() if key == predicted), {})
        return next((s for key, s in by_actual.items() if key == actual), "")


class RerunConfig(_Model):
    """Where the re-run trains the four rows (the lab grid's base supplies the rest)."""

    depth: Annotated[int, Field(ge=1, le=LAB_MAX_DEPTH)]
    eps: ExactDecimal
    init: Identifier
    seed: Annotated[int, Field(ge=0, lt=2**32)]


class RerunText(_Model):
    """The panel "Re-run the ablation on this device" (filled by normdive.progress.rerun)."""

    heading: Text
    intro: Text
    open_label: Text
    loading: Text
    needs_js: Text
    page_label: Text
    locked: Text
    not_played: Text
    smaller: Text
    stack: Text
    start_label: Text
    continue_label: Text
    again_label: Text
    stop_label: Text
    resume_label: Text
    progress_label: Text
    progress_text: Text
    hidden_text: Text
    stopped_text: Text
    row_started: Text
    row_finished: Text
    restarted: Text
    elsewhere: Text
    kept_rows: Text
    chart_label: Text
    chart_legend: Text
    table_caption: Text
    column_row: Text
    column_predicted: Text
    column_recording: Text
    column_small: Text
    column_device: Text
    not_yet: Text
    no_prediction: Text
    outcome_cell: Text
    same_order: Text
    all_same: Text
    differs: Text
    differs_pair: Text
    # Between the clauses of same_order's {relations} and differs' {pairs}; spaces kept.
    clause_separator: Annotated[str, StringConstraints(min_length=1)]
    above: Text
    level: Text
    level_points: ExactDecimal = Field(ge=0)
    history_heading: Text
    history_line: Text
    pairs_differ: Counted
    instructor_heading: Text
    config: RerunConfig

    @model_validator(mode="after")
    def _templates(self) -> RerunText:
        _named("smaller", self.smaller, ("here", "recorded"), ("here", "recorded"))
        stack = ("depth", "d_model", "copy_length", "steps", "batch_size")
        _named("stack", self.stack, stack, stack)
        progress = ("row", "rows", "name", "step", "steps", "left")
        _named("progress_text", self.progress_text, progress, ("row", "step"))
        _named("stopped_text", self.stopped_text, ("step", "name"), ("step",))
        _named("row_started", self.row_started, ("row", "rows", "name"), ("name",))
        _named("row_finished", self.row_finished, ("name", "accuracy"), ("name", "accuracy"))
        _named("restarted", self.restarted, ("name", "step"), ("name", "step"))
        _named("elsewhere", self.elsewhere, ("name", "step"), ("name",))
        _named("kept_rows", self.kept_rows, ("done", "rows"), ("done",))
        _named("outcome_cell", self.outcome_cell, ("band", "accuracy"), ("accuracy",))
        _named("same_order", self.same_order, ("relations",), ("relations",))
        _named("differs", self.differs, ("pairs",), ("pairs",))
        pair = ("device", "recorded")
        _named("differs_pair", self.differs_pair, pair, pair)
        _named("above", self.above, ("high", "low"), ("high", "low"))
        _named("level", self.level, ("one", "other"), ("one", "other"))
        _named("history_line", self.history_line, ("number", "finals", "ranking"), ("finals",))
        _counted("pairs_differ", self.pairs_differ, "count", ("count",))
        return self


class SweepText(_Model):
    """The panel "Does it hold at other depths?" and the compare section's line about them
    (filled by normdive.progress.sweep); none names a result."""

    heading: Text
    intro_played: Text
    intro: Text
    open_label: Text
    page_label: Text
    loading: Text
    missing: Text
    unusable: Text
    locked: Text
    grid_caption: Text
    how_to_read: Text
    cell_spread: Text
    cell_one_seed: Text
    cell_same: Text
    cell_label: Text
    depth_seeds: Text
    back_label: Text
    here_label: Text
    player_heading: Text
    player_note: Text
    other_seed: Text
    player_note_alone: Text
    recovers_more: Text
    neither_more: Text
    seeds_disagree: Text
    changes: Text
    same_everywhere: Text
    init_changes: Text
    init_same: Text
    trimmed: Text
    compare_line: Text
    init_labels: dict[str, Text]

    @model_validator(mode="after")
    def _templates(self) -> SweepText:
        _named("grid_caption", self.grid_caption, ("init",), ("init",))
        _named("intro_played", self.intro_played, ("depth", "init", "seeds"), ("depth", "seeds"))
        _named("cell_spread", self.cell_spread, ("low", "high"), ("low", "high"))
        _named("depth_seeds", self.depth_seeds, ("seeds",), ("seeds",))
        _named("cell_label", self.cell_label, ("row", "depth", "init"), ("row", "depth"))
        _named("player_heading", self.player_heading, ("row", "depth", "init", "seed"))
        _named("player_note", self.player_note, ("steps", "others"))
        _named("player_note_alone", self.player_note_alone, ("steps",))
        _named("other_seed", self.other_seed, ("accuracy", "seed"), ("accuracy", "seed"))
        _named("recovers_more", self.recovers_more, ("init", "component", "depths"))
        _named("neither_more", self.neither_more, ("init", "depths"), ("depths",))
        _named("seeds_disagree", self.seeds_disagree, ("init", "depths"), ("depths",))
        _named("changes", self.changes, ("init", "before", "after"), ("before", "after"))
        _named("same_everywhere", self.same_everywhere, ("init",))
        _named("init_changes", self.init_changes, ("depths",), ("depths",))
        _named("init_same", self.init_same, ())
        _named("trimmed", self.trimmed, ("depth", "seeds"), ("depth", "seeds"))
        _named("compare_line", self.compare_line, ("predicted", "init", "depths"), ("depths",))
        for name in (
            *("heading", "intro", "open_label", "page_label", "loading", "missing"),
            "unusable",
            *("cell_one_seed", "cell_same", "here_label"),
        ):
            _named(name, getattr(self, name), ())
        return self


class OwnRow(_Model):
    label: Text
    placeholder: Text
    help: Text
    variance_hidden: Text


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
    rows: list[RowText]
    outcomes: list[Outcome]
    bands: Bands
    components: dict[str, Text]
    init_names: dict[str, Text]
    compare: Compare
    aggregate: Aggregate
    recording_problems: RecordingProblems
    sweep: SweepText
    lab: LabText
    rerun: RerunText

    @field_validator("eps", "tolerance", mode="before")
    @classmethod
    def _decimal_from_text(cls, value: object) -> object:
        return _decimal_text(value)

    @field_validator("rows")
    @classmethod
    def _the_recordings_rows(cls, rows: list[RowText]) -> list[RowText]:
        _each_once("rows", [row.key for row in rows], ROW_KEYS, "needs one row for each of")
        return rows

    @field_validator("outcomes")
    @classmethod
    def _three_outcomes(cls, outcomes: list[Outcome]) -> list[Outcome]:
        _each_once(
            "outcomes", [outcome.id for outcome in outcomes], OUTCOME_IDS, "needs the outcomes"
        )
        return outcomes

    @field_validator("components")
    @classmethod
    def _a_name_per_component(cls, components: dict[str, str]) -> dict[str, str]:
        if sorted(components) != sorted(PREDICT_CHOICE_IDS):
            raise ValueError(
                f"needs a name for each of {list(PREDICT_CHOICE_IDS)}, got {sorted(components)}"
            )
        return components

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

    @model_validator(mode="after")
    def _rerun_is_offered(self) -> Lesson:
        """At one of the lab's offered points, so the grid can hold its cells."""
        offered, config = self.lab.offered, self.rerun.config
        for name, value, among in (
            ("depth", config.depth, offered.depths),
            ("eps", config.eps, offered.eps),
            ("init", config.init, offered.inits),
            ("seed", config.seed, offered.seeds),
        ):
            if value not in among:
                raise ValueError(f"rerun.config.{name}: {value} is not among lab.offered's {among}")
        return self

    def field(self, field_id: str) -> NumberField | None:
        return next((f for f in self.number_fields if f.id == field_id), None)

    def section(self, section_id: str) -> Section:
        return next(s for s in self.sections if s.id == section_id)

    def reading_choice(self, choice_id: str) -> ReadingChoice | None:
        return next((c for c in self.reading.choices if c.id == choice_id), None)

    def row(self, key: str) -> RowText | None:
        return next((r for r in self.rows if r.key == key), None)

    def outcome(self, outcome_id: str) -> Outcome | None:
        return next((o for o in self.outcomes if o.id == outcome_id), None)

    def predict_choice(self, choice_id: str) -> Choice | None:
        return next((c for c in self.predict.choices if c.id == choice_id), None)


def _every_outcome(name: str, table: Mapping[OutcomeId, object]) -> None:
    missing = [outcome for outcome in OUTCOME_IDS if outcome not in table]
    if missing:
        raise ValueError(f"{name}: give a sentence for each outcome; missing {missing[0]}")


def _named(name: str, text: str, allowed: Iterable[str], required: Iterable[str] = ()) -> None:
    """Check one template, naming the field in the error."""
    try:
        _template(text, allowed, required)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _counted(
    name: str,
    text: str | Mapping[plurals.Category, str],
    count: str,
    allowed: Iterable[str],
    required: Iterable[str] = (),
) -> None:
    """Check a counted text (lesson/plurals.py), naming the field and the form in the error:
    each form may use `allowed`; `other` must hold every `required` placeholder, the other
    forms all but `count` itself, which a form may spell out ("once", "مرتين")."""
    for category, form in plurals.forms(text).items():
        needed = set(required) - ({count} if category != plurals.OTHER else set())
        where = name if isinstance(text, str) else f"{name}.{category}"
        _named(where, form, allowed, needed)


def _unique_ids(where: str, ids: Sequence[str]) -> None:
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"{where}: ids must be unique, repeated: {duplicates}")


def _each_once(where: str, ids: list[str], expected: Sequence[str], needs: str) -> None:
    """Raise ValueError unless `ids` are `expected`, each once, in any order."""
    _unique_ids(where, ids)
    if sorted(ids) != sorted(expected):
        raise ValueError(f"{needs} {list(expected)}, got {ids}")


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
