"""The ablation over HTTP: row predictions (POST /rows/{row}/predict), plays
(POST /rows/{row}/play) and the played row's curves drawn by the server, hints
(POST /hints/{rung}), compare with the aggregate of all learners, the gate, and recordings
that are missing, corrupt or lack the rows. Sample recordings written to tmp files only."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import NON_FINITE_ROW, SettingsFactory, ablation_recording, write_recording
from lesson_answers import LESSON, OTHER_WRONG_READING_CHOICE, RIGHT_NUMBERS
from lesson_answers import RIGHT_READING_ID as RIGHT_READING
from lesson_answers import WRONG_READING_ID as WRONG_READING
from normdive.lesson.plurals import counted
from normdive.progress.actions import MAX_ECHOED_CHARS, unknown_row_message
from normdive.recording.format import ROW_KEYS
from normdive.web.app import create_app
from page_client import PageClient
from sample_recordings import sample_recording

JSON = {"Accept": "application/json"}
PREDICTIONS = {
    "both": "learns",
    "residual_only": "partial",
    "layernorm_only": "chance",
    "neither": "chance",
}

Learner = Callable[[], TestClient]


def soup_of(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def one(soup: BeautifulSoup | Tag, selector: str) -> Tag:
    found = soup.select_one(selector)
    assert isinstance(found, Tag), selector
    return found


def text(soup: BeautifulSoup | Tag, selector: str) -> str:
    return " ".join(one(soup, selector).get_text().split())


def words(value: str) -> str:
    return " ".join(value.split())


def page(client: TestClient, path: str = "/") -> BeautifulSoup:
    response = client.get(path)
    assert response.status_code == 200
    return soup_of(response.text)


def state(client: TestClient) -> dict[str, object]:
    data = client.get("/api/state").json()["state"]
    assert isinstance(data, dict)
    return data


def ablation(client: TestClient) -> dict[str, object]:
    data = state(client)["ablation"]
    assert isinstance(data, dict)
    return data


def commit(client: TestClient, choice: str = "residual") -> None:
    assert client.post("/predict", data={"choice": choice}).status_code == 303


def predict_all(client: TestClient, predictions: dict[str, str] = PREDICTIONS) -> None:
    for key, outcome in predictions.items():
        response = client.post(f"/rows/{key}/predict", data={"outcome": outcome})
        assert response.status_code == 303, response.text


def app_with(make_settings: SettingsFactory, path: Path, **overrides: object) -> Starlette:
    return create_app(make_settings(recording_path=path, **overrides))


@pytest.fixture
def app(make_settings: SettingsFactory, tmp_path: Path) -> Starlette:
    """The app reading a sample recording (best row: both) from a tmp file."""
    return app_with(make_settings, write_recording(tmp_path, ablation_recording()))


@pytest.fixture
def learner(make_client: Learner) -> Learner:
    """learner() -> a new learner (own cookie jar) on the same app."""
    return make_client


@pytest.fixture
def client(learner: Learner) -> TestClient:
    return learner()


# --- the page with a recording -------------------------------------------------------------------


def test_the_page_states_the_bands_from_lesson_data_and_the_chance_level(
    client: TestClient,
) -> None:
    bands = one(page(client), "#ablation-bands")
    assert words(LESSON.bands.intro) in text(bands, "p")
    items = [words(li.get_text()) for li in bands.select("li")]
    # 16 symbols: chance is 6.25 %, twice that 12.5 %; learns from 90 %.
    assert items == [
        "Learns the copy: ends at 90 % or above.",
        "Gets part of the way: ends above 12.5 % but below 90 %.",
        "Stays at chance: ends at 12.5 % or below, which is 2 times the chance level of "
        "6.25 % (a guess among 16 distinct symbols).",
    ]


def test_four_rows_each_offer_three_outcomes_and_plays_wait_with_their_reason(
    client: TestClient,
) -> None:
    commit(client)
    soup = page(client)
    rows = soup.select("#ablation-rows li.ablation-row")
    assert [row["id"] for row in rows] == [f"row-{key}" for key in ROW_KEYS]
    for row, content in zip(rows, LESSON.rows, strict=True):
        assert text(row, "h5") == content.label
        assert text(row, "legend") == f"{content.label}: your prediction"
        radios = row.select("input[type=radio][name=outcome]")
        assert [radio["value"] for radio in radios] == ["learns", "partial", "chance"]
        for radio, outcome in zip(radios, LESSON.outcomes, strict=True):
            assert text(row, f"label[for={radio['id']}]") == outcome.label
        assert one(row, "form")["action"] == f"/rows/{content.key}/predict"
        play = one(row, f"#row-{content.key}-play")
        assert play.has_attr("disabled") and play["aria-describedby"] == "play-locked"
        assert one(row, "form.play-form")["action"] == f"/rows/{content.key}/play"
    reason = LESSON.ablation.play_locked.format(missing=4, total=4)
    assert text(soup, "#play-locked") == words(reason)


def test_before_the_opening_prediction_rows_cannot_be_predicted(client: TestClient) -> None:
    soup = page(client)
    for fieldset in soup.select("#ablation-rows fieldset"):
        assert fieldset.has_attr("disabled")
    response = client.post("/rows/both/predict", data={"outcome": "learns"})
    assert response.status_code == 409
    alert = one(soup_of(response.text), "#row-both-predict-alert")
    assert alert.get_text(strip=True) == LESSON.predict.locked_note
    assert ablation(client)["predictions_recorded"] == 0


def test_the_provenance_card_names_where_the_rows_come_from(client: TestClient) -> None:
    card = one(page(client), "#provenance")
    content = card.get_text(" ", strip=True)
    for expected in (
        "the-transformer-block.json",
        "sample_recording()",
        "8 blocks",
        "16 positions",
        "Seed played 0",
        "seeds recorded: 0, 1, 2",
        "600 per row",
        "Python 3, PyTorch none",
        "2000-01-01 00:00 UTC",
    ):
        assert expected in content, expected
    init = text(card, "#provenance-init")
    assert "GPT-2 style initialisation" in init and "residuals-only row" in init
    statement = text(card, "#ablation-statement")
    assert "8 blocks deep" in statement and "seed 0" in statement
    assert "nothing more general" in statement
    # The server's own path to the file is never shown.
    assert str(Path(client.app.state.services.settings.recording_path).parent) not in content  # type: ignore[attr-defined]


def test_the_first_load_stays_small_and_carries_no_curves(client: TestClient) -> None:
    commit(client)
    predict_all(client)
    client.post("/rows/both/play")
    html = client.get("/").text
    soup = soup_of(html)
    # One script, no chart library and no recorded series in the page: the server draws the
    # played row's curves as SVG.
    assert "uPlot" not in html and "heldout" not in html
    assert [s["src"] for s in soup.select("script[src]")] == [
        next(str(s["src"]) for s in soup.select("script[src]"))
    ]
    assert len(html.encode()) < 64 * 1024
    player = one(soup, "#player")
    assert player["data-player-row"] == "both" and not player.has_attr("data-src")
    assert len(player.select(".charts svg.curve-svg")) == 2


# --- row predictions -----------------------------------------------------------------------------


def test_a_row_prediction_is_committed_once_and_stays(client: TestClient) -> None:
    commit(client)
    response = client.post("/rows/residual_only/predict", data={"outcome": "partial"})
    assert (response.status_code, response.headers["location"]) == (303, "/#row-residual_only")
    soup = page(client)
    assert text(soup, "#row-residual_only-prediction") == "Gets part of the way"
    assert soup.select("#row-residual_only input[type=radio]") == []
    again = client.post("/rows/residual_only/predict", data={"outcome": "learns"})
    assert again.status_code == 409
    assert "already committed" in text(soup_of(again.text), "[role=alert]")
    rows = ablation(client)["rows"]
    assert isinstance(rows, list)
    assert [r["prediction"] for r in rows] == [None, "partial", None, None]
    assert text(soup, "#gate-predictions") == "1 of 4 predictions recorded."


@pytest.mark.parametrize("outcome", ["", "wins", "learns "])
def test_a_row_prediction_needs_one_of_the_three_outcomes(client: TestClient, outcome: str) -> None:
    commit(client)
    response = client.post("/rows/both/predict", data={"outcome": outcome})
    if outcome.strip() == "learns":  # surrounding spaces are not a different answer
        assert response.status_code == 303
        return
    assert response.status_code == 422
    alert = text(soup_of(response.text), "#row-both-predict-alert")
    assert alert == LESSON.ablation.prediction_prompt
    assert ablation(client)["predictions_recorded"] == 0


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/rows/best/predict", "There is no row called 'best' in this lesson."),
        ("/rows/both%20/play", "There is no row called 'both ' in this lesson."),
        ("/hints/3", "There is no hint number '3'; the hints are numbered 1 to 2."),
        ("/hints/one", "There is no hint number 'one'; the hints are numbered 1 to 2."),
        ("/hints/0", "There is no hint number '0'"),
    ],
)
def test_a_row_or_rung_the_lesson_lacks_is_404_with_a_message(
    client: TestClient, path: str, message: str
) -> None:
    commit(client)
    before = state(client)
    html = client.post(path, data={"outcome": "learns"})
    data = client.post(path, data={"outcome": "learns"}, headers=JSON)
    assert html.status_code == data.status_code == 404
    assert message in html.text.replace("&#39;", "'")
    assert data.json()["ok"] is False and message in data.json()["message"]
    assert state(client) == before


def test_an_unknown_row_has_one_message_wherever_it_is_named(client: TestClient) -> None:
    key = "x" * 100
    expected = unknown_row_message(key)
    assert expected == f"There is no row called {'x' * MAX_ECHOED_CHARS!r} in this lesson."
    for action in ("play", "predict"):
        posted = client.post(f"/rows/{key}/{action}", headers=JSON)
        assert posted.status_code == 404
        assert posted.json()["message"] == expected


# --- plays ---------------------------------------------------------------------------------------


def test_no_row_plays_before_all_four_are_predicted(client: TestClient) -> None:
    commit(client)
    client.post("/rows/both/predict", data={"outcome": "learns"})
    response = client.post("/rows/both/play")
    assert response.status_code == 409
    message = words(LESSON.ablation.play_locked.format(missing=3, total=4))
    assert text(soup_of(response.text), "#row-both-play-alert") == message
    data = client.post("/rows/both/play", headers=JSON)
    assert data.status_code == 409 and data.json()["message"] == message
    assert ablation(client)["plays"] == 0
    assert state(client)["evaluated_runs"] == 0
    assert ablation(client)["predictions_before_play"] is True


def test_playing_a_row_records_it_and_shows_its_figures_without_javascript(
    client: TestClient,
) -> None:
    commit(client)
    predict_all(client)
    response = client.post("/rows/both/play")
    assert (response.status_code, response.headers["location"]) == (303, "/?play=both#player")
    soup = page(client, response.headers["location"].split("#")[0])
    player = one(soup, "#player")
    assert player["data-player-row"] == "both"
    assert text(player, "h5") == "Both, seed 0"
    assert text(player, "#final-accuracy") == "100.0 %"
    assert text(player, "#final-loss") == "0.003"
    assert text(player, "#final-full-accuracy") == "step 600"  # a step, not a percentage
    # The server draws the charts, with or without JavaScript: the note says what they show.
    note = one(player, "#player-note")
    assert " ".join(note.get_text().split()).startswith(
        "600 training steps. The same row was recorded at seeds 1 and 2 too."
    )
    chart_note = one(note, "[data-chart-note]")
    assert not chart_note.has_attr("hidden") and "faint band" in chart_note.get_text()
    # A figure's "%" is held to it by a no-break space, which reads as a space.
    table = [[words(c.get_text()) for c in tr.select("th, td")] for tr in player.select("tr")]
    assert table[0][0] == "step"
    assert [line[0] for line in table[1:]] == ["0", "300", "600"]
    assert table[-1][1:] == ["100.0 %", "0.003", "100.0 %"]
    # Both charts are labelled images whose figures are in that table; each frame holds the
    # server's drawing.
    charts = player.select(".charts [role=img]")
    assert len(charts) == 2
    for chart in charts:
        assert "table below" in str(chart["aria-label"])
        assert one(chart, "svg.curve-svg").select("path.line")
    assert "Learns the copy" in text(soup, "#row-both-result")
    assert state(client)["evaluated_runs"] == 1
    # Replaying is allowed and counted as a play; only a row's first play is a run.
    assert client.post("/rows/both/play").status_code == 303
    assert ablation(client)["plays"] == 2 and state(client)["evaluated_runs"] == 1
    assert text(page(client), "#row-both-play").startswith(LESSON.ablation.replay_label)


def test_a_non_finite_point_is_marked_in_the_table(client: TestClient) -> None:
    commit(client)
    predict_all(client)
    client.post(f"/rows/{NON_FINITE_ROW}/play")
    player = one(page(client, f"/?play={NON_FINITE_ROW}"), "#player")
    marked = player.select("tr.non-finite")
    assert len(marked) == 1
    assert "not a number" in marked[0].get_text()


def test_json_play_returns_the_regions_to_swap(client: TestClient) -> None:
    commit(client)
    predict_all(client)
    body = client.post("/rows/layernorm_only/play", headers=JSON).json()
    assert body["ok"] is True and body["message"] == "Playing the Layer norm only row."
    assert set(body["fragments"]) == {
        "ablation-rows",
        "player",
        "gradients",
        "hints-body",
        "gate",
        "compare-body",
        "takeaway-status",
    }
    player = soup_of(body["fragments"]["player"])
    assert one(player, "#player")["data-player-row"] == "layernorm_only"
    # The same macros draw the page: ?play= shows the same region.
    assert soup_of(body["fragments"]["player"]) == soup_of(
        str(one(page(client, "/?play=layernorm_only"), "#player"))
    )


def test_a_plain_visit_shows_the_row_first_played_last(client: TestClient) -> None:
    commit(client)
    predict_all(client)
    assert text(page(client), "#player .placeholder") == LESSON.ablation.player_placeholder
    for key in ("neither", "both", "neither"):  # a replay does not move a row's place
        client.post(f"/rows/{key}/play")
    player = one(page(client), "#player")
    assert player["data-player-row"] == "both"
    # The address still chooses, among the rows played, and the forms carry the row shown.
    assert one(page(client, "/?play=neither"), "#player")["data-player-row"] == "neither"
    for other in ("bogus", "residual_only"):  # no such row; not played
        assert one(page(client, f"/?play={other}"), "#player")["data-player-row"] == "both"
    assert one(page(client), "input[data-play-field]")["value"] == "both"


def test_a_learner_sees_none_of_anothers_state(learner: Learner) -> None:
    first, second = learner(), learner()
    commit(first, "layer_norm")
    predict_all(first)
    first.post("/rows/both/play")
    first.post("/hints/1")
    soup = page(second, "/?play=both")
    assert soup.select_one("#committed-prediction") is None
    assert soup.select("[id$=-prediction]") == []
    assert text(soup, "#player .placeholder") == LESSON.ablation.player_placeholder
    assert text(soup, "#gate-predictions") == "0 of 4 predictions recorded."
    assert ablation(second)["plays"] == 0 and state(second)["evaluated_runs"] == 0


# --- hints ---------------------------------------------------------------------------------------


def test_hint_rungs_open_at_three_and_five_runs_in_order(client: TestClient) -> None:
    commit(client)
    soup = page(client)
    assert text(soup, "#hints-run-count") == "You have run it 0 times."
    for rung in (1, 2):
        assert one(soup, f"#hint-{rung}-open").has_attr("disabled")
    early = client.post("/hints/1")
    assert early.status_code == 409
    assert "Hint 1 opens after 3 evaluated runs" in text(soup_of(early.text), "#hint-1-alert")

    client.post("/reading", data={"choice": WRONG_READING})
    client.post("/numbers", data={"row1_mean": "7"})
    client.post("/numbers", data={"row1_mean": "banana"})  # a format error is not a run
    soup = page(client)
    assert text(soup, "#hints-run-count") == "You have run it 2 times."
    assert text(soup, "#hint-1-status") == words(
        counted(LESSON.hints.rung_waiting, 3, threshold=3, more=1)
    )
    client.post("/reading", data={"choice": OTHER_WRONG_READING_CHOICE.id})
    soup = page(client)
    assert text(soup, "#hint-1-status") == LESSON.hints.rung_ready
    assert not one(soup, "#hint-1-open").has_attr("disabled")
    assert one(soup, "#hint-2-open").has_attr("disabled")

    response = client.post("/hints/1")
    assert (response.status_code, response.headers["location"]) == (303, "/#hint-1")
    soup = page(client)
    assert text(soup, "#hint-1-text") == words(LESSON.hints.rungs[0].text)
    assert soup.select_one("#hint-1-open") is None
    # Opening it again is a success that records nothing; opening is not a run.
    events = len(client.app.state.services.store.events_for(state_learner(client)))  # type: ignore[attr-defined]
    assert client.post("/hints/1", headers=JSON).json()["ok"] is True
    assert len(client.app.state.services.store.events_for(state_learner(client))) == events  # type: ignore[attr-defined]
    assert state(client)["evaluated_runs"] == 3

    client.post("/numbers", data={"row1_mean": "2"})
    assert client.post("/hints/2").status_code == 409  # 4 runs
    client.post("/numbers", data={"row1_variance": "2/3"})
    # Five runs, and no row predicted yet: the answer would tell what the rows did.
    refused = client.post("/hints/2", headers=JSON)
    assert refused.status_code == 409
    assert refused.json()["message"] == (
        "Hint 2 tells what the rows did, so it opens once all 4 row predictions are in. "
        "Predictions still to make: 4."
    )
    soup = page(client)
    assert text(soup, "#hint-2-status") == words(
        counted(LESSON.hints.answer_needs_predictions, 4, rows=4)
    )
    assert one(soup, "#hint-2-open").has_attr("disabled")
    for key in ROW_KEYS:
        client.post(f"/rows/{key}/predict", data={"outcome": "learns"})
    soup = page(client)
    assert text(soup, "#hint-2-status") == LESSON.hints.rung_ready
    body = client.post("/hints/2", headers=JSON).json()
    assert body["ok"] is True
    answer = text(soup_of(body["fragments"]["hints-body"]), "#hint-2-text")
    # Composed from the recording: residuals only ends at 20.0 %, layer norm only at 6.2 %.
    assert "the residual connections" in answer and "20.0 %" in answer and "6.2 %" in answer


def state_learner(client: TestClient) -> str:
    learner_id = client.get("/api/state").json()["learner_id"]
    assert isinstance(learner_id, str)
    return learner_id


def test_rung_two_waits_for_rung_one(client: TestClient) -> None:
    commit(client)
    for run in range(5):
        wrong = WRONG_READING if run % 2 == 0 else OTHER_WRONG_READING_CHOICE.id
        assert client.post("/reading", data={"choice": wrong}).status_code == 303
    response = client.post("/hints/2")
    assert response.status_code == 409
    assert "Open hint 1 first" in text(soup_of(response.text), "#hint-2-alert")


# --- compare and the aggregate -------------------------------------------------------------------


def test_compare_sets_each_prediction_against_the_recording(client: TestClient) -> None:
    commit(client, "layer_norm")
    predict_all(client, {**PREDICTIONS, "residual_only": "chance"})
    client.post("/reading", data={"choice": RIGHT_READING})
    soup = page(client)
    assert "Play the" in text(soup, "#compare-opening")
    for key in ROW_KEYS:
        client.post(f"/rows/{key}/play")
    soup = page(client)
    opening = text(soup, "#compare-opening")
    assert opening.startswith(
        "You predicted layer norm, but in the recording putting back the residual"
    )
    sentences = [words(li.get_text()) for li in soup.select("#compare-rows li")]
    assert sentences[0].startswith("Both: you predicted it would learn the copy, and it learned")
    assert sentences[1].startswith(
        "Residuals only: you predicted it would stay at chance, but it got part"
    )
    assert text(soup, "#compare-reading") == LESSON.compare.reading_right_first
    assert soup.select_one("#compare .placeholder") is None


def test_the_aggregates_reason_for_waiting_is_said_once(learner: Learner) -> None:
    alone = learner()
    commit(alone, "residual")
    predict_all(alone)
    soup = page(alone)
    notes = [words(note.get_text()) for note in soup.select("#aggregate .note")]
    assert notes == [counted(LESSON.aggregate.hidden, 5, minimum=5)]


def test_the_aggregate_shows_once_committed_and_hides_below_five(learner: Learner) -> None:
    first = learner()
    assert page(first).select_one("#aggregate") is None  # nothing before the commit
    commit(first, "residual")
    hidden = text(page(first), "#aggregate-hidden")
    assert counted(LESSON.aggregate.hidden, 5, minimum=5) in hidden
    others = [learner() for _ in range(4)]
    for number, other in enumerate(others):
        commit(other, "layer_norm" if number < 3 else "residual")
        other.post("/rows/both/predict", data={"outcome": "learns"})
    soup = page(first)
    assert text(soup, "#aggregate-committed") == "5 learners have committed an opening prediction."
    shares = [words(li.get_text()) for li in soup.select("#aggregate-opening li")]
    assert shares == ["Layer norm: 3 of 5 (60 %)", "Residual connections: 2 of 5 (40 %)"]
    # A row's totals wait for the learner's own prediction of that row, then the minimum.
    assert "Shown once you have committed" in text(soup, "#aggregate-both")
    first.post("/rows/both/predict", data={"outcome": "partial"})
    both = [words(li.get_text()) for li in page(first).select("#aggregate-both li")]
    assert both == [
        "Learns the copy: 4 of 5 (80 %)",
        "Gets part of the way: 1 of 5 (20 %)",
        "Stays at chance: 0 of 5 (0 %)",
    ]
    # Totals only: nobody's identity is on the page.
    html = first.get("/").text
    for other in others:
        assert state_learner(other) not in html


# --- the gate ------------------------------------------------------------------------------------


def close_the_gate(client: TestClient, best: str) -> None:
    commit(client)
    client.post("/numbers", data=RIGHT_NUMBERS)
    client.post("/reading", data={"choice": RIGHT_READING})
    predict_all(client)
    for key in ROW_KEYS:
        if key != best:
            client.post(f"/rows/{key}/play")
    assert state(client)["gate"]["closed"] is False  # type: ignore[index]
    client.post(f"/rows/{best}/play")


def test_the_gate_closes_on_the_recordings_best_row(client: TestClient) -> None:
    close_the_gate(client, "both")
    gate = one(page(client), "#gate")
    assert "closed" in gate["class"]
    assert text(gate, ".badge") == "met"
    assert text(gate, "#gate-verdict") == f"✓ {LESSON.gate.met}"
    assert text(gate, "#gate-predictions") == "4 of 4 predictions recorded."
    assert text(gate, "#gate-best-row") == "The best row has been played."
    assert gate.select_one("#gate-cannot-close") is None


def test_the_gate_follows_a_recording_whose_best_row_is_another(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    path = write_recording(tmp_path, ablation_recording("residual_only"))
    with PageClient(app_with(make_settings, path), follow_redirects=False) as client:
        close_the_gate(client, "residual_only")
        assert state(client)["gate"]["closed"] is True  # type: ignore[index]
    with PageClient(app_with(make_settings, path), follow_redirects=False) as other:
        commit(other)
        other.post("/numbers", data=RIGHT_NUMBERS)
        other.post("/reading", data={"choice": RIGHT_READING})
        predict_all(other)
        other.post("/rows/both/play")
        gate = one(page(other), "#gate")
        assert text(gate, "#gate-best-row") == "The best row has not been played."
        assert text(gate, ".badge") == "not yet"


def test_nothing_a_client_sends_closes_the_gate(client: TestClient) -> None:
    commit(client)
    client.post("/numbers", data=RIGHT_NUMBERS)
    client.post("/reading", data={"choice": RIGHT_READING})
    predict_all(client)
    for path, data in [
        ("/rows/both/play", {"target": "neither", "closed": "true"}),
        ("/takeaway", {"text": "closed", "gate": "closed"}),
    ]:
        client.post(path, data=data)
    # The play counted for the row the URL names, not the one the body names.
    rows = {r["key"]: r["plays"] for r in ablation(client)["rows"]}  # type: ignore[attr-defined]
    assert rows == {"both": 1, "residual_only": 0, "layernorm_only": 0, "neither": 0}
    assert state(client)["gate"]["closed"] is True  # type: ignore[index]


def test_a_play_before_the_fourth_prediction_fails_the_order_rule_for_good(
    app: Starlette, client: TestClient
) -> None:
    # The server refuses such a play; a race (or an older version) could still record one.
    commit(client)
    learner_id = state_learner(client)
    store = app.state.services.store
    from normdive.progress.events import EventKind

    store.append(learner_id, EventKind.ROW_PLAYED, {"row": "both"})
    predict_all(client)
    client.post("/rows/both/play")
    assert text(page(client), "#gate-predictions") == (
        "4 of 4 predictions recorded, but not all before the first row played."
    )


# --- the takeaway's pre-filled line --------------------------------------------------------------


def test_the_takeaway_line_is_composed_once_the_recording_has_answered(
    client: TestClient,
) -> None:
    commit(client)
    predict_all(client)
    assert text(page(client), "#takeaway-text") == words(LESSON.takeaway.default_line)
    client.post("/rows/residual_only/play")
    body = client.post("/rows/layernorm_only/play", headers=JSON).json()
    composed = text(page(client), "#takeaway-text")
    assert "putting back the residual connections recovered more (20.0 % against 6.2 %)" in composed
    status = one(soup_of(body["fragments"]["takeaway-status"]), "#takeaway-status")
    assert words(str(status["data-default-line"])) == composed
    client.post("/takeaway", data={"text": "Mine."})
    assert not one(page(client), "#takeaway-status").has_attr("data-default-line")


# --- the gradients -------------------------------------------------------------------------------


def test_gradient_plots_appear_once_every_row_has_played(client: TestClient) -> None:
    commit(client)
    predict_all(client)
    for key in ROW_KEYS[:3]:
        client.post(f"/rows/{key}/play")
    # Until then, a sentence in their place says what opens them.
    assert page(client).select("#gradients svg") == []
    assert text(page(client), "#gradients-placeholder") == words(
        LESSON.ablation.gradients_placeholder.format(missing=1, total=4)
    )
    client.post("/rows/neither/play")
    gradients = one(page(client), "#gradients")
    assert text(gradients, "h5") == LESSON.ablation.gradients_heading
    headings = [words(h.get_text()) for h in gradients.select("h6")]
    assert headings == [
        f"{LESSON.ablation.gradients_first_label}: update 1",
        f"{LESSON.ablation.gradients_later_label}: update 600",
    ]
    figures = gradients.select("figure")
    assert len(figures) == 2
    for figure in figures:
        # A named image per moment, its figures listed under it, row by row.
        assert len(one(figure, "figcaption").select("li")) == 4
        chart = one(figure, "svg.dot-plot")
        assert chart["role"] == "img" and "logarithmic scale" in str(chart["aria-label"])
        assert len(chart.select("path.marker")) == 32
    # With everything on the page, headings still never skip a level.
    levels = [
        int(h.name[1]) for h in page(client, "/?play=neither").select("h1, h2, h3, h4, h5, h6")
    ]
    assert all(b - a <= 1 for a, b in itertools.pairwise(levels))
    # Neither's first block gets exactly no gradient: off the scale, spelled "0".
    neither = one(gradients, '#gradients-1-plot g[data-plot-row="neither"]')
    assert "off-scale" in one(neither, 'path[data-block="1"]')["class"]
    assert one(neither, "text.off-text").get_text() == "0"
    table = gradients.select("tbody tr")
    assert len(table) == 8  # four rows x two recorded updates
    assert [c.get_text() for c in table[-2].select("td")][:2] == ["1", "0"]


# --- recordings that cannot be used --------------------------------------------------------------

NO_ROWS = sample_recording(rows=()).model_dump_json()
UNKNOWN_VERSION = (
    sample_recording().model_dump_json().replace('"format_version":2', '"format_version":99')
)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "missing"),
        ("{not json", "bad_json"),
        (NO_ROWS, "no_ablation_rows"),
        (UNKNOWN_VERSION, "unknown_version"),
        ('{"format_version": 1, "rows": []}', "unknown_version"),
        ('{"format_version": 2}', "invalid"),
    ],
)
def test_a_recording_that_cannot_be_used_is_said_in_lesson_words(
    make_settings: SettingsFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    content: str | None,
    reason: str,
) -> None:
    path = tmp_path / "the-transformer-block.json"
    if content is not None:
        write_recording(tmp_path, content)
    sentence = words(LESSON.recording_problems.sentence(reason))
    with (
        caplog.at_level(logging.WARNING, logger="normdive.web.infrastructure.services"),
        PageClient(app_with(make_settings, path), follow_redirects=False) as client,
    ):
        commit(client)
        response = client.get("/")
        assert response.status_code == 200
        soup = soup_of(response.text)
        assert text(soup, "#ablation-problem") == f"{LESSON.ablation.unavailable} {sentence}"
        gate = text(soup, "#gate-cannot-close")
        assert gate == f"{LESSON.gate.cannot_close_prefix} {sentence}"
        assert str(tmp_path) not in response.text  # no server path for the learner
        played = client.post("/rows/both/play", headers=JSON)
        assert played.status_code == 409 and sentence in played.json()["message"]
        predicted = client.post("/rows/both/predict", data={"outcome": "learns"})
        assert predicted.status_code == 409
        assert state(client)["gate"]["closed"] is False  # type: ignore[index]
    # The author's message, with the path, went to the log.
    assert any(str(path) in record.getMessage() for record in caplog.records)


# --- what a page without JavaScript carries through a POST ---------------------------------------


@pytest.mark.parametrize(
    ("carried", "location"),
    [
        ({"eps": "off", "row": "1, 2", "play": ""}, "/?eps=off&row=1%2C+2#numbers-section"),
        ({"eps": "on", "row": "", "play": "both"}, "/?play=both#numbers-section"),
        ({"eps": "sideways", "row": "x" * 401, "play": "best"}, "/#numbers-section"),
        ({"row": "1\x002"}, "/#numbers-section"),
    ],
)
def test_a_post_without_javascript_keeps_the_switch_row_and_player(
    client: TestClient, carried: dict[str, str], location: str
) -> None:
    commit(client)
    response = client.post("/numbers", data={"row1_mean": "2", **carried})
    assert (response.status_code, response.headers["location"]) == (303, location)


def test_every_posting_form_carries_what_the_url_holds(client: TestClient) -> None:
    commit(client)
    predict_all(client)
    client.post("/rows/both/play")
    soup = page(client, "/?eps=off&row=3,1,4&play=both")
    token = client.get("/api/state").json()["csrf_token"]  # every form carries it too
    for form in soup.select("form[method=post]"):
        carried = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
        if form.get("id") == "takeaway":  # and the saved takeaway it was drawn from: none
            assert carried.pop("base") == ""
        expected = {"eps": "off", "row": "3,1,4", "play": "both", "csrf_token": token}
        assert carried == expected, form.get("action")
    # A play lands on the page with the played row in the player, the rest kept.
    response = client.post("/rows/neither/play", data={"eps": "off", "row": "3,1,4"})
    assert response.headers["location"] == "/?eps=off&row=3%2C1%2C4&play=neither#player"


def test_the_lock_notice_has_no_emoji(make_settings: SettingsFactory) -> None:
    with PageClient(create_app(make_settings())) as client:
        notice = text(page(client), "#try-lock")
    assert notice == LESSON.predict.locked_note + " " + LESSON.sections[1].title
    assert all(ord(character) < 0x2000 for character in notice)
