"""What one render of the lesson page needs, gathered in one place (pure: no I/O).

The derived LessonState says what the learner has done; this module adds what the page
computes for display (the hand rows' steps at the switch's state, the learner's own row, the
recording's player, provenance card and gradient bars, how all learners predicted) and what a
refused form carried, so a learner never loses what they typed.

Without JavaScript the switch's state, the learner's own row and the row in the player live
in the URL (?eps=off&row=...&play=...). Every form that posts carries them as hidden inputs
(Carry), so the 303 after a POST lands on the page as the learner left it.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from types import MappingProxyType
from urllib.parse import urlencode

from normdive.i18n.numbers import shown_row, uses_decimal_comma
from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.numeric.display import (
    format_input_number,
    format_input_row,
    variance_too_small_to_show,
)
from normdive.numeric.layernorm import LayerNormSteps, layer_norm_steps
from normdive.numeric.rows import MAX_ROW_CHARS, RowError, parse_row_exact
from normdive.progress.aggregate import AggregateView, PredictionCounts, aggregate
from normdive.progress.state import LessonState
from normdive.recording.runs import Runs
from normdive.web.views.player import (
    GradientsView,
    PlayerView,
    ProvenanceView,
    gradients_view,
    player_view,
    provenance_view,
)
from normdive.web.views.sweep import played_intro

# The switch's two states in the query string of GET / (the no-JavaScript switch).
EPS_ON = "on"
EPS_OFF = "off"

# The forms of the page; a refused one is re-rendered with its message and what it carried.
# The ablation's forms are one per row (or rung): their refusal carries which one.
FORMS = ("predict", "numbers", "reading", "takeaway", "row-predict", "row-play", "hint")
# The query parameter naming the row in the player (a page without JavaScript).
PLAY_PARAM = "play"


# The address's parameters a page without JavaScript carries through its forms (Carry).
CARRIED_PARAMS = frozenset({"eps", "row", PLAY_PARAM})


@dataclass(frozen=True)
class Carry:
    """What the URL holds for a page without JavaScript, carried through every form."""

    eps_off: bool = False
    row: str = ""  # the learner's own row, as typed
    play: str = ""  # the row key in the player

    def query(self) -> str:
        params = [("eps", EPS_OFF)] if self.eps_off else []
        params += [(name, value) for name, value in (("row", self.row), (PLAY_PARAM, self.play))]
        return urlencode([(name, value) for name, value in params if value])

    def address(self) -> str:
        """The page's address with these parameters."""
        query = self.query()
        return f"/{'?' + query if query else ''}"

    def location(self, anchor: str) -> str:
        """Where a no-JavaScript success lands: the page as it was, at `anchor`."""
        return f"{self.address()}#{anchor}"


def carry_from(values: Mapping[str, str], lesson: Lesson) -> Carry:
    """The carried parameters, validated: anything unusable is dropped, never refused (a
    stale or hand-edited URL still lands on the page)."""
    row = values.get("row", "")
    if (
        not row.strip()
        or len(row) > MAX_ROW_CHARS
        or any(unicodedata.category(character) == "Cc" for character in row)
    ):
        row = ""
    play = values.get(PLAY_PARAM, "").strip()
    return Carry(
        eps_off=values.get("eps") == EPS_OFF,
        row=row,
        play=play if lesson.row(play) is not None else "",
    )


@dataclass(frozen=True)
class RowView:
    """One row and its layer-norm steps at the epsilon the page shows."""

    label: str  # "[1, 2, 3]", as typed
    data: str  # the row as JSON, its decimals as text, for page.js to recompute exactly
    steps: LayerNormSteps
    variance_hidden: bool  # above 0 but shown as 0.000000 (display.variance_too_small_to_show)


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
    anchor: str = ""  # the id of the form's place on the page, for the page's error summary


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
    carry: Carry = field(default_factory=Carry)
    player: PlayerView | None = None  # the played row on show, with its curve table
    provenance: ProvenanceView | None = None  # while the recording's rows can be used
    gradients: GradientsView | None = None  # once every row has played
    aggregate: AggregateView | None = None  # once the learner has committed
    # The compare section's line about other depths (progress.sweep.compare_line).
    sweep_line: str | None = None
    # The sweep panel's sentence on what the learner played (web.views.sweep.played_intro).
    sweep_intro: str = ""
    # The learner's kept lab runs in words (web.routes.lab), once the gate has closed.
    lab_lines: tuple[str, ...] = ()
    # The learner's form token (security.csrf), in every form and the page's meta tag.
    csrf_token: str = ""

    def row_refusal(self, form: str, key: str) -> Refusal | None:
        """The refusal of the per-row (or per-rung) `form` for `key`."""
        refusal = self.refused(form)
        return refusal if refusal is not None and refusal.values.get("target") == key else None

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


