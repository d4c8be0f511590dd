"""The page's charts, all drawn by the server as SVG: a row's curves against training step,
the curves of several rows on one chart, the training panels' accuracy against step (whose
live lines the page's script extends as a run reports), and the per-block gradient norms as a
dot plot on a logarithmic scale. Pure geometry (no I/O, no lesson text): the templates write
the SVG from these figures (templates/charts.html).

Every chart lives in a viewBox of CHART_WIDTH user units across and scales to its column, so
a unit is about a CSS pixel on a 375 px phone. The rows told apart on one chart differ in
three ways at once, never by colour alone: a colour (a CSS class, page.css), a line pattern
(stroke-dasharray) and a marker shape, SERIES_STYLES in the lesson's row order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# The viewBox's width; about a phone's column, so 11-unit text reads as 11 px there.
CHART_WIDTH = 340
# The curve charts' plot box inside the viewBox: room on the left for "100 %", above for the
# value axis's title, below for the step ticks and the step axis's title.
CURVE_HEIGHT = 222
CURVE_LEFT = 46
CURVE_RIGHT = 322  # room for the last step's label, centred on the plot's edge
CURVE_TOP = 22
CURVE_BOTTOM = 184
# The value axis's title: one horizontal line above the plot from the viewBox's left edge, so a
# long one ("Genauigkeit auf zurückgehaltenen Daten", about 190 units) is never cut.
VALUE_TITLE_X = 4
VALUE_TITLE_Y = 12
# A curve chart's step axis and a loss axis get about this many ticks (1, 2, 2.5 or 5 times
# a power of ten apart).
TARGET_TICKS = 5
NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
# The accuracy axis: 0 to 100 % in quarters.
ACCURACY_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
# Headroom above the highest loss, so the curve never runs along the frame.
LOSS_HEADROOM = 1.05
# The half-size of a cross marking a point that is not a finite number, and of a marker.
CROSS_SIZE = 4.0
MARKER_SIZE = 4.0
# How far apart two markers' centres must be for neither to hide the other.
MARKER_CLEARANCE = 2.5 * MARKER_SIZE

# The gradient dot plot: the plot box, one labelled grid line per power of ten.
GRADIENT_LEFT = 44
GRADIENT_RIGHT = 332
GRADIENT_TOP = 10
GRADIENT_PLOT_HEIGHT = 216
# At most this many powers of ten from the top of the data down: a tenfold difference is
# then at least GRADIENT_PLOT_HEIGHT / MAX_DECADES (18) units apart. A value further down is
# drawn at the floor as an arrow, its figure written beneath.
MAX_DECADES = 12
MIN_DECADES = 2
# Under the floor: the figures of values below it, written downwards.
OFF_SCALE_BAND = 58
# Under that: the block numbers and the axis title.
BLOCK_AXIS_BAND = 32
# The rows' markers within a block's column, this far apart (less where columns are narrow).
DODGE = 6.0
# Blocks labelled on the axis: every one up to this many, then every k-th.
MAX_BLOCK_LABELS = 8

# A row's look on a chart of several rows: (dash pattern, marker shape), by its place in the
# lesson's row order; its colour is the CSS class series-N.
SERIES_STYLES = (("", "circle"), ("7 3", "square"), ("2 3", "triangle"), ("9 3 2 3", "diamond"))


@dataclass(frozen=True)
class Tick:
    at: float  # the position along its axis, in viewBox units
    text: str


@dataclass(frozen=True)
class SeriesStyle:
    css: str  # "series-0" .. : the colour
    dash: str  # stroke-dasharray, "" for a solid line
    marker: str  # the marker's shape
    path: str  # the marker's path centred on (0, 0), placed with a translate()


def series_style(index: int) -> SeriesStyle:
    place = index % len(SERIES_STYLES)
    dash, marker = SERIES_STYLES[place]
    return SeriesStyle(css=f"series-{place}", dash=dash, marker=marker, path=marker_path(marker))


def _r(value: float) -> float:
    """A position rounded for the page: a hundredth of a unit is far below a pixel."""
    return round(value, 2)


def _n(value: float) -> str:
    """A coordinate for an SVG attribute: two decimals at most, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def marker_path(shape: str, x: float = 0.0, y: float = 0.0, size: float = MARKER_SIZE) -> str:
    """An SVG path of `shape` centred at (x, y): circle, square, triangle (apex up), diamond,
    arrow (pointing down) or cross."""
    s = size
    if shape == "circle":
        return (
            f"M{_n(x - s)} {_n(y)}a{_n(s)} {_n(s)} 0 1 0 {_n(2 * s)} 0"
            f"a{_n(s)} {_n(s)} 0 1 0 {_n(-2 * s)} 0Z"
        )
    if shape == "square":
        t = s * 0.9
        return f"M{_n(x - t)} {_n(y - t)}h{_n(2 * t)}v{_n(2 * t)}h{_n(-2 * t)}Z"
    if shape == "triangle":
        t = s * 1.2
        return f"M{_n(x)} {_n(y - t)}L{_n(x + t)} {_n(y + t * 0.8)}L{_n(x - t)} {_n(y + t * 0.8)}Z"
    if shape == "diamond":
        t = s * 1.25
        return f"M{_n(x)} {_n(y - t)}L{_n(x + t)} {_n(y)}L{_n(x)} {_n(y + t)}L{_n(x - t)} {_n(y)}Z"
    if shape == "arrow":
        return (
            f"M{_n(x)} {_n(y - s)}V{_n(y + s)}M{_n(x - s * 0.8)} {_n(y + s * 0.2)}"
            f"L{_n(x)} {_n(y + s)}L{_n(x + s * 0.8)} {_n(y + s * 0.2)}"
        )
    if shape == "cross":
        return (
            f"M{_n(x - s)} {_n(y - s)}L{_n(x + s)} {_n(y + s)}"
            f"M{_n(x + s)} {_n(y - s)}L{_n(x - s)} {_n(y + s)}"
        )
    raise ValueError(f"no marker shape {shape!r}")


