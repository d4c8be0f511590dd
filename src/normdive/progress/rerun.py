"""The re-run, "Re-run the ablation on this device": the learner's browser trains the lesson's
four rows in order at lesson.rerun.config, each finished row kept as an event, and the rankings
are compared (docs/lab.md, "The re-run of the ablation"). It never changes the gate."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from normdive.i18n.catalogues import N_, gettext
from normdive.lesson.content import Lesson
from normdive.lesson.plurals import counted
from normdive.progress.ablation import row_band
from normdive.progress.actions import Action, Conflict, Invalid, unknown_row_message
from normdive.progress.events import Event, EventKind
from normdive.progress.lab import ROW_SWITCHES, Figures, LabChoice, figure, read_result

# Sets a learner keeps (four rows with their curves each): bounds one learner's events.
MAX_RERUNS = 20

NOT_THIS_SET = N_("Re-run {number} is not the one being trained now (that is re-run {open}).")
NOT_THIS_ROW = N_("The re-run trains its rows in order: {next} comes next, not {row}.")
ALREADY_KEPT = N_("{row} is kept already in this re-run; its figures stay as they were.")
TOO_MANY_RERUNS = N_("You have re-run the ablation {count} times, as many as are kept.")

Relation = Literal["above", "level", "below"]
# A gap under this is float noise: 0.50 - 0.48 is 2.0000000000000018 points.
GAP_NOISE_POINTS = 1e-9


@dataclass(frozen=True)
class RerunRow:
    key: str
    final: Figures
    outcome: str  # the final accuracy's band
    curve: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Rerun:
    number: int
    rows: tuple[RerunRow, ...]  # finished, in the lesson's order

    def row(self, key: str) -> RerunRow | None:
        return next((row for row in self.rows if row.key == key), None)

    def finals(self) -> dict[str, float]:
        return {row.key: row.final.heldout_accuracy for row in self.rows}


@dataclass(frozen=True)
class Pair:
    first: str  # before `second` in the lesson
    second: str
    device: Relation  # `first` against `second`
    recorded: Relation

    @property
    def agrees(self) -> bool:
        return self.device == self.recorded


def row_keys(lesson: Lesson) -> tuple[str, ...]:
    return tuple(row.key for row in lesson.rows)


def rerun_choice(lesson: Lesson, key: str) -> LabChoice:
    config = lesson.rerun.config
    layernorm, residual = ROW_SWITCHES[key]
    return LabChoice(
        depth=config.depth,
        layernorm=layernorm,
        residual=residual,
        eps=float(config.eps) if layernorm else None,
        init=config.init,
        seed=config.seed,
    )


def _row(payload: Mapping[str, Any]) -> RerunRow | None:
    """None for a row this version cannot read."""
    final = payload.get("final")
    if LabChoice.from_json(payload.get("config") or {}) is None or not isinstance(final, Mapping):
        return None
    figures = Figures(
        int(final.get("step", 0)),
        figure(final.get("heldout_loss")),
        figure(final.get("heldout_accuracy")),
    )
    curve = tuple(payload.get("curve") or ())
    return RerunRow(str(payload.get("row")), figures, str(payload.get("outcome")), curve)


def reruns(events: Iterable[Event]) -> tuple[Rerun, ...]:
    """The learner's re-runs, oldest first; a row's first kept figures count."""
    sets: dict[int, list[RerunRow]] = {}
    for event in events:
        if event.kind is not EventKind.RERUN_ROW_FINISHED:
            continue
        number = event.payload.get("rerun")
        row = _row(event.payload)
        if not isinstance(number, int) or row is None:
            continue
        rows = sets.setdefault(number, [])
        if all(kept.key != row.key for kept in rows):
            rows.append(row)
    return tuple(Rerun(number, tuple(sets[number])) for number in sorted(sets))


def complete(rerun: Rerun, lesson: Lesson) -> bool:
    return {row.key for row in rerun.rows} >= set(row_keys(lesson))


def next_row(sets: Sequence[Rerun], lesson: Lesson) -> tuple[int, str]:
    """The set being trained (or the next to begin, after a finished one) and its next row."""
    keys = row_keys(lesson)
    if sets and not complete(sets[-1], lesson):
        last = sets[-1]
        return last.number, next(key for key in keys if last.row(key) is None)
    return (sets[-1].number + 1 if sets else 1), keys[0]


def finish_rerun_row(
    sets: Sequence[Rerun],
    lesson: Lesson,
    number: int,
    row: str,
    text: str,
    chance_level: float,
    steps: int,
) -> Action:
    """Keep row `row` of re-run `number` once, as the set's next row; Conflict / Invalid else."""
    open_number, expected = next_row(sets, lesson)
    labels: dict[str, str] = {r.key: r.label for r in lesson.rows}
    if row not in labels:
        raise Invalid(unknown_row_message(row))
    if number != open_number:
        raise Conflict(gettext(NOT_THIS_SET).format(number=number, open=open_number))
    if row != expected:
        kept = any(s.number == number and s.row(row) for s in sets)
        problem = ALREADY_KEPT if kept else NOT_THIS_ROW
        raise Conflict(gettext(problem).format(row=labels[row], next=labels[expected]))
    if number > MAX_RERUNS:
        raise Conflict(gettext(TOO_MANY_RERUNS).format(count=MAX_RERUNS))
    final, curve = read_result(text, steps)
    choice = rerun_choice(lesson, row)
    payload = {
        "rerun": number,
        "row": row,
        "config": choice.to_json(),
        "final": final,
        "curve": curve,
        "outcome": row_band(figure(final["heldout_accuracy"]), lesson, chance_level),
    }
    return EventKind.RERUN_ROW_FINISHED, payload


