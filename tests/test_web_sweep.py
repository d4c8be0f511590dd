"""The panel "Does it hold at other depths?" over HTTP: there only once the gate has closed,
its figures only when asked for (never in the lesson page), a plain sentence when no sweep
is recorded, the table and sentences from the sweep file, any cell in the player with its
curves drawn by the server, and the compare section's line about other depths."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from starlette.testclient import TestClient

from helpers import SettingsFactory, ablation_recording, soup, words, write_recording
from lesson_answers import (
    JSON,
    LESSON,
    post_each,
    steps_to_the_gate,
)
from normdive.lesson.translations import load_translation
from normdive.progress.sweep import sweep_sentences
from normdive.recording.format import ROW_KEYS
from normdive.recording.runs import Runs
from normdive.recording.sweep import sweep_path_for
from normdive.recording.sweep_reader import Cell
from normdive.web.app import create_app
from normdive.web.views.sweep import cell_view, unbroken
from page_client import PageClient
from sample_sweeps import FLIP_AT_4, FLIP_AT_8, sample_sweep


def close_the_gate(
    client: TestClient, choice: str = "residual", played: tuple[str, ...] = ROW_KEYS
) -> None:
    post_each(client, steps_to_the_gate(choice, played))
    assert client.get("/api/state").json()["state"]["gate"]["closed"] is True


@pytest.fixture
def recording_path(tmp_path: Path) -> Path:
    return write_recording(tmp_path, ablation_recording("both"))


def with_sweep(recording_path: Path, sweep: Runs) -> None:
    sweep_path_for(recording_path).write_text(sweep.model_dump_json(), encoding="utf-8")


def test_before_the_gate_closes_there_is_no_panel_and_no_figures(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with_sweep(recording_path, sample_sweep())
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        client.post("/predict", data={"choice": "residual"}, headers=JSON)
        assert soup(client.get("/").text).select_one("#sweep") is None
        for url in ("/depths", "/depths/panel"):
            answer = client.get(url)
            assert answer.status_code == 409
            assert words(soup(answer.text).select_one("#sweep-problem")) == LESSON.sweep.locked


def test_the_panel_says_so_plainly_when_no_sweep_is_recorded(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        page = soup(client.get("/").text)
        panel = page.select_one("#gate #sweep")
        assert isinstance(panel, Tag)
        assert words(panel.select_one("h4")) == LESSON.sweep.heading
        assert words(panel.select_one("summary")) == LESSON.sweep.open_label
        link = panel.select_one("#sweep-body a")
        assert isinstance(link, Tag) and link["href"] == "/depths#sweep"
        assert words(link) == LESSON.sweep.page_label != LESSON.sweep.open_label
        for url in ("/depths", "/depths/panel"):
            answer = client.get(url)
            assert answer.status_code == 200
            assert words(soup(answer.text).select_one("#sweep-problem")) == LESSON.sweep.missing
        assert page.select_one("#compare-depths") is None


def test_the_lesson_page_holds_none_of_the_sweeps_figures(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with_sweep(recording_path, sample_sweep())
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        html = client.get("/").text
    assert "heatmap" not in html and "sweep-player" not in html
    assert sweep_sentences(sample_sweep(), LESSON)[0] not in html


def grid(page: BeautifulSoup, init: str) -> list[list[str]]:
    table = page.select_one(f"#sweep-grid-{init}")
    assert isinstance(table, Tag)
    return [
        [" ".join(cell.get_text().split()) for cell in row.select("th, td")]
        for row in table.select("tr")
    ]


@pytest.mark.parametrize(
    ("seeds", "said"),
    [((0, 1, 2), "seeds 0, 1 and 2"), ((3,), "seed 3"), ((0, 2), "seeds 0 and 2")],
)
def test_the_intro_says_what_the_learner_played_from_the_recording(
    make_settings: SettingsFactory, tmp_path: Path, seeds: tuple[int, ...], said: str
) -> None:
    recording_path = write_recording(tmp_path, ablation_recording("both", seeds=seeds))
    with_sweep(recording_path, sample_sweep())
    expected = (
        f"What you played is what the four rows did at depth 8 with GPT-2 initialisation, "
        f"recorded at {said}. {LESSON.sweep.intro}"
    )
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        assert words(soup(client.get("/").text).select_one("#sweep-intro")) == words_of(expected)
        assert words(soup(client.get("/depths").text).select_one("#sweep-intro")) == words_of(
            expected
        )


def words_of(text: str) -> str:
    return " ".join(text.split())


def test_the_panel_shows_the_sweep_by_depth_and_row_with_its_sentences(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with_sweep(recording_path, sample_sweep())
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        answer = client.get("/depths/panel")
    assert answer.status_code == 200
    panel = soup(answer.text)
    sentences = [words(li) for li in panel.select("#sweep-sentences li")]
    assert sentences == sweep_sentences(sample_sweep(), LESSON)
    rows = grid(panel, "gpt2")
    assert rows[0] == ["Depth", "Both", "Residuals only", "Layer norm only", "Neither"]
    # The depth and initialisation the learner played (the recording's: 8, GPT-2) is marked
    # in words, in that table only.
    here = LESSON.sweep.here_label
    assert [row[0] for row in rows[1:]] == [
        "2 seeds 0, 1 and 2",
        "4 seeds 0, 1 and 2",
        f"8 seeds 0, 1 and 2 {here}",
        "16 seed 0",
    ]
    assert [row[0] for row in grid(panel, "pytorch")[1:]][2] == "8 seeds 0, 1 and 2"
    assert len(panel.select("tr.here")) == 1
    play_4 = ", play Layer norm only at depth 4, GPT-2 initialisation"
    assert rows[2][3] == f"87.9 %{play_4} same at every seed"
    cell = panel.select_one('#sweep-grid-gpt2 a[data-sweep-cell="4-gpt2-layernorm_only"]')
    assert isinstance(cell, Tag)
    assert cell["href"] == "/depths?cell=4-gpt2-layernorm_only#sweep-player"
    assert "heat-9" in (cell.parent or Tag(name="x"))["class"]
    assert grid(panel, "pytorch")[3][2].startswith("100.0 %")
    play_16 = ", play Residuals only at depth 16, GPT-2 initialisation"
    assert rows[4][2] == f"25.0 %{play_16} one seed"  # no spread from a single seed
    caption = words(panel.select_one("#sweep-grid-pytorch-caption"))
    assert caption == "Final held-out accuracy with PyTorch's default initialisation"


def test_a_sweep_where_the_answer_flips_elsewhere_moves_the_page(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        with_sweep(recording_path, sample_sweep(FLIP_AT_8))
        first = [words(li) for li in soup(client.get("/depths").text).select("#sweep-sentences li")]
        with_sweep(recording_path, sample_sweep(FLIP_AT_4))
        moved = [words(li) for li in soup(client.get("/depths").text).select("#sweep-sentences li")]
    assert "With GPT-2 initialisation, the answer changes between depth 4 and depth 8." in first
    assert "With GPT-2 initialisation, the answer changes between depth 2 and depth 4." in moved
    assert moved == sweep_sentences(sample_sweep(FLIP_AT_4), LESSON) != first


def test_any_cell_plays_in_the_player_with_and_without_javascript(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with_sweep(recording_path, sample_sweep())
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        page = soup(client.get("/depths?cell=16-pytorch-residual_only").text)
        player = page.select_one("#sweep-player")
        assert isinstance(player, Tag)
        assert words(player.select_one("#sweep-player-title")) == (
            "Residuals only, depth 16, PyTorch's default initialisation, seed 0"
        )
        assert words(player.select_one("#sweep-final-accuracy")) == "100.0 %"
        assert len(player.select(".curve-table tbody tr")) == 3
        note = words(page.select_one("#sweep-player-note"))
        assert note.startswith("600 training steps. Only this seed was trained at this depth.")
        selected = page.select_one("td.selected a")
        assert isinstance(selected, Tag) and selected["aria-current"] == "true"

        # A cell with other seeds names their final figures in words, and what the charts
        # draw: the server draws them, with or without JavaScript.
        other = soup(client.get("/depths?cell=4-gpt2-layernorm_only").text)
        note_tag = other.select_one("#sweep-player-note")
        assert isinstance(note_tag, Tag)
        assert words(note_tag).startswith(
            "600 training steps. The other seeds of this cell ended at 87.9 % (seed 1) and "
            "87.9 % (seed 2)."
        )
        chart_note = note_tag.select_one("[data-chart-note]")
        assert isinstance(chart_note, Tag) and not chart_note.has_attr("hidden")
        assert "faint lines" in words(chart_note)
        drawing = other.select_one("#sweep-chart-accuracy svg.curve-svg")
        assert drawing is not None
        assert [line["class"] for line in drawing.select("g > path.line")] == [["line"]] * 3
        assert drawing.select_one("polygon.band") is not None
        # Depth 16 trained one seed: its one line, no band.
        alone = player.select_one("#sweep-chart-accuracy svg.curve-svg")
        assert alone is not None and len(alone.select("g > path.line")) == 1
        assert alone.select_one("polygon.band") is None

        for bad in ("3-gpt2-both", "8-xavier-both", "8-gpt2-half", "x", "8-gpt2-both-2"):
            assert client.get(f"/depths?cell={bad}").status_code == 200  # the table, no player
        assert soup(client.get("/depths?cell=x").text).select_one("#sweep-player h3") is None


def test_an_unusable_sweep_is_a_plain_sentence_not_an_error(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    sweep_path_for(recording_path).write_text('{"kind": "depth_sweep"}', encoding="utf-8")
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        answer = client.get("/depths/panel")
        assert answer.status_code == 200
        assert words(soup(answer.text).select_one("#sweep-problem")) == LESSON.sweep.unusable
        assert client.get("/").status_code == 200


def test_the_compare_section_adds_a_line_when_the_prediction_holds_at_other_depths(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    # The sample recording: the residual connections recover more at its depth (8).
    with_sweep(recording_path, sample_sweep(FLIP_AT_8))
    app = create_app(make_settings(recording_path=recording_path))
    with PageClient(app) as wrong, PageClient(app) as right:
        close_the_gate(wrong, "layer_norm")
        close_the_gate(right, "residual")
        line = soup(wrong.get("/").text).select_one("#compare-depths")
        assert words(line) == (
            "At other depths your prediction, layer norm, is what happens: with GPT-2 "
            "initialisation, at depths 2 and 4."
        )
        assert soup(right.get("/").text).select_one("#compare-depths") is None


def test_the_line_about_other_depths_waits_for_both_single_component_rows(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    # The gate closes on the best row; "at other depths your prediction is what happens"
    # would tell the depth's own answer before the learner has played the row that shows it.
    with_sweep(recording_path, sample_sweep(FLIP_AT_8))
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client, "layer_norm", played=("both", "residual_only"))
        assert soup(client.get("/").text).select_one("#compare-depths") is None
        assert client.post("/rows/layernorm_only/play", headers=JSON).status_code == 200
        assert soup(client.get("/").text).select_one("#compare-depths") is not None


@pytest.mark.parametrize(
    ("by_seed", "spread"),
    [
        (((0, 0.5),), "one seed"),
        (((0, 1.0), (1, 1.0), (2, 1.0)), "same at every seed"),
        (((0, 0.5), (1, 0.25)), "25.0\u00a0% to 50.0\u00a0%"),
        # A seed that ended on no number is not "the same" as one that ended on a figure, and
        # no range holds it: each seed's figure, in seed order.
        (((0, 0.5), (1, float("nan"))), "50.0\u00a0% and not a number"),
        (((0, 0.5), (1, float("nan")), (2, 0.25)), "50.0\u00a0%, not a number and 25.0\u00a0%"),
        (((0, 0.5), (1, float("inf"))), "50.0\u00a0% and infinity"),
    ],
)
def test_a_cells_spread_says_what_its_seeds_did(
    by_seed: tuple[tuple[int, float], ...], spread: str
) -> None:
    cell = Cell(depth=4, init="gpt2", key="layernorm_only", by_seed=by_seed)
    assert cell_view(cell, LESSON, chance=1 / 16, picked=None).spread == spread


@pytest.mark.parametrize(
    ("figure", "kept_whole"),
    [
        ("25.2 %", "25.2\u00a0%"),
        ("90 %", "90\u00a0%"),
        # Words still wrap between words: only a number and its "%" are held together.
        ("not a number", "not a number"),
        ("minus infinity", "minus infinity"),
    ],
)
def test_a_percentage_keeps_its_sign_and_words_still_wrap(figure: str, kept_whole: str) -> None:
    assert unbroken(figure) == kept_whole


@pytest.mark.parametrize(
    ("locale", "column", "seeds", "suffix"),
    [
        ("de", "Tiefe", "Seeds 0, 1 und 2", ", Beide in Tiefe 2 abspielen, GPT-2-Initialisierung"),
        ("ar", "العمق", "البذور 0، 1 و2", "، شغّل كلاهما بعمق 2، تهيئة GPT-2"),
    ],
)
def test_the_depths_page_in_german_and_arabic(
    make_settings: SettingsFactory,
    recording_path: Path,
    locale: str,
    column: str,
    seeds: str,
    suffix: str,
) -> None:
    lesson, _ = load_translation(locale)
    with_sweep(recording_path, sample_sweep())
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        page = soup(client.get("/depths", headers={"Accept-Language": locale}).text)
        assert words(page.select_one("#sweep-title")) == lesson.sweep.heading
        table = page.select_one("#sweep-grid-gpt2")
        assert isinstance(table, Tag)
        assert words(table.select_one("thead th")) == column
        assert words(table.select_one("tbody .depth-seeds")) == seeds
        assert words(table.select_one("tbody td .visually-hidden")) == suffix.strip()
        # The player's note under a picked cell is in the language too.
        picked = soup(
            client.get("/depths?cell=8-gpt2-both", headers={"Accept-Language": locale}).text
        )
        note = words(picked.select_one("#sweep-player-note"))
        assert "The dashed lines" not in note and "The faint lines" not in note
