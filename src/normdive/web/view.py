"""What one render of the lesson page needs, gathered in one place (pure: no I/O).

The derived LessonState says what the learner has done; this module adds what the page
computes for display (the hand rows' steps at the switch's state, the learner's own row) and
what a refused form carried, so a learner never loses what they typed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from normdive.lesson.content import Lesson
from normdive.numeric.display import format_input_row
from normdive.numeric.layernorm import LayerNormSteps, layer_norm_steps
from normdive.numeric.rows import RowError, parse_row
from normdive.progress.state import LessonState

# The switch's two states in the query string of GET / (the no-JavaScript switch).
EPS_ON = "on"
EPS_OFF = "off"

# The forms of the page; a refused one is re-rendered with its message and what it carried.
FORMS = ("predict", "numbers", "reading", "takeaway")


@dataclass(frozen=True)
class RowView:
    """One row and its layer-norm steps at the epsilon the page shows."""

    label: str  # "[1, 2, 3]", as typed
    data: str  # the row as JSON, for page.js to recompute at the other epsilon
    steps: LayerNormSteps


@dataclass(frozen=True)
class OwnRowView:
    text: str  # what the learner typed ("" when nothing)
    row: RowView | None
    error: str | None


@dataclass(frozen=True)
class Refusal:
    """A form the server refused: its message and the values it carried."""

    form: str  # one of FORMS
    message: str
    values: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class PageView:
    lesson: Lesson
    state: LessonState
    learner_id: str
    eps_on: bool
    eps_text: str  # the epsilon shown on the page: "0.00001" or "0"
    hand_rows: tuple[RowView, ...]
    edge_row: RowView
    own_row: OwnRowView
    refusal: Refusal | None = None

    @property
    def committed(self) -> bool:
        return self.state.prediction is not None

    def refused(self, form: str) -> Refusal | None:
        """The refusal of `form`, if that is the form that was refused."""
        return self.refusal if self.refusal is not None and self.refusal.form == form else None

    def echo(self, form: str, name: str) -> str | None:
        """What the learner typed into `name` of a refused `form` (None when not refused)."""
        refusal = self.refused(form)
        return None if refusal is None else refusal.values.get(name)


def eps_is_on(query_value: str | None) -> bool:
    """The switch is on unless the query says exactly "off" (anything else keeps the default)."""
    return query_value != EPS_OFF


def row_view(row: tuple[float, ...], eps: float) -> RowView:
    return RowView(
        label=format_input_row(row),
        data=json.dumps(list(row)),
        steps=layer_norm_steps(row, eps),
    )


def own_row_view(text: str | None, eps: float) -> OwnRowView:
    if text is None or not text.strip():
        return OwnRowView(text=text or "", row=None, error=None)
    parsed = parse_row(text)
    if isinstance(parsed, RowError):
        return OwnRowView(text=text, row=None, error=parsed.message)
    return OwnRowView(text=text, row=row_view(parsed, eps), error=None)


def build_page_view(
    lesson: Lesson,
    state: LessonState,
    learner_id: str,
    *,
    eps_on: bool = True,
    own_row_text: str | None = None,
    refusal: Refusal | None = None,
) -> PageView:
    if state.prediction is None:
        # Nothing in "Try it" runs before the prediction is committed, not even from the URL.
        eps_on, own_row_text = True, None
    eps = float(lesson.eps) if eps_on else 0.0
    return PageView(
        lesson=lesson,
        state=state,
        learner_id=learner_id,
        eps_on=eps_on,
        eps_text=str(lesson.eps) if eps_on else "0",
        hand_rows=tuple(row_view(tuple(map(float, row)), eps) for row in lesson.hand_rows),
        edge_row=row_view(tuple(map(float, lesson.edge_row)), eps),
        own_row=own_row_view(own_row_text, eps),
        refusal=refusal,
    )
