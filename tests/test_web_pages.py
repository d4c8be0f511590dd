"""GET / : the lesson page as the server draws it, complete without JavaScript."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from starlette.testclient import TestClient

from helpers import SettingsFactory
from normdive.lesson.content import load_lesson
from normdive.lesson.plurals import counted
from normdive.progress.events import EventKind
from normdive.web.app import create_app
from sample_recordings import sample_recording

LESSON = load_lesson()
NAN4 = "[not a number, not a number, not a number, not a number]"
ZEROS4 = "[0.000000, 0.000000, 0.000000, 0.000000]"


def page(client: TestClient, path: str = "/") -> BeautifulSoup:
    response = client.get(path)
    assert response.status_code == 200
    return BeautifulSoup(response.text, "html.parser")


def one(soup: BeautifulSoup | Tag, selector: str) -> Tag:
    found = soup.select_one(selector)
    assert isinstance(found, Tag), selector
    return found


def text(soup: BeautifulSoup | Tag, selector: str) -> str:
    return " ".join(one(soup, selector).get_text().split())


def test_the_header_comes_from_the_lesson(client: TestClient) -> None:
    soup = page(client)
    header = one(soup, "header")
    assert text(header, "h1") == LESSON.title
    assert text(header, ".kicker") == f"{LESSON.track} · {LESSON.kicker}"
    words = header.get_text(" ", strip=True)
    for line in (LESSON.summary, LESSON.optional_note, LESSON.gate_summary):
        assert " ".join(line.split()) in " ".join(words.split())
    # The development setting is on in these tests, and the page says so discreetly.
    assert text(header, ".dev-note") == LESSON.prerequisite.dev_note
    assert soup.title is not None and LESSON.title in soup.title.get_text()


def test_no_dev_note_when_8_5_is_really_done(make_settings: SettingsFactory) -> None:
    app = create_app(make_settings(dev_prerequisite_done=False, host_token=None))
    with TestClient(app) as test_client:
        test_client.get("/")
        learner_id = test_client.get("/api/state").json()["learner_id"]
        store = app.state.services.store
        store.ensure_learner(learner_id)  # reading stored nothing; the operator's report does
        store.append(learner_id, EventKind.PREREQUISITE_DONE, {"source": "operator"})
        soup = page(test_client)
    assert soup.select_one(".dev-note") is None
    assert soup.select_one("#predict") is not None


def test_the_sections_come_in_the_lesson_order(client: TestClient) -> None:
    soup = page(client)
    sections = soup.select("main > section")
    assert [s["id"] for s in sections] == ["question", "predict", "try", "compare", "check"]
    for section, content in zip(sections, LESSON.sections, strict=True):
        assert text(section, "h2") == f"{content.number} · {content.title}"
    question = one(soup, "#question").get_text(" ", strip=True)
    for paragraph in LESSON.section("question").paragraphs:
        assert " ".join(paragraph.split()) in " ".join(question.split())
    # Inside "Try it": by hand, six numbers, the reading, the ablation, hints.
    inner = [s["id"] for s in one(soup, "#try").select(":scope > section")]
    assert inner == ["hand", "numbers-section", "reading-section", "ablation", "hints"]


def test_headings_never_skip_a_level(client: TestClient) -> None:
    levels = [int(h.name[1]) for h in page(client).select("h1, h2, h3, h4, h5, h6")]
    assert levels[0] == 1
    assert all(b - a <= 1 for a, b in itertools.pairwise(levels))


def test_predict_offers_two_choices_and_a_commit_button(client: TestClient) -> None:
    body = one(page(client), "#predict-body")
    assert text(body, "legend") == " ".join(LESSON.predict.question.split())
    radios = body.select("input[type=radio][name=choice]")
    assert [r["value"] for r in radios] == ["layer_norm", "residual"]
    for radio, choice in zip(radios, LESSON.predict.choices, strict=True):
        assert text(body, f"label[for={radio['id']}]") == choice.label
    assert one(body, "form")["action"] == "/predict"
    assert text(body, "button[type=submit]") == LESSON.predict.commit_label


def test_try_it_is_locked_until_the_prediction_is_committed(client: TestClient) -> None:
    soup = page(client)
    assert LESSON.predict.locked_note in text(soup, "#try-lock")
    for selector in ("#eps-switch", "#own-row-input", "#numbers-check", "#reading-lock"):
        assert one(soup, selector).has_attr("disabled"), selector
    for field in LESSON.number_fields:
        assert one(soup, f"#field-{field.id}").has_attr("disabled")
    assert one(soup, "#reading fieldset").has_attr("disabled")
    # The takeaway does not wait for the prediction.
    assert not one(soup, "#takeaway-text").has_attr("disabled")

    client.post("/predict", data={"choice": "residual"})
    soup = page(client)
    assert text(soup, "#try-lock") == ""
    for selector in ("#eps-switch", "#own-row-input", "#numbers-check", "#reading-lock"):
        assert not one(soup, selector).has_attr("disabled"), selector
    assert text(soup, "#committed-prediction") == "Residual connections"
    assert soup.select("#predict-body input[type=radio]") == []


def test_the_formula_is_mathml(client: TestClient) -> None:
    formula = one(page(client), "#hand .formula")
    maths = formula.select("math")
    assert len(maths) == 3
    assert maths[0].select_one("mfrac msqrt") is not None
    symbols = {node.get_text() for node in formula.select("mi")}
    assert {"y", "x", "μ", "σ", "ε", "n"} <= symbols


def test_the_switch_is_a_real_checkbox_with_role_switch(client: TestClient) -> None:
    client.post("/predict", data={"choice": "residual"})
    soup = page(client)
    switch = one(soup, "#eps-switch")
    assert switch["type"] == "checkbox" and switch["role"] == "switch"
    assert switch.has_attr("checked")
    label = text(soup, "label[for=eps-switch]")
    assert label == LESSON.hand.switch_label
    assert "0.00001" in label and "0" in label
    form = one(soup, "#eps-control")
    assert form["method"] == "get" and form["action"] == "/#hand"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "",
            {
                "[1, 2, 3]": (
                    "2.000000",
                    "0.666667",
                    "0.816503",
                    "[-1.224736, 0.000000, 1.224736]",
                ),
                "[2, 2, 2, 6]": (
                    "3.000000",
                    "3.000000",
                    "1.732054",
                    "[-0.577349, -0.577349, -0.577349, 1.732048]",
                ),
            },
        ),
        (
            "?eps=off",
            {
                "[1, 2, 3]": (
                    "2.000000",
                    "0.666667",
                    "0.816497",
                    "[-1.224745, 0.000000, 1.224745]",
                ),
                "[2, 2, 2, 6]": (
                    "3.000000",
                    "3.000000",
                    "1.732051",
                    "[-0.577350, -0.577350, -0.577350, 1.732051]",
                ),
            },
        ),
    ],
    ids=["eps-on", "eps-off"],
)
def test_the_hand_rows_show_the_seed_numbers(
    client: TestClient, query: str, expected: dict[str, tuple[str, str, str, str]]
) -> None:
    client.post("/predict", data={"choice": "residual"})
    soup = page(client, "/" + query)
    rows = soup.select("#hand .row-steps")
    assert [text(r, "[data-ln=input]") for r in rows] == list(expected)
    for row in rows:
        mean, variance, denominator, normalised = expected[text(row, "[data-ln=input]")]
        assert text(row, "[data-ln=mean]") == mean
        assert text(row, "[data-ln=variance]") == variance
        assert text(row, "[data-ln=denominator]") == denominator
        assert text(row, "[data-ln=normalised]") == normalised
        assert len(row.select("ol.steps > li")) == 3
        assert text(row, ".out").startswith(LESSON.hand.out_label)


@pytest.mark.parametrize(
    ("query", "eps", "sentence", "edge"),
    [
        ("", "0.00001", LESSON.hand.edge_now_on, ZEROS4),
        ("?eps=off", "0", LESSON.hand.edge_now_off, NAN4),
        ("?eps=nonsense", "0.00001", LESSON.hand.edge_now_on, ZEROS4),
    ],
)
def test_the_edge_row_says_what_the_switch_does_now(
    client: TestClient, query: str, eps: str, sentence: str, edge: str
) -> None:
    client.post("/predict", data={"choice": "residual"})
    soup = page(client, "/" + query)
    assert text(soup, "#edge-now") == f"{sentence} {edge}."
    # The section names its row before it says what the row does.
    assert text(soup, "#edge-text").startswith("Take the row [4, 4, 4, 4]. Its entries are all")
    assert {slot.get_text() for slot in soup.select("[data-ln=eps]")} == {eps}
    assert one(soup, "#eps-switch").has_attr("checked") == (eps != "0")


def test_the_summary_paragraph_and_table_repeat_the_same_numbers(client: TestClient) -> None:
    soup = page(client)
    summary = text(soup, "#hand-summary")
    assert "Row [1, 2, 3]: mean 2.000000, variance 0.666667" in summary
    assert "out [-1.224736, 0.000000, 1.224736]" in summary
    assert "Row [2, 2, 2, 6]: mean 3.000000, variance 3.000000" in summary
    details = one(soup, "details.steps-table")
    assert text(details, "summary") == LESSON.hand.table_summary
    headers = [th.get_text(strip=True) for th in details.select("thead th")]
    assert headers == ["row", "mean", "variance", "denominator", "normalised"]
    first = [cell.get_text(strip=True) for cell in details.select("tbody tr")[0].select("th, td")]
    assert first == [
        "[1, 2, 3]",
        "2.000000",
        "0.666667",
        "0.816503",
        "[-1.224736, 0.000000, 1.224736]",
    ]


def test_your_own_row_is_computed_by_the_server_too(client: TestClient) -> None:
    client.post("/predict", data={"choice": "residual"})
    soup = page(client, "/?row=3, 1, 4, 1, 5")
    own = one(soup, "#own-row")
    assert one(own, "#own-row-input")["value"] == "3, 1, 4, 1, 5"
    assert text(own, "[data-ln=input]") == "[3, 1, 4, 1, 5]"
    assert text(own, "[data-ln=mean]") == "2.800000"
    assert text(own, "#own-row-message") == ""
    # The switch's form carries the row so flipping it without JavaScript keeps it.
    assert one(soup, "#eps-control input[name=row]")["value"] == "3, 1, 4, 1, 5"


def test_a_fraction_in_your_own_row_is_read_as_an_answer_reads_it(client: TestClient) -> None:
    client.post("/predict", data={"choice": "residual"})
    own = one(page(client, "/?row=1/3, 2 / 3, 1"), "#own-row")
    assert text(own, "[data-ln=input]") == "[1/3, 2/3, 1]"
    assert text(own, "[data-ln=mean]") == "0.666667"
    assert text(own, "#own-row-message") == ""


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("1, 2, banana", "“banana” is not a number."),
        ("1, 2/0", "“2/0” divides by zero"),
        ("1," * 17 + "1", "at most 16 numbers"),
        ("x" * 401, "too long"),
        ("1, nan", "finite"),
    ],
)
def test_a_bad_own_row_gets_an_inline_message(client: TestClient, row: str, message: str) -> None:
    client.post("/predict", data={"choice": "residual"})
    response = client.get("/", params={"row": row})
    assert response.status_code == 200
    soup = BeautifulSoup(response.text, "html.parser")
    assert message in text(soup, "#own-row-message")
    assert one(soup, "#own-row-input")["aria-invalid"] == "true"
    assert soup.select("#own-row-steps .row-steps") == []


def test_six_number_fields_are_labelled_with_counters(client: TestClient) -> None:
    soup = page(client)
    form = one(soup, "form#numbers")
    assert form["method"] == "post" and form["action"] == "/numbers"
    inputs = form.select("input[type=text]")
    assert [i["name"] for i in inputs] == [f.id for f in LESSON.number_fields]
    for field, box in zip(LESSON.number_fields, inputs, strict=True):
        assert text(form, f"label[for={box['id']}]") == field.label
        assert box["inputmode"] == "decimal"
        assert text(form, f"#{box['id']}-attempts") == "Attempts: 0"
        described = str(box["aria-describedby"]).split()
        assert f"{box['id']}-attempts" in described and f"{box['id']}-feedback" in described
    assert text(form, "button[type=submit]") == LESSON.numbers.check_label


def test_the_reading_offers_four_choices(client: TestClient) -> None:
    reading = one(page(client), "#reading")
    assert text(reading, "legend") == LESSON.reading.question
    assert [r["value"] for r in reading.select("input[type=radio]")] == [
        c.id for c in LESSON.reading.choices
    ]
    assert text(reading, "button") == LESSON.reading.lock_label
    assert text(reading, ".prompt") == LESSON.reading.prompt


def test_without_a_recording_the_ablation_says_why_in_lesson_words(client: TestClient) -> None:
    # Issue 4 replaced the issue-2 placeholder with the player; without a recording the panel
    # says why the rows cannot be used, and Compare still says what it will hold.
    soup = page(client)
    ablation = one(soup, "#ablation")
    assert text(ablation, "h3") == LESSON.ablation.heading
    assert text(ablation, "h4") == LESSON.ablation.panel_title
    assert text(ablation, "#ablation-problem") == " ".join(
        f"{LESSON.ablation.unavailable} {LESSON.recording_problems.missing}".split()
    )
    assert "no-recording-here.json" not in soup.get_text()
    assert text(soup, "#compare .placeholder") == " ".join(
        LESSON.ablation.compare_placeholder.split()
    )
    assert text(soup, "#hints-run-count") == LESSON.hints.runs_sentence(0)
    # Beside the count: what adds a run.
    assert text(soup, "#hints-runs").endswith(" ".join(LESSON.hints.runs_meaning.split()))


def test_the_gate_shows_progress_and_why_it_cannot_close_today(client: TestClient) -> None:
    gate = one(page(client), "#gate")
    assert text(gate, "#gate-numbers") == "0 of 6 numbers landed."
    assert text(gate, "#gate-reading") == "The right reading is not locked yet."
    assert text(gate, "#gate-predictions") == "0 of 4 predictions recorded."
    assert text(gate, "#gate-best-row") == "The best row has not been played."
    assert text(gate, "#gate-cannot-close").startswith(LESSON.gate.cannot_close_prefix)
    assert text(gate, ".verdict") == LESSON.gate.not_met
    assert text(gate, ".badge") == "not yet"
    # The heading is the heading alone; the status is its own line.
    assert text(gate, "h3") == LESSON.gate.heading
    assert text(gate, "#gate-status") == "Status: not yet"


def test_the_takeaway_starts_with_the_default_line(client: TestClient) -> None:
    form = one(page(client), "form#takeaway")
    assert form["method"] == "post" and form["action"] == "/takeaway"
    assert one(form, "textarea").get_text() == LESSON.takeaway.default_line
    assert text(form, "label") == LESSON.takeaway.label
    assert text(form, "#takeaway-status") == "Not saved yet"
    assert text(form, "#takeaway-count") == (
        f"{len(LESSON.takeaway.default_line)} of {LESSON.takeaway.max_chars} characters"
    )


def test_the_locked_page_says_what_it_waits_for_and_shows_the_learner_id(
    make_settings: SettingsFactory,
) -> None:
    with TestClient(create_app(make_settings(dev_prerequisite_done=False))) as test_client:
        soup = page(test_client)
        learner_id = test_client.get("/api/state").json()["learner_id"]
    assert text(soup, "h2") == f"Waiting for {LESSON.prerequisite.id} {LESSON.prerequisite.title}"
    assert " ".join(LESSON.prerequisite.locked_text.split()) in text(soup, "main")
    assert text(soup, "#learner-id") == learner_id
    assert soup.select("form") == []
    assert soup.select_one("#predict") is None


def test_every_form_control_has_a_label(client: TestClient) -> None:
    client.post("/predict", data={"choice": "residual"})
    soup = page(client)
    for control in soup.select("input:not([type=hidden]), textarea, select"):
        has_label = soup.select_one(f"label[for={control['id']}]") is not None
        assert has_label or control.has_attr("aria-label"), control
    for button in soup.select("button"):
        assert button.get_text(strip=True), button


def test_before_the_commit_the_url_cannot_run_try_it(client: TestClient) -> None:
    soup = page(client, "/?eps=off&row=1,2")
    assert one(soup, "#eps-switch").has_attr("checked")
    assert text(soup, "#edge-now").endswith(f"{ZEROS4}.")
    assert one(soup, "#own-row-input")["value"] == ""
    assert soup.select("#own-row-steps .row-steps") == []


def test_with_a_readable_recording_the_gate_has_no_reason_to_stay_open(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    recording = tmp_path / "the-transformer-block.json"
    recording.write_text(sample_recording().model_dump_json(), encoding="utf-8")
    with TestClient(create_app(make_settings(recording_path=recording))) as test_client:
        gate = one(page(test_client), "#gate")
    assert gate.select_one("#gate-cannot-close") is None
    assert text(gate, "#gate-predictions") == "0 of 4 predictions recorded."
    assert text(gate, ".verdict") == LESSON.gate.not_met


def test_a_broken_recording_says_why_the_gate_cannot_close(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    recording = tmp_path / "the-transformer-block.json"
    recording.write_text("{not json", encoding="utf-8")
    with TestClient(create_app(make_settings(recording_path=recording))) as test_client:
        response = test_client.get("/")
    assert response.status_code == 200
    reason = text(BeautifulSoup(response.text, "html.parser"), "#gate-cannot-close")
    assert reason.startswith(LESSON.gate.cannot_close_prefix)


def test_the_page_states_the_lessons_epsilon_and_the_script_reads_it_from_there(
    client: TestClient,
) -> None:
    assert one(page(client), "main")["data-eps"] == str(LESSON.eps)
    static = Path(__file__).resolve().parents[1] / "src" / "normdive" / "web" / "static"
    scripts = [static / name for name in ("page.js", "layernorm.js")]
    for script in scripts + sorted((static / "page").glob("*.js")):
        assert str(LESSON.eps) not in script.read_text(encoding="utf-8"), script.name


def test_the_committed_prediction_wears_a_neutral_mark_not_a_tick(client: TestClient) -> None:
    assert client.post("/predict", data={"choice": "residual"}).status_code == 303
    committed = one(page(client), "#predict-body .committed")
    assert "✓" not in committed.get_text()  # a tick reads as "correct"; nothing is judged yet
    assert one(committed, "[aria-hidden=true]").get_text() == "•"


def test_the_takeaway_box_follows_the_direction_of_what_is_typed(client: TestClient) -> None:
    assert one(page(client), "#takeaway-text")["dir"] == "auto"


def test_the_pre_filled_takeaway_claims_no_result_before_a_row_has_played(
    client: TestClient,
) -> None:
    shown = one(page(client), "#takeaway-text").get_text()
    assert shown == LESSON.takeaway.default_line
    assert "ablation" not in shown and "showed" not in shown


def test_what_the_epsilon_changes_on_the_rows_shown_is_what_the_reading_says(
    client: TestClient,
) -> None:
    # The reading says "by less than 0.00001"; at six decimals the change shows on every row.
    assert client.post("/predict", data={"choice": "residual"}).status_code == 303
    on, off = page(client), page(client, "/?eps=off")
    for index in range(len(LESSON.hand_rows)):
        rows = [one(soup, f"#hand-summary > span:nth-of-type({index + 1})") for soup in (on, off)]
        outs = [
            [float(x) for x in text(row, "[data-ln=normalised]").strip("[]").split(", ")]
            for row in rows
        ]
        change = max(abs(a - b) for a, b in zip(*outs, strict=True))
        assert 0.000001 <= change < 0.00001, (LESSON.hand_rows[index], change)
    right = next(choice for choice in LESSON.reading.choices if choice.correct)
    for sentence in (right.label, right.feedback):
        assert "less than 0.00001" in sentence and "sixth decimal" not in sentence


def test_the_copy_length_and_the_number_of_symbols_are_named_apart(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    recording = tmp_path / "the-transformer-block.json"
    recording.write_text(sample_recording().model_dump_json(), encoding="utf-8")
    with TestClient(create_app(make_settings(recording_path=recording))) as test_client:
        soup = page(test_client)
    config = sample_recording().plan.base
    assert f"{config.copy_length} symbols" not in text(soup, "#ablation")
    assert f"{config.copy_length} positions long" in text(soup, "#ablation-statement")
    copy_length = next(div for div in soup.select("#provenance dl > div") if "Copy" in div.text)
    assert text(copy_length, "dd") == f"{config.copy_length} positions"
    assert f"a guess among {config.vocab_size} distinct symbols" in text(soup, "#ablation-bands")


def test_a_lone_learner_is_told_once_why_no_totals_show(client: TestClient) -> None:
    assert client.post("/predict", data={"choice": "residual"}).status_code == 303
    aggregate = one(page(client), "#aggregate")
    notes = [" ".join(note.get_text().split()) for note in aggregate.select(".note")]
    minimum = LESSON.aggregate.min_learners
    hidden = counted(LESSON.aggregate.hidden, minimum, minimum=minimum)
    assert notes == [hidden]
    assert LESSON.aggregate.hidden_again not in aggregate.get_text()


@pytest.mark.parametrize(
    ("query", "location"),
    [
        ("eps=off&eps=on", "/"),  # the switch's form ticked on without JavaScript
        ("eps=off&eps=on&row=1,2", "/?row=1%2C2"),
        ("eps=on&eps=off&play=both", "/?eps=off&play=both"),
        ("row=1&row=2", "/?row=2"),
        ("eps=off&eps=off&row=", "/?eps=off"),
    ],
)
def test_a_parameter_given_twice_lands_on_the_address_with_it_once(
    client: TestClient, query: str, location: str
) -> None:
    answer = client.get(f"/?{query}", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == location


@pytest.mark.parametrize("query", ["", "eps=off", "eps=off&row=1,2&play=both", "other=1&other=2"])
def test_an_address_with_each_parameter_once_is_the_page(client: TestClient, query: str) -> None:
    assert client.get(f"/?{query}", follow_redirects=False).status_code == 200