def relation(a: float, b: float, level_points: Decimal) -> Relation:
    """`a` against `b`, level within `level_points`; non-finite is 0 (it learned nothing)."""
    a, b = (x if math.isfinite(x) else 0.0 for x in (a, b))
    gap = (a - b) * 100
    if abs(gap) <= float(level_points) + GAP_NOISE_POINTS:
        return "level"
    return "above" if gap > 0 else "below"


def pairs(
    device: Mapping[str, float],
    recorded: Mapping[str, float],
    keys: Sequence[str],
    level_points: Decimal,
) -> tuple[Pair, ...]:
    return tuple(
        Pair(
            a,
            b,
            relation(device[a], device[b], level_points),
            relation(recorded[a], recorded[b], level_points),
        )
        for a, b in itertools.combinations(keys, 2)
    )


def ranking_matches(
    device: Mapping[str, float],
    recorded: Mapping[str, float],
    keys: Sequence[str],
    level_points: Decimal,
) -> bool:
    return all(pair.agrees for pair in pairs(device, recorded, keys, level_points))


def _phrase(lesson: Lesson, first: str, second: str, how: Relation) -> str:
    labels: dict[str, str] = {row.key: row.label for row in lesson.rows}
    text = lesson.rerun
    if how == "level":
        return text.level.format(one=labels[first], other=labels[second])
    high, low = (first, second) if how == "above" else (second, first)
    return text.above.format(high=labels[high], low=labels[low])


def order_sentences(
    lesson: Lesson, device: Mapping[str, float], recorded: Mapping[str, float]
) -> tuple[str, ...]:
    """The adjacent pairs (in the recording's order) the device agrees on, those it does not."""
    text = lesson.rerun
    keys = row_keys(lesson)
    found = {(p.first, p.second): p for p in pairs(device, recorded, keys, text.level_points)}
    by_recording = sorted(keys, key=lambda key: -_shown(recorded[key]))
    agreeing = []
    for a, b in itertools.pairwise(by_recording):
        pair = found.get((a, b)) or found[(b, a)]
        if pair.agrees:
            agreeing.append(_phrase(lesson, pair.first, pair.second, pair.recorded))
    joined = text.clause_separator.join
    sentences = [text.same_order.format(relations=joined(agreeing))] if agreeing else []
    differing = [pair for pair in found.values() if not pair.agrees]
    if differing:
        told = [
            text.differs_pair.format(
                device=_phrase(lesson, pair.first, pair.second, pair.device),
                recorded=_phrase(lesson, pair.first, pair.second, pair.recorded),
            )
            for pair in differing
        ]
        sentences.append(text.differs.format(pairs=joined(told)))
        sentences.append(counted(text.pairs_differ, len(differing), count=len(differing)))
    else:
        sentences.append(text.all_same)
    return tuple(sentences)


def _shown(accuracy: float) -> float:
    return accuracy if math.isfinite(accuracy) else 0.0


__all__ = [
    "MAX_RERUNS",
    "Pair",
    "Rerun",
    "RerunRow",
    "complete",
    "finish_rerun_row",
    "next_row",
    "order_sentences",
    "pairs",
    "ranking_matches",
    "relation",
    "rerun_choice",
    "reruns",
    "row_keys",
]
