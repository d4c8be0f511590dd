"""The panel "Train one yourself" over HTTP: there only once the gate has closed, and never
part of it; a configuration committed once, from the lesson's offered values, before it
trains; a finished run's figures validated and kept once; what a reload shows; the open run's
chart drawn by the server over its recorded cell; the no-JavaScript page with the grid as a
table; bad input answered with a message, never a 500."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bs4 import Tag
from sqlalchemy import Engine
from starlette.testclient import TestClient

from helpers import (
    SettingsFactory,
    ablation_recording,
    as_instructor,
    in_course,
    soup,
    words,
    write_recording,
)
from lesson_answers import (
    JSON,
    LESSON,
    post_each,
    steps_to_the_gate,
)
from normdive.lesson.translations import load_translation
from normdive.progress.events import EventKind
from normdive.progress.lab import MAX_CURVE_POINTS
from normdive.recording.lab_grid import lab_path_for
from normdive.recording.runs import LabPlan
from normdive.store.event_store import EventList, Store
from normdive.web.app import create_app
from normdive.web.infrastructure.instructor_access import Pool
from page_client import PageClient
from sample_lab import TINY_BASE, sample_lab_grid, write_lab_grid

SHIPPED_LAB = Path(__file__).resolve().parents[1] / "recordings" / "the-transformer-block-lab.json"
BOTH = {"depth": "2", "row": "both", "eps": "0.00001", "init": "gpt2", "seed": "0"}
TEXT = LESSON.lab
LAB_COMMITTED, LAB_FINISHED = EventKind.LAB_COMMITTED, EventKind.LAB_FINISHED
# A whole number past a float's range: JSON has no bound on one.
HUGE_WHOLE_NUMBER = "1" + "0" * 400


def close_the_gate(client: TestClient) -> None:
    post_each(client, steps_to_the_gate())
    assert gate(client)["closed"] is True


def gate(client: TestClient) -> dict[str, Any]:
    state: dict[str, Any] = client.get("/api/state").json()["state"]["gate"]
    return state


@pytest.fixture
def recording_path(tmp_path: Path) -> Path:
    path = write_recording(tmp_path, ablation_recording("both"))
    write_lab_grid(path)
    return path


def result(accuracy: float = 1.0, steps: int = TINY_BASE.steps, **extra: Any) -> str:
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
    final = {"step": steps, "heldout_loss": 0.5, "heldout_accuracy": accuracy}
    return json.dumps({"final": final, "curve": curve, **extra})


def forged_final(token: str) -> str:
    """A whole result whose final held-out accuracy is `token`, as JSON text."""
    return result(1.0).replace('"heldout_accuracy": 1.0}', f'"heldout_accuracy": {token}}}')


def as_the_browser_posts(loss: str, accuracy: str) -> str:
    """A finished run as the lab's worker posts it (JSON.stringify writes 0 and 1 as whole
    numbers), every loss but the first training loss the JSON token `loss`."""
    points = [
        f'{{"step": {step}, "train_loss": {"null" if step == 0 else loss}, '
        f'"heldout_loss": {loss}, "heldout_accuracy": {accuracy}}}'
        for step in range(0, TINY_BASE.steps + 1, TINY_BASE.eval_every)
    ]
    final = f'{{"step": {TINY_BASE.steps}, "heldout_loss": {loss}, "heldout_accuracy": {accuracy}}}'
    return f'{{"final": {final}, "curve": [{", ".join(points)}]}}'


def kept_results(store: Store, client: TestClient) -> list[dict[str, Any]]:
    """The finished runs' payloads the store holds for the client's learner."""
    learner_id = client.get("/api/state").json()["learner_id"]
    events = store.read(learner_id, EventList()).events
    return [dict(event.payload) for event in events if event.kind is LAB_FINISHED]


def test_the_lab_is_locked_until_the_gate_closes_and_costs_the_page_nothing_before(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        client.post("/predict", data={"choice": "residual"}, headers=JSON)
        assert soup(client.get("/").text).select_one("#lab") is None
        for url in ("/lab", "/lab/panel"):
            answer = client.get(url)
            assert answer.status_code == 409
            assert words(soup(answer.text).select_one("#lab-problem")) == TEXT.locked
        answer = client.post("/lab/runs", data={**BOTH, "outcome": "learns"}, headers=JSON)
        assert answer.status_code == 409 and answer.json()["message"] == TEXT.locked


def test_commit_then_finish_keeps_the_run_and_never_changes_the_gate(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        before = gate(client)
        page = soup(client.get("/").text)
        lab = page.select_one("#lab")
        assert lab is not None and lab.select_one("#lab-panel") is not None
        # The panel's controls are not in the page: they load when it opens.
        assert page.select_one("#lab-commit") is None
        assert TEXT.needs_js in words(lab)

        panel = soup(client.get("/lab/panel").text)
        assert panel.select_one("#lab-commit") is not None
        # Counted from the grid, in the page's words: the sample grid records seed 0 alone (but
        # one point) of its three seeds.
        offered = len(sample_lab_grid().plan_as(LabPlan).planned())
        left_out = offered - (offered // 3 - 1)
        said = TEXT.trimmed.format(count=left_out, offered=offered)
        assert words(panel.select_one("#lab-trimmed")) == " ".join(said.split())
        assert panel.select_one("#lab-train") is None  # Train only after a commit
        # Commit first: the recorded outcomes are not shown beside the form asking for one.
        assert panel.select(".lab-grid") == []

        answer = client.post("/lab/runs", data={**BOTH, "outcome": "learns"}, headers=JSON)
        assert answer.status_code == 200, answer.text
        body = soup(answer.json()["html"])
        train = body.select_one("#lab-train")
        assert isinstance(train, Tag)
        run = json.loads(str(train["data-run"]))
        assert run["run"] == 1 and run["seed"] == 0
        assert len(recorded_lines(train)) == 1
        assert run["config"]["d_model"] == TINY_BASE.d_model
        assert run["config"]["depth"] == 2 and run["config"]["eps"] == 1e-5
        assert "Both, depth 2, eps 0.00001" in answer.json()["message"]
        assert body.select_one("#lab-grid-gpt2") is not None  # committed: the grid may show

        # Once: a second commit while this one is untrained is refused, nothing stored.
        again = client.post("/lab/runs", data={**BOTH, "outcome": "chance"}, headers=JSON)
        assert again.status_code == 409 and "Train it first" in again.json()["message"]

        finished = client.post("/lab/runs/1/result", data={"result": result(1.0)}, headers=JSON)
        assert finished.status_code == 200, finished.text
        said = finished.json()["message"]
        assert "You predicted it would learn the copy, and it did." in said
        assert "agrees with the recording to within" in said
        twice = client.post("/lab/runs/1/result", data={"result": result(0.3)}, headers=JSON)
        assert twice.status_code == 409

        assert gate(client) == before  # the lab never changes the gate
        # A reload shows the kept run and its prediction, drawn by the server.
        reloaded = soup(client.get("/").text)
        runs = words(reloaded.select_one("#lab-runs"))
        assert "Both, depth 2, eps 0.00001, GPT-2 initialisation, seed 0" in runs
        assert "you predicted learns the copy; it learned the copy (100.0 %)" in runs


def test_a_run_that_differs_from_its_cell_says_where_and_one_without_a_cell_says_so(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        client.post("/lab/runs", data={**BOTH, "outcome": "partial"}, headers=JSON)
        said = client.post("/lab/runs/1/result", data={"result": result(0.7)}, headers=JSON).json()[
            "message"
        ]
        assert "You predicted it would get part of the way, and" in said
        assert "30.0 points below the recording at step 40 (70.0 % here, 100.0 % recorded)" in said
        unrecorded = {"depth": "4", "row": "neither", "init": "pytorch", "seed": "0"}
        answer = client.post("/lab/runs", data={**unrecorded, "outcome": "chance"}, headers=JSON)
        train = soup(answer.json()["html"]).select_one("#lab-train")
        assert isinstance(train, Tag) and recorded_lines(train) == []
        assert TEXT.no_cell in words(train)
        said = client.post(
            "/lab/runs/2/result", data={"result": result(0.25)}, headers=JSON
        ).json()["message"]
        assert TEXT.no_cell in said


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({**BOTH}, "Pick one of the three outcomes"),
        ({**BOTH, "depth": "9", "outcome": "learns"}, "does not offer depth '9'"),
        ({**BOTH, "depth": "٢", "outcome": "learns"}, "does not offer depth"),
        ({**BOTH, "eps": "0.5", "outcome": "learns"}, "does not offer epsilon '0.5'"),
        ({**BOTH, "eps": "NaN", "outcome": "learns"}, "does not offer epsilon"),
        # A signalling NaN compared with an offered value would raise: it is refused first.
        ({**BOTH, "eps": "sNaN", "outcome": "learns"}, "does not offer epsilon 'sNaN'"),
        ({**BOTH, "eps": "-Infinity", "outcome": "learns"}, "does not offer epsilon"),
        ({**BOTH, "eps": "1e999999", "outcome": "learns"}, "does not offer epsilon"),
        ({**BOTH, "eps": "", "outcome": "learns"}, "Pick a epsilon"),
        ({**BOTH, "row": "<b>", "outcome": "learns"}, "does not offer row"),
        ({**BOTH, "init": "xavier", "outcome": "learns"}, "does not offer initialisation"),
        ({**BOTH, "seed": "7", "outcome": "learns"}, "does not offer seed '7'"),
        # More digits than int() converts: refused before it is converted, never a 500.
        ({**BOTH, "depth": "1" * 5_000, "outcome": "learns"}, "does not offer depth '111"),
        ({**BOTH, "seed": "9" * 5_000, "outcome": "learns"}, "does not offer seed '999"),
        ({**BOTH, "depth": "0002", "seed": "0" * 5_000, "outcome": "x"}, "does not offer outcome"),
        ({**BOTH, "outcome": "maybe"}, "does not offer outcome"),
    ],
)
def test_a_commit_outside_the_offer_is_refused_with_a_message(
    make_settings: SettingsFactory, recording_path: Path, form: dict[str, str], message: str
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        answer = client.post("/lab/runs", data=form, headers=JSON)
        assert answer.status_code == 422 and message in answer.json()["message"]
        assert soup(client.get("/").text).select_one("#lab-runs") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "is not JSON"),
        ("[" * 100_00 + "]" * 100_00, "is not JSON"),
        ("[]", "is not an object"),
        (json.dumps({"final": {}, "curve": []}), "has no curve"),
        (result(1.5), "not a share from 0 to 1"),
        (result(-0.2), "not a share from 0 to 1"),
        # JSON's overflow parses as infinity, and Python reads NaN: neither is a share.
        (forged_final("1e999999"), "heldout_accuracy is inf, not a share"),
        (forged_final("NaN"), "heldout_accuracy is nan, not a share"),
        (forged_final("-Infinity"), "heldout_accuracy is -inf, not a share"),
        (forged_final('"inf"'), "heldout_accuracy is inf, not a share"),
        (forged_final('"nan"'), "heldout_accuracy is nan, not a share"),
        (forged_final("null"), "heldout_accuracy is missing, not a share"),
        (
            result(1.0).replace('"heldout_accuracy": 0.25}', '"heldout_accuracy": NaN}', 1),
            "point 1's heldout_accuracy is nan, not a share",
        ),
        (
            result(1.0).replace('"heldout_accuracy": 0.25}', '"heldout_accuracy": 1e999999}', 1),
            "point 1's heldout_accuracy is inf, not a share",
        ),
        # JSON's whole numbers have no bound: one past a float's is no figure.
        (forged_final(HUGE_WHOLE_NUMBER), "heldout_accuracy is a whole number too large"),
        (
            result(1.0).replace('"heldout_loss": 0.5', f'"heldout_loss": {HUGE_WHOLE_NUMBER}', 1),
            "heldout_loss is a whole number too large",
        ),
        (result(1.0).replace('"heldout_loss": 0.5', '"heldout_loss": "lots"', 1), "not a number"),
        (result(1.0, steps=TINY_BASE.steps + 10), "not a step from 0"),
        (
            json.dumps(
                {
                    "final": {"step": 40, "heldout_loss": 0.5, "heldout_accuracy": 1.0},
                    "curve": [{"step": 0, "heldout_loss": 1, "heldout_accuracy": 0.1}]
                    * (MAX_CURVE_POINTS + 1),
                }
            ),
            f"more than {MAX_CURVE_POINTS} points",
        ),
        (
            json.dumps(
                {
                    "final": {"step": 40, "heldout_loss": 0.5, "heldout_accuracy": 1.0},
                    "curve": [{"step": 5, "heldout_loss": 1, "heldout_accuracy": 0.1}] * 2,
                }
            ),
            "do not rise",
        ),
    ],
)
def test_a_result_that_cannot_be_read_is_refused_and_keeps_nothing(
    make_settings: SettingsFactory, recording_path: Path, store: Store, text: str, message: str
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        client.post("/lab/runs", data={**BOTH, "outcome": "learns"}, headers=JSON)
        answer = client.post("/lab/runs/1/result", data={"result": text}, headers=JSON)
        assert answer.status_code == 422, answer.text
        assert message in answer.json()["message"]
        assert "not trained yet" in words(soup(client.get("/").text).select_one("#lab-runs"))
        assert kept_results(store, client) == []
        assert (
            client.post("/lab/runs/2/result", data={"result": result()}, headers=JSON).status_code
            == 422
        )
        assert (
            client.post("/lab/runs/x/result", data={"result": result()}, headers=JSON).status_code
            == 404
        )


@pytest.mark.parametrize(
    ("loss", "marker"),
    [
        ('"nan"', "nan"),  # what the browser's trainer posts at eps 0, a constant row
        ("NaN", "nan"),
        ('"inf"', "inf"),
        ("1e999999", "inf"),
    ],
)
def test_a_diverged_run_keeps_its_markers(
    make_settings: SettingsFactory, recording_path: Path, store: Store, loss: str, marker: str
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        form = {**BOTH, "eps": "0", "outcome": "chance"}
        assert client.post("/lab/runs", data=form, headers=JSON).status_code == 200
        # Its losses not a number; its accuracy still a share.
        text = as_the_browser_posts(loss, accuracy="0")
        answer = client.post("/lab/runs/1/result", data={"result": text}, headers=JSON)
        assert answer.status_code == 200, answer.text
        assert TEXT.verdicts["chance"]["chance"] in answer.json()["message"]
        [kept] = kept_results(store, client)
        assert kept["final"] == {
            "step": TINY_BASE.steps,
            "heldout_loss": marker,
            "heldout_accuracy": 0,
        }
        assert {point["heldout_loss"] for point in kept["curve"]} == {marker}
        assert kept["outcome"] == "chance"


def test_writes_need_the_form_token(make_settings: SettingsFactory, recording_path: Path) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        bare = TestClient(client.app, base_url=str(client.base_url))
        bare.cookies.update(client.cookies)
        answer = bare.post("/lab/runs", data={**BOTH, "outcome": "learns"}, headers=JSON)
        assert answer.status_code == 403


def recorded_lines(train: Tag) -> list[Tag]:
    """The recorded cells' lines on the open run's chart."""
    return train.select("#lab-chart svg.curve-svg .recorded path.line")


def test_the_open_runs_chart_is_drawn_by_the_server_over_its_recorded_cell(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        client.post("/lab/runs", data={**BOTH, "outcome": "learns"}, headers=JSON)
        train = soup(client.get("/lab/panel").text).select_one("#lab-train")
        assert isinstance(train, Tag)
        frame = train.select_one("#lab-chart")
        assert isinstance(frame, Tag)
        assert frame["role"] == "img" and frame["aria-label"] == TEXT.chart_label
        svg = frame.select_one("svg.curve-svg")
        assert isinstance(svg, Tag) and svg["aria-hidden"] == "true"
        # The plot's box and last step, for the script that grows the run's line.
        left, top, right, bottom, steps = (float(n) for n in str(svg["data-plot"]).split())
        assert left < right and top < bottom and steps == TINY_BASE.steps
        # The recorded cell, dashed, from step 0 to the last; the run's line empty until the
        # worker reports, its end marker hidden.
        [recorded] = recorded_lines(train)
        assert str(recorded["d"]).startswith(f"M{left:g} ")
        run = svg.select_one('[data-series="run"]')
        assert isinstance(run, Tag) and "device" in run["class"]
        assert run.select_one("path.line")["d"] == ""  # type: ignore[index]
        assert run.select_one("path.marker")["visibility"] == "hidden"  # type: ignore[index]
        ticks = [t.get_text() for t in svg.select("text.tick")]
        assert ticks[:5] == ["0\u00a0%", "25\u00a0%", "50\u00a0%", "75\u00a0%", "100\u00a0%"]
        titles = [t.get_text() for t in svg.select("text.axis-title")]
        assert titles == ["Held-out accuracy", "Training step"]
        # Nothing of the grid is fetched: the page holds no address of it.
        assert "/lab/grid/" not in client.get("/lab/panel").text
        assert client.get("/lab/grid/0000000000000000.json").status_code == 404


def test_without_javascript_the_lab_page_shows_the_grid_as_a_table(
    make_settings: SettingsFactory, recording_path: Path
) -> None:
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        page = soup(client.get("/lab").text)
        assert TEXT.needs_js in words(page.select_one("#lab"))
        # Said only where scripts do not run: with them, the sentence would be untrue.
        said = page.select_one("#lab noscript")
        assert isinstance(said, Tag) and TEXT.needs_js in words(said)
        table = page.select_one("#lab-grid-gpt2")
        assert isinstance(table, Tag)
        lines = [[words(c) for c in row.select("th, td")] for row in table.select("tbody tr")]
        assert lines[0] == ["Both, eps 0", "100.0 %", "100.0 %", "100.0 %", "100.0 %"]
        pytorch = page.select_one("#lab-grid-pytorch")
        assert isinstance(pytorch, Tag)
        last = [words(c) for c in pytorch.select("tbody tr")[-1].select("th, td")]
        assert last == ["Neither", "60.0 %", "60.0 %", "25.0 %", TEXT.grid_none]  # not recorded
        assert page.select_one("#lab-commit") is None


@pytest.mark.parametrize(
    ("locale", "first_line", "config"),
    [
        (
            "de",
            ["Beide, eps 0,00001", "100,0 %", "100,0 %", "100,0 %", "100,0 %"],
            "Breite 8 mit 2 Köpfen, 40 Trainingsschritte zu je 4 Folgen",
        ),
        (
            "ar",
            ["كلاهما، eps 0.00001", "100.0 %", "100.0 %", "100.0 %", "100.0 %"],
            "العرض 8، ورؤوس الانتباه 2، وخطوات التدريب 40",
        ),
    ],
)
def test_the_lab_page_in_german_and_arabic(
    make_settings: SettingsFactory,
    recording_path: Path,
    locale: str,
    first_line: list[str],
    config: str,
) -> None:
    lesson, _ = load_translation(locale)
    with PageClient(create_app(make_settings(recording_path=recording_path))) as client:
        close_the_gate(client)
        page = soup(client.get("/lab", headers={"Accept-Language": locale}).text)
        assert words(page.select_one("#lab-title")) == lesson.lab.heading
        assert config in words(page.select_one("#lab-config"))
        table = page.select_one("#lab-grid-gpt2")
        assert isinstance(table, Tag)
        head = [c.get_text() for c in table.select("thead th")]
        assert head[1] == ("Tiefe 1" if locale == "de" else "العمق 1")
        lines = [[words(c) for c in row.select("th, td")] for row in table.select("tbody tr")]
        assert lines[1] == first_line


def test_a_missing_or_unusable_grid_is_said_plainly(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    recording = write_recording(tmp_path, ablation_recording("both"))
    with PageClient(create_app(make_settings(recording_path=recording))) as client:
        close_the_gate(client)
        assert words(soup(client.get("/lab/panel").text).select_one("#lab-problem")) == (
            TEXT.missing
        )
        write_lab_grid(recording, sample_lab_grid())
        path = recording.with_name("the-transformer-block-lab.json")
        path.write_text("{", encoding="utf-8")
        assert words(soup(client.get("/lab").text).select_one("#lab-problem")) == TEXT.unusable
        answer = client.post("/lab/runs", data={**BOTH, "outcome": "learns"}, headers=JSON)
        assert answer.status_code == 503 and answer.json()["message"] == TEXT.unusable


@pytest.mark.both_databases
def test_the_instructor_view_counts_the_lab_runs(
    client: TestClient, store: Store, engine: Engine
) -> None:
    both = {"depth": 2, "layernorm": True, "residual": True, "eps": 1e-5, "init": "gpt2"}
    neither = {"depth": 4, "layernorm": False, "residual": False, "eps": None, "init": "gpt2"}
    first, second, third = (store.create_learner() for _ in range(3))
    final = {"step": 40, "heldout_loss": 0.1, "heldout_accuracy": 1.0}
    store.append(
        first, LAB_COMMITTED, {"run": 1, "config": {**both, "seed": 0}, "outcome": "learns"}
    )
    store.append(first, LAB_FINISHED, {"run": 1, "final": final, "curve": [], "outcome": "learns"})
    store.append(
        first, LAB_COMMITTED, {"run": 2, "config": {**neither, "seed": 0}, "outcome": "learns"}
    )
    store.append(first, LAB_FINISHED, {"run": 2, "final": final, "curve": [], "outcome": "chance"})
    store.append(
        second, LAB_COMMITTED, {"run": 1, "config": {**both, "seed": 0}, "outcome": "partial"}
    )
    # A learner of a course is counted in their course, not here.
    in_course(engine, third, "c" * 64)
    store.append(
        third, LAB_COMMITTED, {"run": 1, "config": {**both, "seed": 0}, "outcome": "chance"}
    )
    as_instructor(client, Pool(None))
    page = soup(client.get("/instructor").text)
    section = page.select_one("#lab-report")
    assert "2 learners committed a prediction for a row of their own; 1 trained one" in words(
        section
    )
    configs = [
        [c.get_text() for c in row.select("th, td")] for row in page.select("#lab-configs tbody tr")
    ]
    assert configs == [
        ["Both, depth 2, eps 0.00001, GPT-2 initialisation, seed 0", "2", "2", "1", "1", "0"],
        ["Neither, depth 4, GPT-2 initialisation, seed 0", "1", "1", "1", "0", "0"],
    ]
    matrix = [
        [c.get_text() for c in row.select("th, td")]
        for row in page.select("#lab-outcomes tbody tr")
    ]
    assert matrix[0] == ["Learns the copy", "1", "0", "1"]


def test_the_shipped_grid_offers_depths_6_and_8_and_draws_a_depth_8_curve(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    path = write_recording(tmp_path, ablation_recording("both"))
    lab_path_for(path).write_bytes(SHIPPED_LAB.read_bytes())
    deep = {**BOTH, "depth": "8", "seed": "1"}
    with PageClient(create_app(make_settings(recording_path=path))) as client:
        close_the_gate(client)
        panel = soup(client.get("/lab/panel").text)
        depths = [str(o["value"]) for o in panel.select("#lab-depth option")]
        assert depths == ["1", "2", "3", "4", "6", "8"]
        answer = client.post("/lab/runs", data={**deep, "outcome": "learns"}, headers=JSON)
        assert answer.status_code == 200, answer.text
        train = soup(client.get("/lab/panel").text).select_one("#lab-train")
        assert isinstance(train, Tag)
        # The recorded cell of depth 8, seed 1, eps 1e-5 is drawn to its last step, 300.
        [recorded] = recorded_lines(train)
        svg = train.select_one("svg.curve-svg")
        assert isinstance(svg, Tag)
        _, _, right, _, steps = (float(n) for n in str(svg["data-plot"]).split())
        assert steps == 300
        last_x = str(recorded["d"]).rsplit("L", 1)[-1].split()[0]
        assert float(last_x) == right
