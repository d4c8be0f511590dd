"""The chart of both training panels (the lab's and the re-run's): held-out accuracy against
the training step, each run's recorded cell dashed and its curve on the learner's device solid,
in the run's colour. The server draws it whole (web.views.charts); the page's script extends a
device's curve as its run reports (static/accuracy-chart.js), keyed by TrainingLine.key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from normdive.progress.lab import figure
from normdive.web.views.charts import CurveChart, CurveSeries, curve_chart

# A curve as the grid and the server keep it: points with "step" and "heldout_accuracy" (a
# number, or a marker for one that is not finite).
Curve = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class TrainingLine:
    key: str  # names the device's curve for the script (data-series)
    label: str
    recorded: Curve | None  # the grid's cell of the same configuration and seed, if any
    device: Curve = ()  # what the device has trained of it so far
    colour: str = ""  # a CSS colour; "" for the panel's own (page.css)
    marker: str = "circle"  # the shape at the device curve's end (charts.SERIES_STYLES)


def _series(label: str, curve: Curve, css: str, **look: Any) -> CurveSeries:
    return CurveSeries(
        label=label,
        steps=tuple(int(point["step"]) for point in curve),
        values=tuple(figure(point.get("heldout_accuracy")) for point in curve),
        css=css,
        **look,
    )


def training_chart(steps: int, lines: Sequence[TrainingLine]) -> CurveChart:
    """The recorded curves first, so that the device's curves draw on top of them."""
    recorded = [
        _series(line.label, line.recorded, "recorded", colour=line.colour)
        for line in lines
        if line.recorded is not None
    ]
    device = [
        _series(
            line.label, line.device, "device", marker=line.marker, key=line.key, colour=line.colour
        )
        for line in lines
    ]
    return curve_chart([*recorded, *device], steps=steps, percent=True)