def nice_step(span: float, target: int = TARGET_TICKS) -> float:
    """A tick spacing of 1, 2, 2.5 or 5 times a power of ten giving about `target` ticks."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / target
    power = 10.0 ** math.floor(math.log10(raw))
    return next(step * power for step in NICE_STEPS if step * power >= raw)


def nice_ticks(top: float, target: int = TARGET_TICKS) -> tuple[float, ...]:
    """0, then every nice_step up to `top` (its last tick at or above `top`)."""
    step = nice_step(top, target)
    count = math.ceil(top / step - 1e-9)
    return tuple(round(step * i, 10) for i in range(count + 1))


def tick_text(value: float) -> str:
    """A tick on a step or loss axis: 600, 2.5, 0.5."""
    return f"{value:g}"


def power_text(exponent: int) -> str:
    """A power of ten as the norms' figures write them: 0.001 .. 1000 in decimals, 1e-5 and
    1e4 beyond."""
    if -3 <= exponent < 0:
        return f"{10.0**exponent:.{-exponent}f}"
    if 0 <= exponent <= 3:
        return str(10**exponent)
    return f"1e{exponent}"


# --- curves against training step ---------------------------------------------------------


@dataclass(frozen=True)
class CurveSeries:
    """One line's data: `css` says how it looks ("played", "other" for a faint seed,
    "recorded" or "device" for a training panel's, or a series_style's class), `marker` the
    shape at its end (None: none). `key` names a line the page's script grows as a run reports
    (its marker drawn, hidden, before it has a point); `colour` is a CSS colour of its own."""

    label: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    css: str
    dash: str = ""
    marker: str | None = None
    key: str = ""
    colour: str = ""


@dataclass(frozen=True)
class CurveLine:
    label: str
    css: str
    dash: str
    path: str  # broken where a value is not a finite number
    marker: str  # the marker's path (at 0, 0), "" for none
    end: tuple[float, float] | None  # where the marker goes: its last finite point
    key: str = ""
    colour: str = ""


@dataclass(frozen=True)
class Rule:
    """A dashed reference line across the plot, its figure at its right end."""

    y: float
    text: str


@dataclass(frozen=True)
class CurveChart:
    width: int
    height: int
    left: float
    top: float
    right: float
    bottom: float
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    band: str  # the faint seeds' lowest-to-highest band as polygon points, "" for none
    lines: tuple[CurveLine, ...]  # faint ones first, so the played ones draw on top
    rules: tuple[Rule, ...]
    crosses: tuple[str, ...]  # paths of crosses where a drawn line is not a finite number
    steps: int  # the step at the plot's right edge
    value_title_x: float = VALUE_TITLE_X
    value_title_y: float = VALUE_TITLE_Y

    @property
    def grows(self) -> bool:
        """Whether the page's script grows a line of it (then it reads the plot's geometry)."""
        return any(line.key for line in self.lines)


def _traced(
    item: CurveSeries, x_at: Callable[[float], float], y_at: Callable[[float], float]
) -> tuple[str, tuple[float, float] | None, list[str]]:
    """One series' path (broken at each value that is not a finite number), where it ends,
    and the crosses marking those values on a non-faint line (at the top; minus infinity at
    the bottom)."""
    parts: list[str] = []
    crosses: list[str] = []
    pen_down = False
    last: tuple[float, float] | None = None
    for step, value in zip(item.steps, item.values, strict=True):
        x = x_at(step)
        if not math.isfinite(value):
            pen_down = False
            if item.css != "other":
                edge = CURVE_BOTTOM - CROSS_SIZE if value == -math.inf else CURVE_TOP + CROSS_SIZE
                crosses.append(marker_path("cross", x, edge, CROSS_SIZE))
            continue
        y = y_at(value)
        parts.append(f"{'L' if pen_down else 'M'}{_n(x)} {_n(y)}")
        pen_down, last = True, (_r(x), _r(y))
    return "".join(parts), last, crosses


def curve_chart(
    series: Sequence[CurveSeries],
    *,
    steps: int,
    percent: bool,
    rules: Sequence[tuple[float, str]] = (),
) -> CurveChart:
    """Lines of `series` against step 0..`steps`. `percent`: the values are fractions on a
    0 .. 100 % axis; otherwise the axis runs from 0 to the highest finite value (a loss).
    `rules`: (value, text) reference lines. A line breaks at a value that is not a finite
    number; a non-faint line marks it with a cross at the top (minus infinity: the bottom).
    The faint seeds (css "other") span a band when two or more of them are drawn."""
    finite = [v for s in series for v in s.values if math.isfinite(v)]
    y_values: tuple[float, ...]
    if percent:
        y_top, y_values = 1.0, ACCURACY_TICKS
    else:
        highest = max(finite, default=1.0)
        y_values = nice_ticks(highest * LOSS_HEADROOM if highest > 0 else 1.0)
        y_top = y_values[-1]
    x_top = float(max(steps, 1))

    def x_at(step: float) -> float:
        return CURVE_LEFT + (CURVE_RIGHT - CURVE_LEFT) * step / x_top

    def y_at(value: float) -> float:
        clamped = min(max(value, 0.0), y_top)
        return CURVE_BOTTOM - (CURVE_BOTTOM - CURVE_TOP) * clamped / y_top

    lines: list[CurveLine] = []
    crosses: list[str] = []
    for item in sorted(series, key=lambda s: s.css != "other"):
        path, last, item_crosses = _traced(item, x_at, y_at)
        crosses += item_crosses
        marker = marker_path(item.marker) if item.marker and (last or item.key) else ""
        end = _clear_of([line.end for line in lines if line.end], last) if marker else None
        lines.append(
            CurveLine(item.label, item.css, item.dash, path, marker, end, item.key, item.colour)
        )

    return CurveChart(
        width=CHART_WIDTH,
        height=CURVE_HEIGHT,
        left=CURVE_LEFT,
        top=CURVE_TOP,
        right=CURVE_RIGHT,
        bottom=CURVE_BOTTOM,
        x_ticks=tuple(Tick(_r(x_at(v)), tick_text(v)) for v in nice_ticks(x_top) if v <= x_top),
        y_ticks=tuple(
            Tick(_r(y_at(v)), f"{round(v * 100)} %" if percent else tick_text(v)) for v in y_values
        ),
        band=_band([s for s in series if s.css == "other"], x_at, y_at),
        lines=tuple(lines),
        rules=tuple(Rule(_r(y_at(value)), text) for value, text in rules),
        crosses=tuple(crosses),
        steps=max(steps, 1),
    )


def _clear_of(
    taken: Sequence[tuple[float, float]], spot: tuple[float, float] | None
) -> tuple[float, float] | None:
    """`spot`, moved left along its line's end until its marker covers none of the markers at
    `taken` (two rows ending at the same figure still show both their shapes)."""
    if spot is None:
        return None
    x, y = spot
    while any(
        abs(x - tx) < MARKER_CLEARANCE and abs(y - ty) < MARKER_CLEARANCE for tx, ty in taken
    ):
        x -= MARKER_CLEARANCE
    return _r(x), y


def _band(
    faint: Sequence[CurveSeries], x_at: Callable[[float], float], y_at: Callable[[float], float]
) -> str:
    """The polygon from the faint seeds' lowest value at each step to their highest, over the
    steps where at least one is finite; "" with fewer than two faint seeds."""
    if len(faint) < 2:
        return ""
    by_step: dict[int, list[float]] = {}
    for item in faint:
        for step, value in zip(item.steps, item.values, strict=True):
            if math.isfinite(value):
                by_step.setdefault(step, []).append(value)
    ordered = sorted(by_step)
    if len(ordered) < 2:
        return ""
    upper = [f"{_n(x_at(s))},{_n(y_at(max(by_step[s])))}" for s in ordered]
    lower = [f"{_n(x_at(s))},{_n(y_at(min(by_step[s])))}" for s in reversed(ordered)]
    return " ".join(upper + lower)


# --- the gradient dot plot ----------------------------------------------------------------


@dataclass(frozen=True)
class LogScale:
    """Powers of ten from 10**floor at the bottom of the plot to 10**top at its top."""

    floor: int
    top: int

    def y(self, value: float) -> float:
        span = self.top - self.floor
        return GRADIENT_TOP + GRADIENT_PLOT_HEIGHT * (self.top - math.log10(value)) / span

    def holds(self, value: float) -> bool:
        return math.isfinite(value) and value >= 10.0**self.floor


def log_scale(values: Sequence[float]) -> LogScale:
    """The scale the data asks for: from the power of ten at or above its highest positive
    finite value down to the one at or below its lowest, but at most MAX_DECADES and at least
    MIN_DECADES powers of ten."""
    logs = [math.log10(v) for v in values if math.isfinite(v) and v > 0]
    if not logs:
        return LogScale(floor=-MIN_DECADES, top=0)
    top = math.ceil(max(logs) - 1e-9)
    floor = max(math.floor(min(logs) + 1e-9), top - MAX_DECADES)
    return LogScale(floor=min(floor, top - MIN_DECADES), top=top)


@dataclass(frozen=True)
class DotPoint:
    block: int  # 1 is the first block
    text: str  # the norm as a learner reads it
    x: float
    y: float
    marker: str  # its path at (0, 0): the row's shape, or an arrow (below the floor) or a cross
    off_scale: bool  # below the floor, zero or not a number: its figure is written beneath


@dataclass(frozen=True)
class DotSeries:
    key: str
    label: str
    style: SeriesStyle
    line: str  # a thin line through its points on the scale, broken at those off it
    points: tuple[DotPoint, ...]


@dataclass(frozen=True)
class DotPlotFrame:
    """What the moments' plots share: the scale, its ticks and the block axis."""

    width: int
    height: int
    left: float
    right: float
    top: float
    floor_y: float  # the plot's bottom line, the floor of the scale
    band: float  # the height under the floor where off-scale figures are written
    y_ticks: tuple[Tick, ...]  # one per power of ten, labelled
    x_ticks: tuple[Tick, ...]  # block numbers
    x_title_y: float
    low: str  # the floor and the top as text
    high: str
    scale: LogScale


