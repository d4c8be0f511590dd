"""The lab, "Train one yourself": a learner commits a prediction for an offered configuration,
trains it in their browser, and the finished run's figures are kept (docs/lab.md). Actions as
in progress.actions; one run at most is open at a time, and the lab never touches the gate."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from normdive.i18n.catalogues import N_, current_locale, gettext, pgettext
from normdive.i18n.numbers import shown_in
from normdive.lesson.content import Lesson, Outcome
from normdive.lesson.plurals import counted
from normdive.progress import figures
from normdive.progress.ablation import row_band
from normdive.progress.actions import MAX_ECHOED_CHARS, Action, Conflict, Invalid
from normdive.progress.events import Event, EventKind
from normdive.recording.format import non_finite_marker

# The four rows as the lab's two switches: (layer norm, residual connections).
ROW_SWITCHES: dict[str, tuple[bool, bool]] = {
    "both": (True, True),
    "residual_only": (False, True),
    "layernorm_only": (True, False),
    "neither": (False, False),
}
# Every offered row at every depth of one seed, and a bound on one learner's lab events.
MAX_LAB_RUNS = 64
# A minute's run evaluated every eval_every steps has a few dozen points; bounds a forged one.
MAX_CURVE_POINTS = 400
# The largest step a figure may name (the lab's runs are hundreds of steps).
MAX_STEP = 1_000_000
NON_FINITE_MARKERS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# The most digits a depth or seed may have (the offered ones have one or two).
MAX_CHOICE_DIGITS = 6
RESULT_FIELD = "result"
CURVE_FIELDS = ("step", "train_loss", "heldout_loss", "heldout_accuracy")
FINAL_FIELDS = ("step", "heldout_loss", "heldout_accuracy")

# The smallest gap, in points, the agreement sentence states (figures show one decimal).
AGREEMENT_SHOWN_MIN = 0.1
# The gap, in points, when only one run's accuracy is not a number (it diverged).
FULL_SCALE_POINTS = 100.0

NOT_OFFERED = N_("The lab does not offer {name} {value}; pick one of {offered}.")
MISSING_CHOICE = N_("Pick a {name} before committing.")
NO_OUTCOME = N_("Pick one of the three outcomes before committing.")
OPEN_RUN = N_("You have committed a run that has not trained yet ({config}). Train it first.")
NO_SUCH_RUN = N_("You have no lab run {run}.")
ALREADY_FINISHED = N_("Lab run {run} has finished already; its figures are kept as they were.")
BAD_RESULT = N_("The run's figures could not be read ({problem}), so nothing was saved.")
_FIELD_NAMES = {
    "depth": N_("depth"),
    "row": N_("row"),
    "epsilon": N_("epsilon"),
    "initialisation": N_("initialisation"),
    "seed": N_("seed"),
    "outcome": N_("outcome"),
}


@dataclass(frozen=True)
class LabChoice:
    """One offered configuration (the grid's base supplies the rest)."""

    depth: int
    layernorm: bool
    residual: bool
    eps: float | None  # None when layer norm is off
    init: str
    seed: int

    @property
    def row(self) -> str:
        return next(k for k, v in ROW_SWITCHES.items() if v == (self.layernorm, self.residual))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LabChoice | None:
        """The choice a stored event holds, or None for one this version cannot read."""
        try:
            eps = data.get("eps")
            return cls(
                depth=int(data["depth"]),
                layernorm=bool(data["layernorm"]),
                residual=bool(data["residual"]),
                eps=float(eps) if eps is not None else None,
                init=str(data["init"]),
                seed=int(data["seed"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Figures:
    step: int
    heldout_loss: float
    heldout_accuracy: float


@dataclass(frozen=True)
class LabRun:
    number: int  # 1-based, in the order committed
    choice: LabChoice
    predicted: str
    final: Figures | None = None  # None until it has trained
    outcome: str | None = None  # the final accuracy's band
    curve: tuple[Mapping[str, Any], ...] = ()


def lab_runs(events: Iterable[Event]) -> tuple[LabRun, ...]:
    """The learner's lab runs, oldest first; other events are passed over."""
    runs: dict[int, LabRun] = {}
    for event in events:
        payload = event.payload
        number = payload.get("run")
        if not isinstance(number, int):
            continue
        if event.kind is EventKind.LAB_COMMITTED and number not in runs:
            choice = LabChoice.from_json(payload.get("config") or {})
            if choice is not None:
                runs[number] = LabRun(number, choice, str(payload.get("outcome")))
        elif event.kind is EventKind.LAB_FINISHED and number in runs:
            run = runs[number]
            final = payload.get("final") or {}
            if run.final is None and isinstance(final, Mapping):
                runs[number] = LabRun(
                    run.number,
                    run.choice,
                    run.predicted,
                    Figures(
                        int(final.get("step", 0)),
                        figure(final.get("heldout_loss")),
                        figure(final.get("heldout_accuracy")),
                    ),
                    str(payload.get("outcome")),
                    tuple(payload.get("curve") or ()),
                )
    return tuple(runs[number] for number in sorted(runs))


def figure(value: Any) -> float:
    """A stored figure as a float (a marker as its non-finite value, null as nan)."""
    if isinstance(value, str):
        return NON_FINITE_MARKERS.get(value, math.nan)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


def open_run(runs: Sequence[LabRun]) -> LabRun | None:
    return next((run for run in runs if run.final is None), None)


def _offered(name: str, value: str, offered: Sequence[object]) -> Invalid:
    shown = value[:MAX_ECHOED_CHARS]
    listed = ", ".join(str(item) for item in offered)
    return Invalid(
        gettext(NOT_OFFERED).format(name=_field(name), value=repr(shown), offered=listed)
    )


def _field(name: str) -> str:
    return gettext(_FIELD_NAMES[name])


def _pick_int(form: Mapping[str, str], name: str, label: str, offered: Sequence[int]) -> int:
    raw = form.get(name, "").strip()
    if not raw:
        raise Invalid(gettext(MISSING_CHOICE).format(name=_field(label)))
    # Bounded before it is converted: int() refuses a text of thousands of digits.
    digits = raw.lstrip("0") or "0"
    if not (raw.isascii() and raw.isdigit() and len(digits) <= MAX_CHOICE_DIGITS):
        raise _offered(label, raw, offered)
    if int(digits) not in offered:
        raise _offered(label, raw, offered)
    return int(digits)


def parse_choice(form: Mapping[str, str], lesson: Lesson) -> LabChoice:
    """The configuration a form names, when offered; Invalid otherwise."""
    offered = lesson.lab.offered
    depth = _pick_int(form, "depth", "depth", offered.depths)
    row = form.get("row", "").strip()
    if not row:
        raise Invalid(gettext(MISSING_CHOICE).format(name=_field("row")))
    if row not in ROW_SWITCHES:
        raise _offered("row", row, list(ROW_SWITCHES))
    layernorm, residual = ROW_SWITCHES[row]
    eps: float | None = None
    if layernorm:
        raw = form.get("eps", "").strip()
        if not raw:
            raise Invalid(gettext(MISSING_CHOICE).format(name=_field("epsilon")))
        try:
            value = Decimal(raw)
        except InvalidOperation:
            raise _offered("epsilon", raw, offered.eps) from None
        if not value.is_finite() or value not in offered.eps:
            raise _offered("epsilon", raw, offered.eps)
        eps = float(value)
    init = form.get("init", "").strip()
    if not init:
        raise Invalid(gettext(MISSING_CHOICE).format(name=_field("initialisation")))
    if init not in offered.inits:
        raise _offered("initialisation", init, offered.inits)
    seed = _pick_int(form, "seed", "seed", offered.seeds)
    return LabChoice(depth, layernorm, residual, eps, init, seed)


def config_name(lesson: Lesson, choice: LabChoice) -> str:
    """The configuration in words: "Both, depth 2, eps 0.00001, GPT-2 initialisation, seed 0"
    (in German "Beide, Tiefe 2, eps 0,00001, GPT-2-Initialisierung, Seed 0")."""
    row = next(r.label for r in lesson.rows if r.key == choice.row)
    parts = [row, gettext("depth {depth}").format(depth=choice.depth)]
    if choice.eps is not None:
        parts.append(f"eps {shown_in(eps_text(choice.eps))}")
    parts.append(lesson.sweep.init_labels.get(choice.init, choice.init))
    parts.append(gettext("seed {seed}").format(seed=choice.seed))
    return pgettext("between the items of a list", ", ").join(parts)


def eps_text(eps: float) -> str:
    """An eps as the lesson writes it: a plain decimal, never 1e-05."""
    return f"{Decimal(repr(eps)).normalize():f}" if eps else "0"


def commit_lab_run(runs: Sequence[LabRun], lesson: Lesson, form: Mapping[str, str]) -> Action:
    """Commit a prediction for an offered configuration; Conflict / Invalid otherwise."""
    pending = open_run(runs)
    if pending is not None:
        raise Conflict(gettext(OPEN_RUN).format(config=config_name(lesson, pending.choice)))
    if len(runs) >= MAX_LAB_RUNS:
        raise Conflict(counted(lesson.lab.too_many, len(runs), count=len(runs)))
    choice = parse_choice(form, lesson)
    outcome = form.get("outcome", "").strip()
    if outcome not in {o.id for o in lesson.outcomes}:
        if not outcome:
            raise Invalid(gettext(NO_OUTCOME))
        raise _offered("outcome", outcome, [o.id for o in lesson.outcomes])
    number = max((run.number for run in runs), default=0) + 1
    payload = {"run": number, "config": choice.to_json(), "outcome": outcome}
    return EventKind.LAB_COMMITTED, payload


class _BadResult(ValueError):
    pass


def _stored_figure(value: Any, name: str) -> float | str | None:
    """A figure as stored: a finite number, a marker, or null. Raises _BadResult."""
    if value is None:
        return None
    if isinstance(value, str):
        if value in NON_FINITE_MARKERS:
            return value
        raise _BadResult(f"{name} is {value[:MAX_ECHOED_CHARS]!r}, not a number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _BadResult(f"{name} is not a number")
    try:
        number = float(value)
    except OverflowError:  # JSON bounds no whole number; a float holds none past 1.8e308
        raise _BadResult(f"{name} is a whole number too large for a figure") from None
    return number if math.isfinite(number) else non_finite_marker(number)


def _step(value: Any, name: str, steps: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= steps:
        raise _BadResult(f"{name} is not a step from 0 to {steps}")
    return value


def _accuracy(value: float | str | None, name: str) -> None:
    """A share from 0 to 1 (no trainer makes a non-finite one), so a band comes from a share."""
    if not isinstance(value, float) or not 0 <= value <= 1:
        shown = "missing" if value is None else value
        raise _BadResult(f"{name} is {shown}, not a share from 0 to 1")


def _point(raw: Any, index: int, fields: Sequence[str], steps: int) -> dict[str, Any]:
    where = f"point {index + 1}" if index >= 0 else "the final figures"
    whose = f"{where}'" if where.endswith("s") else f"{where}'s"
    has = "have" if index < 0 else "has"
    if not isinstance(raw, dict):
        raise _BadResult(f"{where} {'are' if index < 0 else 'is'} not an object")
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise _BadResult(f"{where} {has} an unknown figure {unknown[0][:MAX_ECHOED_CHARS]!r}")
    point: dict[str, Any] = {"step": _step(raw.get("step"), f"{whose} step", steps)}
    for name in fields[1:]:
        point[name] = _stored_figure(raw.get(name), f"{whose} {name}")
    _accuracy(point["heldout_accuracy"], f"{whose} heldout_accuracy")
    return point


def _result(text: str, steps: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        # The body limit bounds `text`; nesting too deep for the parser is not JSON here.
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise _BadResult("it is not JSON") from None
    if not isinstance(body, dict):
        raise _BadResult('it is not an object {"final", "curve"}')
    curve = body.get("curve")
    if not isinstance(curve, list) or not curve:
        raise _BadResult("it has no curve")
    if len(curve) > MAX_CURVE_POINTS:
        raise _BadResult(f"its curve has more than {MAX_CURVE_POINTS} points")
    points = [_point(raw, i, CURVE_FIELDS, steps) for i, raw in enumerate(curve)]
    if any(b["step"] <= a["step"] for a, b in itertools.pairwise(points)):
        raise _BadResult("its curve's steps do not rise")
    final = _point(body.get("final"), -1, FINAL_FIELDS, steps)
    if final["step"] != steps:
        raise _BadResult(f"it ended at step {final['step']}, not at step {steps}")
    # The trainer's final figures are its last evaluation's (lab/worker.js).
    last = points[-1]
    if any(last[name] != final[name] for name in FINAL_FIELDS):
        raise _BadResult("its final figures are not its curve's last point")
    return final, points


def read_result(text: str, steps: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(final, curve) as stored, from the worker's JSON; Invalid saying what is wrong."""
    try:
        return _result(text, steps)
    except _BadResult as problem:
        raise Invalid(gettext(BAD_RESULT).format(problem=problem)) from None


def finish_lab_run(
    runs: Sequence[LabRun],
    lesson: Lesson,
    number: int,
    text: str,
    chance_level: float,
    steps: int,
) -> Action:
    """Keep run `number`'s figures once, with its band; Conflict / Invalid otherwise."""
    run = next((r for r in runs if r.number == number), None)
    if run is None:
        raise Invalid(gettext(NO_SUCH_RUN).format(run=number))
    if run.final is not None:
        raise Conflict(gettext(ALREADY_FINISHED).format(run=number))
    final, curve = read_result(text, steps)
    outcome = row_band(figure(final["heldout_accuracy"]), lesson, chance_level)
    payload = {"run": number, "final": final, "curve": curve, "outcome": outcome}
    return EventKind.LAB_FINISHED, payload


def _percent(fraction: float) -> str:
    return figures.percent(fraction)


def _accuracies(curve: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    return {int(p["step"]): figure(p.get("heldout_accuracy")) for p in curve}


def comparison(lesson: Lesson, run: LabRun, recorded: Sequence[Mapping[str, Any]] | None) -> str:
    """One sentence: the run's largest held-out accuracy gap to the recorded cell (None: none)."""
    text = lesson.lab
    if recorded is None or run.final is None:
        return text.no_cell
    mine, theirs = _accuracies(run.curve), _accuracies(recorded)
    mine[run.final.step] = run.final.heldout_accuracy
    shared = sorted(set(mine) & set(theirs))
    if not shared:
        return text.no_cell
    gaps = []
    for step in shared:
        a, b = mine[step], theirs[step]
        if math.isnan(a) and math.isnan(b):
            gaps.append((0.0, step))
        else:
            gap = abs(a - b) * 100
            gaps.append((gap if math.isfinite(gap) else FULL_SCALE_POINTS, step))
    points, worst = max(gaps)
    live, then = mine[shared[-1]], theirs[shared[-1]]
    if points <= float(text.agreement_points):
        shown = f"{max(points, AGREEMENT_SHOWN_MIN):.1f}"
        return counted(
            text.agrees,
            Decimal(shown),
            points=shown_in(shown),
            live=_percent(live),
            recorded=_percent(then),
        )
    here, there = mine[worst], theirs[worst]
    direction = (
        text.above if (math.isfinite(here) and (math.isnan(there) or here > there)) else text.below
    )
    return counted(
        text.differs,
        Decimal(f"{points:.1f}"),
        points=shown_in(f"{points:.1f}"),
        direction=direction,
        step=worst,
        live=_percent(here),
        recorded=_percent(there),
        tolerance=shown_in(f"{text.agreement_points.normalize():f}"),
        end_live=_percent(live),
        end_recorded=_percent(then),
    )


def outcome_sentence(lesson: Lesson, run: LabRun) -> str:
    return lesson.lab.verdict(run.predicted, run.outcome or "")


def run_line(lesson: Lesson, run: LabRun) -> str:
    outcomes: dict[str, Outcome] = {o.id: o for o in lesson.outcomes}
    label = outcomes[run.predicted].label if run.predicted in outcomes else "?"
    # German keeps its capitalised nouns (and quotes the label).
    predicted = label if current_locale() == "de" else label.lower()
    config = config_name(lesson, run.choice)
    if run.final is None:
        return lesson.lab.run_untrained.format(config=config, predicted=predicted)
    actual = outcomes[run.outcome].actual if run.outcome in outcomes else "?"
    return lesson.lab.run_done.format(
        config=config,
        predicted=predicted,
        actual=actual,
        accuracy=_percent(run.final.heldout_accuracy),
    )


__all__ = [
    "MAX_CURVE_POINTS",
    "MAX_LAB_RUNS",
    "RESULT_FIELD",
    "ROW_SWITCHES",
    "LabChoice",
    "LabRun",
    "commit_lab_run",
    "comparison",
    "config_name",
    "finish_lab_run",
    "lab_runs",
    "open_run",
    "outcome_sentence",
    "parse_choice",
    "read_result",
    "run_line",
]
