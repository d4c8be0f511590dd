"""The recording as the page shows it (normdive.web.player), and the vendored uPlot."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import NON_FINITE_ROW, ablation_recording
from normdive.lesson.content import load_lesson
from normdive.recording.format import ROW_KEYS, Recording
from normdive.web.player import (
    BAR_AREA_HEIGHT,
    MIN_BAR_HEIGHT,
    PlayerView,
    gradients_view,
    norm_text,
    player_view,
    provenance_view,
    row_key,
    row_payload,
)
from normdive.web.rendering import STATIC_DIR, Renderer
from sample_recordings import sample_recording

LESSON = load_lesson()
REPO = Path(__file__).resolve().parents[1]
VENDOR = STATIC_DIR / "vendor" / "uplot"
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
    assert view.data_url == "/recording/rows/residual_only.json"
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
        update={"provenance": RECORDING.provenance.model_copy(update={"created_at": "today"})}
    )
    assert provenance_view(odd, LESSON, "x.json").created_at == "today"


def test_the_gradient_bars_share_one_logarithmic_scale() -> None:
    view = gradients_view(RECORDING, LESSON)
    assert view is not None
    assert [chart.step for chart in view.charts] == [1, 600]
    assert [row.key for row in view.charts[0].rows] == list(ROW_KEYS)
    bars = {row.key: row.bars for chart in view.charts[:1] for row in chart.rows}
    # The largest norm reaches the top; neither's zero is a flat mark; its others climb.
    tallest = max(bar.height for row in bars.values() for bar in row)
    assert tallest == BAR_AREA_HEIGHT
    neither = bars["neither"]
    assert neither[0].marked and neither[0].height == MIN_BAR_HEIGHT and neither[0].text == "0"
    heights = [bar.height for bar in neither[1:]]
    assert heights == sorted(heights) and heights[0] < heights[-1]
    # Equal norms draw equal bars; every bar sits on the axis.
    assert len({bar.height for bar in bars["residual_only"]}) == 1
    for bar in (bar for row in bars.values() for bar in row):
        assert math.isclose(bar.y + bar.height, BAR_AREA_HEIGHT)
    assert view.low == "1e-28" and view.high == "4"
    assert len(view.table) == 8
    assert view.table[0].label == "Both" and view.table[0].step == 1


def test_gradients_need_rows() -> None:
    assert gradients_view(sample_recording(rows=()), LESSON) is None


def test_a_single_recorded_update_draws_one_chart() -> None:
    data = RECORDING.model_dump(mode="json")
    for row in data["rows"]:
        row["block_grad_norms"] = row["block_grad_norms"][:1]
    view = gradients_view(Recording.model_validate(data), LESSON)
    assert view is not None and [chart.step for chart in view.charts] == [1]


def test_the_row_payload_holds_every_seed_with_its_markers() -> None:
    payload = row_payload(RECORDING, LESSON, NON_FINITE_ROW)
    assert payload is not None
    assert [series["seed"] for series in payload["series"]] == [0, 1, 2]
    assert payload["series"][0]["loss"][1] == "nan"
    assert payload["chance_level"] == 1 / 16 and payload["chance_max"] == 0.125
    # It is JSON as it stands (the markers are strings, never NaN).
    assert json.loads(json.dumps(payload, allow_nan=False)) == payload
    assert row_payload(RECORDING, LESSON, "best") is None


@pytest.mark.node  # reads node_modules (npm ci)
def test_the_vendored_uplot_is_the_pinned_package_unchanged() -> None:
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    package = json.loads((REPO / "package.json").read_text(encoding="utf-8"))
    version = package["devDependencies"]["uplot"]
    assert readme.startswith(f"# uPlot {version} (vendored)")
    for name in ("uPlot.esm.js", "uPlot.min.css", "LICENSE"):
        digest = hashlib.sha256((VENDOR / name).read_bytes()).hexdigest()
        assert re.search(rf"`{re.escape(name)}`.*`{digest}`", readme), name
        # `make test` installs the pinned package (npm ci) before the tests run.
        package_dir = REPO / "node_modules" / "uplot"
        source = package_dir / name if name == "LICENSE" else package_dir / "dist" / name
        assert hashlib.sha256(source.read_bytes()).hexdigest() == digest, name
    assert "MIT" in (VENDOR / "LICENSE").read_text(encoding="utf-8")