def dot_plot_frame(values: Sequence[float], depth: int) -> DotPlotFrame:
    scale = log_scale(values)
    off = any(not scale.holds(v) for v in values)
    floor_y = GRADIENT_TOP + GRADIENT_PLOT_HEIGHT
    band = OFF_SCALE_BAND if off else 0.0
    every = max(1, math.ceil(depth / MAX_BLOCK_LABELS))
    shown = sorted({1, depth, *range(every, depth + 1, every)}) if depth > MAX_BLOCK_LABELS else []
    blocks = shown or list(range(1, depth + 1))
    return DotPlotFrame(
        width=CHART_WIDTH,
        height=round(floor_y + band + BLOCK_AXIS_BAND),
        left=GRADIENT_LEFT,
        right=GRADIENT_RIGHT,
        top=GRADIENT_TOP,
        floor_y=floor_y,
        band=band,
        y_ticks=tuple(
            Tick(_r(scale.y(10.0**k)), power_text(k)) for k in range(scale.floor, scale.top + 1)
        ),
        x_ticks=tuple(Tick(_r(_column_x(block, depth)), str(block)) for block in blocks),
        x_title_y=floor_y + band + BLOCK_AXIS_BAND - 4,
        low=power_text(scale.floor),
        high=power_text(scale.top),
        scale=scale,
    )


