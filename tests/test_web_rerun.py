"""The panel "Re-run the ablation on this device" over HTTP: there only once the gate has closed,
trained only once every recorded row has played, and never part of the gate; the four rows
kept once each, in the lesson's order; the side-by-side drawn by the server with the sentence
composed from the numbers once a set is whole; the chart drawn by the server, each row's
recorded cell and its kept curve in the row's colour; bad input answered with a message, never
a 500; a row raced by several requests kept once."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from bs4 import Tag

from helpers import SettingsFactory, ablation_recording, soup, words, write_recording
from lesson_answers import JSON, LESSON, ROW_PREDICTIONS, post_each, steps_to_the_gate
from normdive.progress.events import EventKind
from normdive.progress.rerun import MAX_RERUNS
from normdive.store.event_store import EventList, Store
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.views.rerun import ROW_COLOURS
from page_client import PageClient
from sample_lab import TINY_BASE, sample_lab_grid, write_lab_grid

TEXT = LESSON.rerun
ROWS = [row.key for row in LESSON.rows]
LABELS = {row.key: row.label for row in LESSON.rows}
# The device's finals that keep the sample recording's ranking (1.0 / 0.2 / 0.062 / 0.061):
# both above residuals only above the two level at chance.
SAME_RANKING = {"both": 1.0, "residual_only": 0.3, "layernorm_only": 0.25, "neither": 0.26}


@pytest.fixture
def recording_path(tmp_path: Path) -> Path:
    path = write_recording(tmp_path, ablation_recording("both"))
    write_lab_grid(path, sample_lab_grid(with_rerun=True))
    return path


def result(accuracy: float, steps: int = TINY_BASE.steps) -> str:
    every = TINY_BASE.eval_every
    curve = [
        {
            "step": step,
            "train_loss": None if step == 0 else 0.5,
            "heldout_loss": 0.5,
            "heldout_accuracy": 0.25 + (accuracy - 0.25) * step / steps,
        }
        for step in range(0, steps + 1, every)
    ]
    return json.dumps(
        {
            "final": {"step": steps, "heldout_loss": 0.5, "heldout_accuracy": accuracy},
            "curve": curve,
        }
    )


def keep(client: PageClient, number: int, row: str, accuracy: float) -> Any:
    return client.post(
        f"/lab/reruns/{number}/rows/{row}", data={"result": result(accuracy)}, headers=JSON
    )


def kept_rows(store: Store, client: PageClient) -> list[dict[str, Any]]:
    learner_id = client.get("/api/state").json()["learner_id"]
    events = store.read(learner_id, EventList()).events
    return [dict(e.payload) for e in events if e.kind is EventKind.RERUN_ROW_FINISHED]


def gate(client: PageClient) -> dict[str, Any]:
    state: dict[str, Any] = client.get("/api/state").json()["state"]["gate"]
    return state


def test_locked_before_the_gate_and_not_trained_before_every_row_has_played(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        client.post("/predict", data={"choice": "residual"}, headers=JSON)
        assert soup(client.get("/").text).select_one("#rerun") is None
        answer = client.get("/lab/rerun/panel")
        assert answer.status_code == 409
        assert words(soup(answer.text).select_one("#rerun-problem")) == TEXT.locked
        refused = keep(client, 1, "both", 1.0)
        assert refused.status_code == 409 and refused.json()["message"] == TEXT.locked

        # The gate closes on the best row alone; the re-run waits for all four.
        post_each(client, steps_to_the_gate(played=("both",))[1:])
        assert gate(client)["closed"] is True
        page = soup(client.get("/").text)
        assert words(page.select_one("#rerun-not-played")) == TEXT.not_played
        assert page.select_one("#rerun-panel") is None
        panel = soup(client.get("/lab/rerun/panel").text)
        assert words(panel.select_one("#rerun-problem")) == TEXT.not_played
        refused = keep(client, 1, "both", 1.0)
        assert refused.status_code == 409 and refused.json()["message"] == TEXT.not_played

        # Playing the other three rows redraws the gate's region with the panel in it.
        for key in ROWS[1:]:
            answer = client.post(f"/rows/{key}/play", headers=JSON)
            assert answer.status_code == 200
        assert '<details id="rerun-panel"' in answer.json()["fragments"]["gate"]


def test_the_panel_states_both_stacks_and_the_set_the_browser_trains(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        post_each(client, steps_to_the_gate())
        page = soup(client.get("/").text)
        assert page.select_one("#rerun-panel") is not None
        assert page.select_one("#rerun-train") is None  # the controls load when it opens
        panel = soup(client.get("/lab/rerun/panel").text)
        smaller = words(panel.select_one("#rerun-smaller"))
        here = TEXT.stack.format(
            depth=TEXT.config.depth,
            d_model=TINY_BASE.d_model,
            copy_length=TINY_BASE.copy_length,
            steps=TINY_BASE.steps,
            batch_size=TINY_BASE.batch_size,
        )
        recorded = ablation_recording().plan.base
        there = TEXT.stack.format(**recorded.model_dump())
        assert here in smaller and there in smaller
        train = panel.select_one("#rerun-train")
        assert isinstance(train, Tag)
        data = json.loads(str(train["data-set"]))
        assert (data["number"], data["next"], data["shownComplete"]) == (1, 0, False)
        assert [row["key"] for row in data["rows"]] == ROWS
        both = data["rows"][0]
        assert both["config"]["depth"] == TEXT.config.depth
        assert both["config"]["d_model"] == TINY_BASE.d_model
        assert both["config"]["eps"] == float(TEXT.config.eps) and both["seed"] == TEXT.config.seed
        assert data["rows"][1]["config"]["eps"] is None  # residuals only: no layer norm
        assert words(panel.select_one("#rerun-start")) == TEXT.start_label
        lines = {
            str(tr["data-rerun-row"]): [words(td) for td in tr.select("td")]
            for tr in panel.select("#rerun-table tbody tr")
        }
        outcomes: dict[str, str] = {o.id: o.label for o in LESSON.outcomes}
        # The device's column first (what the phone shows without scrolling), then the
        # prediction, the recording's outcome and the grid's cell at the re-run's size.
        assert all(line[0] == TEXT.not_yet for line in lines.values())
        assert lines["both"][1] == outcomes[ROW_PREDICTIONS["both"]]
        assert lines["both"][2].endswith("100.0 %")
        assert lines["residual_only"][3] == "95.0 %"


def test_the_chart_draws_each_rows_recorded_cell_and_its_kept_curve(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        post_each(client, steps_to_the_gate())
        assert keep(client, 1, "both", 1.0).status_code == 200
        panel = soup(client.get("/lab/rerun/panel").text)
        frame = panel.select_one("#rerun-chart")
        assert isinstance(frame, Tag)
        assert frame["role"] == "img" and frame["aria-label"] == TEXT.chart_label
        svg = frame.select_one("svg.curve-svg[data-plot]")
        assert isinstance(svg, Tag)
        # Each row's recorded cell dashed, in the colour its name has in the table.
        recorded = svg.select("g.recorded")
        assert [g["color"] for g in recorded] == list(ROW_COLOURS)
        assert all(g.select_one("path.line")["d"] for g in recorded)  # type: ignore[index]
        swatches = [
            panel.select_one(f'tr[data-rerun-row="{key}"] .swatch rect')["fill"]  # type: ignore[index]
            for key in ROWS
        ]
        assert swatches == list(ROW_COLOURS)
        # One line per row for the device, named for the script that grows it: the kept row's
        # curve as the server holds it, the others empty until they train.
        device = {str(g["data-series"]): g for g in svg.select("g.device")}
        assert list(device) == ROWS
        assert [g["color"] for g in device.values()] == list(ROW_COLOURS)
        lines = {key: str(g.select_one("path.line")["d"]) for key, g in device.items()}  # type: ignore[index]
        assert lines["both"].startswith("M") and lines["both"].count("L") == 4
        assert all(lines[key] == "" for key in ROWS[1:])
        # The rows' end markers differ in shape as well as colour.
        markers = {str(g.select_one("path.marker")["d"]) for g in device.values()}  # type: ignore[index]
        assert len(markers) == 4


@pytest.mark.both_databases
def test_four_rows_kept_once_each_in_order_then_the_sentence(
    make_settings: SettingsFactory, recording_path: Path, store: Store
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        post_each(client, steps_to_the_gate())
        before = gate(client)
        out_of_order = keep(client, 1, "neither", 0.3)
        assert out_of_order.status_code == 409
        assert LABELS["both"] in out_of_order.json()["message"]
        assert keep(client, 1, "nonsense", 0.3).status_code == 422
        assert keep(client, 2, "both", 0.3).status_code == 409  # set 1 is the open one
        bad = client.post("/lab/reruns/1/rows/both", data={"result": "{"}, headers=JSON)
        assert bad.status_code == 422 and "could not be read" in bad.json()["message"]
        assert kept_rows(store, client) == []

        first = keep(client, 1, "both", SAME_RANKING["both"])
        assert first.status_code == 200, first.text
        said = first.json()["message"]
        assert said == TEXT.row_finished.format(name=LABELS["both"], accuracy="100.0 %")
        results = soup(first.json()["results"])
        assert words(results.select_one('tr[data-rerun-row="both"] td.device')).endswith("100.0 %")
        assert words(results.select_one("#rerun-kept")) == TEXT.kept_rows.format(done=1, rows=4)
        again = keep(client, 1, "both", 0.5)
        assert again.status_code == 409 and "kept already" in again.json()["message"]

        for key in ROWS[1:]:
            answer = keep(client, 1, key, SAME_RANKING[key])
            assert answer.status_code == 200, answer.text
        body = answer.json()
        verdict = words(soup(body["results"]).select_one("#rerun-verdict"))
        assert TEXT.all_same in verdict and TEXT.all_same in body["message"]
        assert TEXT.same_order.split("{")[0].strip() in verdict
        assert body["startLabel"] == TEXT.again_label
        data = json.loads(body["data"])
        assert (data["number"], data["next"], data["shownComplete"]) == (2, 0, True)
        assert [p["row"] for p in kept_rows(store, client)] == ROWS
        assert gate(client) == before  # the re-run never changes the gate

        # A second set: the first moves to the history with its ranking in words.
        for key, accuracy in (("both", 0.3), ("residual_only", 1.0)):
            assert keep(client, 2, key, accuracy).status_code == 200
        panel = soup(client.get("/lab/rerun/panel").text)
        assert words(panel.select_one("#rerun-start")) == TEXT.continue_label
        history = words(panel.select_one("#rerun-history"))
        assert (
            history.startswith(f"{TEXT.history_line.split('{')[0]}1") and TEXT.all_same in history
        )


def test_a_ranking_that_differs_says_where(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        post_each(client, steps_to_the_gate())
        # Layer norm alone above residuals alone: the recording has it the other way round.
        device = {"both": 1.0, "residual_only": 0.25, "layernorm_only": 0.6, "neither": 0.25}
        for key in ROWS:
            answer = keep(client, 1, key, device[key])
        verdict = words(soup(answer.json()["results"]).select_one("#rerun-verdict"))
        above = TEXT.above.format
        assert (
            TEXT.differs_pair.format(
                device=above(high=LABELS["layernorm_only"], low=LABELS["residual_only"]),
                recorded=above(high=LABELS["residual_only"], low=LABELS["layernorm_only"]),
            )
            in verdict
        )
        assert TEXT.all_same not in verdict


@pytest.mark.both_databases
def test_a_row_raced_by_several_requests_is_kept_once(
    make_settings: SettingsFactory, recording_path: Path, store: Store
) -> None:
    app = create_app(make_settings(recording_path=recording_path))
    with PageClient(app) as client:
        post_each(client, steps_to_the_gate())
        cookie = client.cookies.get(COOKIE_NAME)
        token = client.form_token()

        def post_once(_: int) -> int:
            # A client of its own per thread, on the app the outer client started (and stops).
            other = PageClient(app, cookies={COOKIE_NAME: str(cookie)})
            answer = other.post(
                "/lab/reruns/1/rows/both",
                data={"result": result(1.0)},
                headers={**JSON, "X-CSRF-Token": str(token)},
            )
            return answer.status_code

        with ThreadPoolExecutor(max_workers=6) as pool:
            statuses = sorted(pool.map(post_once, range(6)))
        assert statuses == [200] + [409] * 5
        assert len(kept_rows(store, client)) == 1


def test_a_missing_grid_or_a_recording_gone_bad_is_said_plainly(
    make_settings: SettingsFactory, tmp_path: Path, store: Store
) -> None:
    recording = write_recording(tmp_path, ablation_recording("both"))
    with PageClient(create_app(make_settings(recording_path=recording))) as client:
        post_each(client, steps_to_the_gate())
        panel = soup(client.get("/lab/rerun/panel").text)
        assert words(panel.select_one("#rerun-problem")) == LESSON.lab.missing
        refused = keep(client, 1, "both", 1.0)
        assert refused.status_code == 503 and refused.json()["message"] == LESSON.lab.missing
        assert kept_rows(store, client) == []
    # The gate closed, then the server lost its recording: the panel says why, not "play the
    # four rows" (they cannot be played now).
    gone = make_settings(recording_path=tmp_path / "gone.json")
    with PageClient(create_app(gone), cookies=client.cookies) as later:
        assert gate(later)["closed"] is True
        problem = words(soup(later.get("/lab/rerun/panel").text).select_one("#rerun-problem"))
        assert problem and problem != TEXT.not_played


def test_after_the_last_set_kept_the_panel_says_so_before_anything_trains(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    settings = make_settings(recording_path=recording_path, attempts_per_minute=10_000)
    with PageClient(create_app(settings)) as client:
        post_each(client, steps_to_the_gate())
        for number in range(1, MAX_RERUNS + 1):
            for key in ROWS:
                assert keep(client, number, key, SAME_RANKING[key]).status_code == 200
        panel = soup(client.get("/lab/rerun/panel").text)
        start = panel.select_one("#rerun-start")
        assert isinstance(start, Tag) and start.has_attr("disabled")
        assert start["aria-describedby"] == "rerun-full"
        assert str(MAX_RERUNS) in words(panel.select_one("#rerun-full"))
        train = panel.select_one("#rerun-train")
        assert isinstance(train, Tag) and json.loads(str(train["data-set"]))["full"] is True
        assert keep(client, MAX_RERUNS + 1, ROWS[0], 1.0).status_code == 409