# The lesson's own rows, at both epsilons, and the few a learner types in a while.
ROW_VIEWS_KEPT = 64


@functools.lru_cache(maxsize=ROW_VIEWS_KEPT)
def row_view(row: tuple[int | Decimal, ...], eps: Decimal) -> RowView:
    """A row's hand computation, exact: a pure function of the row and the epsilon, so computed
    once per pair (every page shows the lesson's rows)."""
    steps = layer_norm_steps(row, eps)
    return RowView(
        label=format_input_row(row),
        data=json.dumps([format_input_number(x) for x in row]),
        steps=steps,
        variance_hidden=variance_too_small_to_show(steps),
    )


def own_row_view(text: str | None, eps: Decimal) -> OwnRowView:
    if text is None or not text.strip():
        return OwnRowView(text=text or "", row=None, error=None)
    # A locale writing decimals after a comma reads "1,5; 2" (numeric/rows.py).
    parsed = parse_row_exact(text, decimal_comma=uses_decimal_comma())
    if isinstance(parsed, RowError):
        return OwnRowView(text=text, row=None, error=parsed.message)
    # The learner's row is named in the page's writing, as they typed it: "[1,5; 2]" in German.
    label = shown_row([format_input_number(x) for x in parsed])
    return OwnRowView(text=text, row=replace(row_view(parsed, eps), label=label), error=None)


def _shown_player(
    usable: Runs | None, lesson: Lesson, state: LessonState, player_row: str | None
) -> PlayerView | None:
    """The player at `player_row`, once that row has played and while the recording's rows can
    be used (`usable`)."""
    played = state.ablation.row(player_row or "")
    if usable is None or played is None or played.plays == 0:
        return None
    return player_view(
        usable, lesson, played.key, [row.key for row in state.ablation.rows if row.plays]
    )


def build_page_view(
    lesson: Lesson,
    state: LessonState,
    learner_id: str,
    *,
    eps_on: bool = True,
    own_row_text: str | None = None,
    refusal: Refusal | None = None,
    player_row: str | None = None,
    recording: Runs | None = None,
    recording_file: str = "",
    counts: PredictionCounts | None = None,
    csrf_token: str = "",
    sweep_line: str | None = None,
) -> PageView:
    """`player_row` is shown only once it has played; `recording` feeds the player, the
    provenance card and the gradients while its rows can be used; `counts` (all learners'
    predictions) is shown once this learner has committed."""
    lesson = localized(lesson)  # its text in the request's locale (lesson.translations)
    if state.prediction is None:
        # Nothing in "Try it" runs before the prediction is committed, not even from the URL.
        eps_on, own_row_text = True, None
    eps = lesson.eps if eps_on else Decimal(0)
    usable = recording if recording is not None and state.ablation.available else None
    player = _shown_player(usable, lesson, state, player_row)
    carry = carry_from(
        {
            "eps": EPS_ON if eps_on else EPS_OFF,
            "row": own_row_text or "",
            PLAY_PARAM: player.key if player is not None else "",
        },
        lesson,
    )
    return PageView(
        lesson=lesson,
        state=state,
        learner_id=learner_id,
        eps_on=eps_on,
        eps_text=str(lesson.eps) if eps_on else "0",
        hand_rows=tuple(row_view(tuple(row), eps) for row in lesson.hand_rows),
        edge_row=row_view(tuple(lesson.edge_row), eps),
        own_row=own_row_view(own_row_text, eps),
        refusal=refusal,
        carry=carry,
        player=player,
        provenance=(
            provenance_view(usable, lesson, recording_file) if usable is not None else None
        ),
        gradients=gradients_view(usable, lesson) if usable and state.ablation.all_played else None,
        aggregate=(
            aggregate(counts, lesson)
            if counts is not None and state.prediction is not None
            else None
        ),
        csrf_token=csrf_token,
        sweep_line=sweep_line,
        sweep_intro=played_intro(lesson, usable) if usable is not None else "",
    )