def _column_x(block: int, depth: int) -> float:
    width = (GRADIENT_RIGHT - GRADIENT_LEFT) / depth
    return GRADIENT_LEFT + width * (block - 0.5)


def dot_series(
    frame: DotPlotFrame,
    key: str,
    label: str,
    index: int,
    count: int,
    norms: Sequence[float],
    texts: Sequence[str],
) -> DotSeries:
    """Row `index` of `count` on the plot: one point per block, dodged sideways within the
    block's column so that the rows' markers sit side by side."""
    style = series_style(index)
    depth = len(norms)
    dodge = min(DODGE, (GRADIENT_RIGHT - GRADIENT_LEFT) / depth / (count + 1))
    offset = (index - (count - 1) / 2) * dodge
    points: list[DotPoint] = []
    parts: list[str] = []
    pen_down = False
    for block, (value, text) in enumerate(zip(norms, texts, strict=True), start=1):
        x = _r(_column_x(block, depth) + offset)
        if frame.scale.holds(value):
            y = _r(frame.scale.y(value))
            points.append(DotPoint(block, text, x, y, style.path, False))
            parts.append(f"{'L' if pen_down else 'M'}{_n(x)} {_n(y)}")
            pen_down = True
            continue
        pen_down = False
        # Below the floor (or zero): an arrow just under the floor line; not a number or
        # infinity: a cross there. Either way its figure is written beneath.
        shape = "arrow" if math.isfinite(value) and value >= 0 else "cross"
        y = frame.floor_y + MARKER_SIZE + 2
        points.append(DotPoint(block, text, x, y, marker_path(shape), True))
    return DotSeries(key, label, style, "".join(parts), tuple(points))
