"""The recording as the page shows it (normdive.web.views.player): every chart drawn by the
server."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup, Tag

from helpers import NON_FINITE_ROW, ablation_recording
from normdive.lesson.content import load_lesson
from normdive.recording.format import ROW_KEYS
from normdive.recording.reader import read_recording
from normdive.recording.runs import Runs
from normdive.web.views.charts import (
    GRADIENT_PLOT_HEIGHT,
    MARKER_CLEARANCE,
    MAX_DECADES,
    CurveChart,
)
from normdive.web.views.player import (
    PlayerView,
    gradients_view,
    norm_text,
    player_view,
    provenance_view,
    row_key,
)
from normdive.web.views.rendering import Renderer
from sample_recordings import sample_recording

LESSON = load_lesson()
REPO = Path(__file__).resolve().parents[1]
SHIPPED = read_recording(REPO / "recordings" / "the-transformer-block.json")
FRAGMENTS = Renderer().env.get_template("fragments.html").module
RECORDING = ablation_recording()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.78043, "0.78"),
        (0.0165501, "0.0166"),
        (1.33e-33, "1.33e-33"),
        (4.5, "4.5"),
        (0.0, "0"),
        (math.nan, "not a number"),
        (math.inf, "infinity"),
    ],
)
def test_norm_text_keeps_three_significant_digits(value: float, expected: str) -> None:
    assert norm_text(value) == expected


def test_row_key_knows_only_the_recordings_rows() -> None:
    assert [row_key(key) for key in ROW_KEYS] == list(ROW_KEYS)
    assert row_key("best") is None and row_key("Both") is None


def test_the_player_shows_the_page_seeds_curve_and_final_figures() -> None:
    view = player_view(RECORDING, LESSON, NON_FINITE_ROW)
    assert view is not None
    assert (view.key, view.label, view.seed, view.other_seeds) == (
        "residual_only",
        "Residuals only",
        0,
        (1, 2),
    )
    assert [p.step for p in view.points] == [0, 300, 600]
    middle = view.points[1]
    assert (middle.loss, middle.non_finite) == ("not a number", True)
    assert not view.points[0].non_finite
    assert (view.accuracy, view.loss, view.full_accuracy_step) == ("20.0 %", "2.200", None)
    assert (view.learns_min, view.chance_max) == ("90 %", "12.5 %")
    assert player_view(RECORDING, LESSON, "best") is None
    lacking = sample_recording(rows=("both", "neither"))
    assert player_view(lacking, LESSON, "residual_only") is None


def test_the_charts_speak_of_crosses_only_where_they_draw_one() -> None:
    marked = player_view(RECORDING, LESSON, NON_FINITE_ROW)
    finite = player_view(RECORDING, LESSON, "both")
    assert marked is not None and finite is not None
    assert marked.marks_crosses and not finite.marks_crosses
    module = Renderer().env.get_template("fragments.html").module
    note = "A cross marks a point that is not a finite number."

    def drawn(player: PlayerView) -> str:
        # The player macro reads these of the page's view.
        state = SimpleNamespace(ablation=SimpleNamespace(available=True))
        return str(module.player(SimpleNamespace(lesson=LESSON, player=player, state=state)))

    assert note in drawn(marked)
    assert note not in drawn(finite)


def test_the_provenance_names_the_file_never_its_folder() -> None:
    view = provenance_view(RECORDING, LESSON, "the-transformer-block.json")
    assert view.file == "the-transformer-block.json"
    assert (view.depth, view.copy_length, view.seed, view.seeds, view.steps) == (
        8,
        16,
        0,
        "0, 1, 2",
        600,
    )
    assert view.init.startswith("GPT-2 style initialisation")
    assert view.created_at == "2000-01-01 00:00 UTC"
    odd = RECORDING.model_copy(
        update={"provenance": [RECORDING.provenance[0].model_copy(update={"created_at": "today"})]}
    )
    assert provenance_view(odd, LESSON, "x.json").created_at == "today"


def test_the_gradient_plots_share_a_log_scale_chosen_from_the_data() -> None:
    view = gradients_view(RECORDING, LESSON)
    assert view is not None
    assert [chart.step for chart in view.charts] == [1, 600]
    assert [row.key for row in view.charts[0].rows] == list(ROW_KEYS)
    # The sample's norms run from 4 down to 1e-28 (and an exact zero): the scale starts at
    # the power of ten above the top and reaches MAX_DECADES below it, not 29 of them.
    assert (view.low, view.high) == ("1e-11", "10")
    ticks = [tick.text for tick in view.frame.y_ticks]
    assert ticks == [f"1e{k}" for k in range(-11, -3)] + ["0.001", "0.01", "0.1", "1", "10"]
    gaps = {round(a.at - b.at, 2) for a, b in itertools.pairwise(view.frame.y_ticks)}
    assert gaps == {round(GRADIENT_PLOT_HEIGHT / MAX_DECADES, 2)}
    rows = {row.key: row for row in view.charts[0].rows}
    # Neither's first block gets exactly no gradient: off the scale, its figure written.
    first = rows["neither"].points[0]
    assert first.off_scale and first.text == "0"
    # Equal norms sit level; 0.8 and 0.0165 (48x apart) are 1.7 grid steps apart.
    assert len({point.y for point in rows["residual_only"].points}) == 1
    both, residual = rows["both"].points[0], rows["residual_only"].points[0]
    assert residual.y - both.y == pytest.approx(18 * math.log10(0.8 / 0.0165), abs=0.05)
    # Layer norm only collapses between the two moments: 4 at update 1, 1e-10 at 600.
    early = {row.key: row for row in view.charts[0].rows}["layernorm_only"].points[0]
    late = {row.key: row for row in view.charts[1].rows}["layernorm_only"].points[0]
    assert late.y - early.y == pytest.approx(18 * math.log10(4 / 1e-10), abs=0.05)
    assert len(view.table) == 8
    assert view.table[0].label == "Both" and view.table[0].step == 1


def marker_y(plot: Tag, row: str, block: int) -> float:
    marker = plot.select_one(f'g[data-plot-row="{row}"] path.marker[data-block="{block}"]')
    assert marker is not None, (row, block)
    found = re.fullmatch(r"translate\(([-\d.]+) ([-\d.]+)\)", str(marker["transform"]))
    assert found is not None
    return float(found[2])


def drawn_gradients(recording: Runs) -> BeautifulSoup:
    view = SimpleNamespace(
        lesson=LESSON,
        gradients=gradients_view(recording, LESSON),
        state=SimpleNamespace(ablation=SimpleNamespace(available=True, rows=())),
    )
    return BeautifulSoup(str(FRAGMENTS.gradients(view)), "html.parser")


def test_the_shipped_gradients_show_a_tenfold_difference_as_a_grid_step() -> None:
    soup = drawn_gradients(SHIPPED)
    plots = soup.select("svg.dot-plot")
    assert len(plots) == 2
    early, late = plots
    for plot in plots:
        # A named image, with a labelled grid line at every power of ten.
        assert str(plot["role"]) == "img" and "logarithmic scale" in str(plot["aria-label"])
        labels = [text.get_text() for text in plot.select("text.tick")]
        assert {"1e-10", "1e-5", "1e-4", "0.001", "0.01", "0.1", "1", "10"} <= set(labels)
        lines = sorted(float(line["y1"]) for line in plot.select("line.grid"))
        assert min(b - a for a, b in itertools.pairwise(lines)) >= 18
    # At update 600, Both's block 1 (0.000367) and Residuals only's (0.572): over three
    # grid steps apart, where the old bars were both full height.
    gap = marker_y(late, "both", 1) - marker_y(late, "residual_only", 1)
    assert gap == pytest.approx(18 * math.log10(0.572 / 0.000367), abs=0.5) and gap > 54
    # A tenfold difference between blocks of one row: Layer norm only at 600, block 7
    # (0.000423) against block 8 (0.0507), over two grid steps.
    assert marker_y(late, "layernorm_only", 7) - marker_y(late, "layernorm_only", 8) > 36
    # Layer norm only's block 1 collapses from 3.96 to 1.39e-10: ten grid steps down.
    drop = marker_y(late, "layernorm_only", 1) - marker_y(early, "layernorm_only", 1)
    assert drop > 10 * 18
    # Neither's first blocks are below the floor: arrows, their figures written beneath.
    off = early.select('g[data-plot-row="neither"] text.off-text')
    assert off[0].get_text() == "1.33e-33"
    # The four rows differ in marker shape and line pattern, not colour alone.
    shapes = {str(g.select_one("path.marker")["d"]) for g in early.select("g[data-plot-row]")}
    dashes = {
        str(g.select_one("path.link").get("stroke-dasharray"))
        for g in late.select("g[data-plot-row]")
    }
    assert len(shapes) == 4 and len(dashes) == 4
    legend = [item.get_text(strip=True) for item in soup.select("#gradients-legend li")]
    assert legend == [row.label for row in LESSON.rows]
    # The page's old admission is gone: the picture itself shows a hundredfold.
    assert "hundredfold" not in soup.get_text()


def test_until_every_row_has_played_a_sentence_holds_the_gradients_place() -> None:
    rows = tuple(SimpleNamespace(plays=plays) for plays in (1, 0, 0, 2))
    view = SimpleNamespace(
        lesson=LESSON,
        gradients=None,
        state=SimpleNamespace(ablation=SimpleNamespace(available=True, rows=rows)),
    )
    soup = BeautifulSoup(str(FRAGMENTS.gradients(view)), "html.parser")
    placeholder = soup.select_one("#gradients-placeholder")
    assert placeholder is not None
    assert placeholder.get_text() == LESSON.ablation.gradients_placeholder.format(
        missing=2, total=4
    )


def test_the_player_draws_its_curves_on_the_server() -> None:
    view = player_view(RECORDING, LESSON, NON_FINITE_ROW)
    assert view is not None
    accuracy, loss = view.accuracy_chart, view.loss_chart
    # The played seed in full over the two others, faint, with their band between them.
    assert [line.css for line in accuracy.lines] == ["other", "other", "played"]
    assert accuracy.band and [rule.text for rule in accuracy.rules] == ["90 %", "12.5 %"]
    assert [tick.text for tick in accuracy.y_ticks] == ["0 %", "25 %", "50 %", "75 %", "100 %"]
    assert [tick.text for tick in accuracy.x_ticks][-1] == "600"
    # The played loss is not a number at step 300: its line breaks there, with a cross.
    assert loss.lines[-1].path.count("M") == 2 and len(loss.crosses) == 1
    assert not loss.rules
    # The frames hold the drawing (a named image), with or without JavaScript; its axes are
    # titled, the value axis above the plot.
    state = SimpleNamespace(ablation=SimpleNamespace(available=True))
    soup = BeautifulSoup(
        str(FRAGMENTS.player(SimpleNamespace(lesson=LESSON, player=view, state=state))),
        "html.parser",
    )
    charts = soup.select(".charts .curve-frame")
    assert [chart["id"] for chart in charts] == ["chart-accuracy", "chart-loss"]
    for chart, title in zip(charts, ("Accuracy", "Loss"), strict=True):
        assert str(chart["role"]) == "img" and "against training step" in str(chart["aria-label"])
        drawing = chart.select_one("svg.curve-svg")
        assert drawing is not None and drawing.find_parent("noscript") is None
        assert drawing.select(".plot path.line")
        titles = [text.get_text() for text in drawing.select("text.axis-title")]
        assert titles == [title, "Training step"]
    # One row played: nothing to draw together yet.
    assert view.together is None and soup.select_one("#together") is None


def played_together(keys: list[str]) -> CurveChart:
    view = player_view(RECORDING, LESSON, keys[-1], keys)
    assert view is not None and view.together is not None
    return view.together.chart


def test_several_played_rows_share_one_chart_told_apart_without_colour() -> None:
    view = player_view(RECORDING, LESSON, "neither", ["both", "neither", "layernorm_only"])
    assert view is not None and view.together is not None
    together = view.together
    # In the lesson's order, each with its own line pattern and end marker.
    assert [line.label for line in together.chart.lines] == [
        "Both",
        "Layer norm only",
        "Neither",
    ]
    assert len({line.dash for line in together.chart.lines}) == 3
    assert len({line.marker for line in together.chart.lines}) == 3
    ends = [line.end for line in together.chart.lines]
    assert all(end is not None for end in ends)
    # Layer norm only and Neither end at 6.2 % and 6.1 %: their markers sit side by side.
    (x1, y1), (x2, y2) = ends[1] or (0, 0), ends[2] or (0, 0)
    assert max(abs(x1 - x2), abs(y1 - y2)) >= MARKER_CLEARANCE
    assert together.label == (
        "Held-out per-token accuracy against training step: Both ends at 100.0 %, "
        "Layer norm only ends at 6.2 % and Neither ends at 6.1 %."
    )
    state = SimpleNamespace(ablation=SimpleNamespace(available=True))
    soup = BeautifulSoup(
        str(FRAGMENTS.player(SimpleNamespace(lesson=LESSON, player=view, state=state))),
        "html.parser",
    )
    figure = soup.select_one("#together")
    assert figure is not None and figure["data-result-for"] == "neither"
    frame = figure.select_one('[role="img"]')
    # Drawn with each "%" held to its figure by a no-break space.
    assert frame is not None and frame["aria-label"] == together.label.replace(" %", "\u00a0%")
    # Drawn outside <noscript>: it shows with JavaScript too.
    assert figure.find_parent("noscript") is None and figure.select("svg.curve-svg path.line")
    legend = [item.get_text(strip=True) for item in figure.select("#together-legend li")]
    assert legend == ["Both", "Layer norm only", "Neither"]
    assert played_together(["both", "neither"]).lines[0].label == "Both"


def test_gradients_need_rows() -> None:
    assert gradients_view(sample_recording(rows=()), LESSON) is None


def test_a_single_recorded_update_draws_one_chart() -> None:
    data = RECORDING.model_dump(mode="json")
    for run in data["runs"]:
        run["block_grad_norms"] = run["block_grad_norms"][:1]
    view = gradients_view(Runs.model_validate(data), LESSON)
    assert view is not None and [chart.step for chart in view.charts] == [1]
