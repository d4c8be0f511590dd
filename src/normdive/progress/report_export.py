"""The instructor view's figures as files: one row per learner (CSV or JSON; the columns are
docs/instructor.md's) and the pool's aggregate as JSON. Pure but for write_export, which takes
the summaries and the text to write of them from above (the store, a course's roster)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from normdive.i18n.catalogues import N_, current_locale, gettext
from normdive.i18n.locales import DEFAULT_LOCALE
from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.progress.report import (
    STEP_LABELS,
    STEPS,
    LearnerSummary,
    PoolReport,
    PoolReportBuilder,
)

# A spreadsheet runs a cell starting so as a formula (CSV injection): it gets an apostrophe.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Where a reader that ignores quotes may split a cell (";" in Europe's Excel, a tab, ...).
SEPARATORS = (",", ";", "\t", "|")
_FORMULA_AFTER_SEPARATOR = re.compile(
    "([" + re.escape("".join(SEPARATORS)) + "])(?=[" + re.escape("".join(FORMULA_STARTS)) + "])"
)


def columns(lesson: Lesson) -> list[str]:
    names = ["learner", *(f"{step}_at" for step in STEPS), "stopped_after", "events"]
    for number in lesson.number_fields:
        names += [f"{number.id}_{part}" for part in ("attempts", "landed", "format_errors")]
        names.append(f"{number.id}_slips")
    names += ["opening_prediction", "reading_locks", "reading_choices", "reading_right"]
    names += [f"{row.key}_prediction" for row in lesson.rows]
    names += ["rows_played", "hint_rungs", "runs_before_gate", "gate_closed"]
    return names


_COLUMN_WORDS = {
    "learner": N_("learner"),
    "stopped_after": N_("stopped after"),
    "events": N_("events"),
    "opening_prediction": N_("opening prediction"),
    "reading_locks": N_("reading locks"),
    "reading_choices": N_("readings locked"),
    "reading_right": N_("right reading locked"),
    "rows_played": N_("rows played"),
    "hint_rungs": N_("hints opened"),
    "runs_before_gate": N_("runs before the gate"),
    "gate_closed": N_("gate closed"),
    # The course roster's columns, which the web app adds to a course's CSV.
    "roster_member": N_("roster member"),
    "roster_status": N_("roster status"),
    "roster_roles": N_("roster roles"),
    "name": N_("name"),
    "email": N_("email"),
}
_FIELD_PARTS = {
    "attempts": N_("%(field)s: attempts"),
    "landed": N_("%(field)s: landed"),
    "format_errors": N_("%(field)s: format errors"),
    "slips": N_("%(field)s: slips"),
}
_STEP_AT = N_("%(step)s: when")
_ROW_PREDICTION = N_("%(row)s: prediction")


def headers(names: list[str], lesson: Lesson) -> list[str]:
    """Each column's header in the current locale: in English its name, else its words."""
    if current_locale() == DEFAULT_LOCALE:
        return list(names)
    text = localized(lesson)
    words: dict[str, str] = {name: gettext(word) for name, word in _COLUMN_WORDS.items()}
    for step in STEPS:
        words[f"{step}_at"] = gettext(_STEP_AT) % {"step": gettext(STEP_LABELS[step])}
    for number in text.number_fields:
        for part, template in _FIELD_PARTS.items():
            words[f"{number.id}_{part}"] = gettext(template) % {"field": number.label}
    for row in text.rows:
        words[f"{row.key}_prediction"] = gettext(_ROW_PREDICTION) % {"row": row.label}
    return [words.get(name, name) for name in names]


def timestamp(moment: datetime | None) -> str:
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _slips(slips: Mapping[str, int]) -> str:
    ordered = sorted(slips.items(), key=lambda item: (-item[1], item[0]))
    return ";".join(f"{name}:{count}" for name, count in ordered)


def record(summary: LearnerSummary, lesson: Lesson) -> dict[str, str]:
    """One learner's row, by column name, every value a string."""
    values = {"learner": summary.learner_id}
    values |= {f"{step}_at": timestamp(summary.reached.get(step)) for step in STEPS}
    values["stopped_after"] = summary.stopped_after or ""
    values["events"] = str(summary.events)
    for number in lesson.number_fields:
        tally = summary.fields[number.id]
        values[f"{number.id}_attempts"] = str(tally.attempts)
        values[f"{number.id}_landed"] = _flag(tally.landed)
        values[f"{number.id}_format_errors"] = str(tally.format_errors)
        values[f"{number.id}_slips"] = _slips(tally.slips)
    values["opening_prediction"] = summary.opening or ""
    values["reading_locks"] = str(len(summary.reading_choices))
    values["reading_choices"] = ";".join(summary.reading_choices)
    values["reading_right"] = _flag(summary.reading_right)
    for row in lesson.rows:
        values[f"{row.key}_prediction"] = summary.row_predictions.get(row.key, "")
    values["rows_played"] = ";".join(r.key for r in lesson.rows if r.key in summary.rows_played)
    values["hint_rungs"] = ";".join(str(rung) for rung in sorted(summary.rungs_opened))
    values["runs_before_gate"] = str(summary.runs_before_gate)
    values["gate_closed"] = _flag("gate_closed" in summary.reached)
    return values


def spreadsheet_safe(value: str) -> str:
    """An apostrophe before a formula start, at the head or after a separator (OWASP)."""
    safe = _FORMULA_AFTER_SEPARATOR.sub(r"\1'", value)
    return f"'{safe}" if safe.startswith(FORMULA_STARTS) else safe


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return timestamp(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_plain(item) for item in value]
    return value


def aggregate(report: PoolReport, beside: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The pool's figures as JSON values, with `beside`'s (the re-runs') under their keys."""
    plain: dict[str, Any] = _plain(dataclasses.asdict(report))
    return {**plain, **_plain(beside or {})}


def json_chunks(summaries: Iterable[LearnerSummary], lesson: Lesson) -> Iterator[str]:
    """The per-learner file as JSON: a list of records, one learner a line."""
    yield "["
    for index, summary in enumerate(summaries):
        yield ",\n" if index else "\n"
        yield json.dumps(record(summary, lesson), ensure_ascii=False)
    yield "\n]\n"


def aggregate_path_for(output: Path) -> Path:
    return output.with_name(f"{output.stem}.aggregate.json")


Chunks = Callable[[Iterable[LearnerSummary]], Iterable[str]]


@dataclass(frozen=True)
class Exported:
    aggregate_path: Path
    report: PoolReport


def write_export(
    output: Path,
    summaries: Iterable[LearnerSummary],
    chunks: Chunks,
    builder: PoolReportBuilder,
    beside: Mapping[str, Any] | None = None,
) -> Exported:
    """Write the per-learner file, adding each summary to `builder`, then the aggregate beside
    it. Raises OSError (naming the file) or what reading the summaries raises."""

    def counted() -> Iterator[LearnerSummary]:
        for summary in summaries:
            builder.add(summary)
            yield summary

    with output.open("w", encoding="utf-8", newline="") as file:
        for chunk in chunks(counted()):
            file.write(chunk)
    figures = builder.report()
    summary_path = aggregate_path_for(output)
    summary_path.write_text(
        json.dumps(aggregate(figures, beside), indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return Exported(summary_path, figures)
