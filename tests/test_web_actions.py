"""The four forms, with and without JavaScript: 303 on success, the page re-rendered with
409 / 422 and the message beside the form on a refusal, and JSON with the same statuses and
fragments drawn by the same macros as the page."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup, Tag
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import MakeClient, SettingsFactory
from lesson_answers import LESSON, OTHER_WRONG_READING_CHOICE
from lesson_answers import RIGHT_NUMBERS as RIGHT
from lesson_answers import RIGHT_READING_ID as RIGHT_READING
from lesson_answers import WRONG_READING_ID as WRONG_READING
from normdive.progress.actions import SAME_READING_AGAIN
from normdive.web.app import create_app
from normdive.web.infrastructure.flash import FLASH_COOKIE, flash_value
from normdive.web.views.page import Refusal
from page_client import PageClient
from tamper import altered_signature

JSON = {"Accept": "application/json"}
OTHER_WRONG_READING = OTHER_WRONG_READING_CHOICE.id


def soup_of(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def one(soup: BeautifulSoup | Tag, selector: str) -> Tag:
    found = soup.select_one(selector)
    assert isinstance(found, Tag), selector
    return found


def text(soup: BeautifulSoup | Tag, selector: str) -> str:
    return " ".join(one(soup, selector).get_text().split())


def state(client: TestClient) -> dict[str, object]:
    data = client.get("/api/state").json()["state"]
    assert isinstance(data, dict)
    return data


def commit(client: TestClient, choice: str = "residual") -> None:
    assert client.post("/predict", data={"choice": choice}).status_code == 303


# --- without JavaScript ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "data", "anchor"),
    [
        ("/predict", {"choice": "layer_norm"}, "/#try"),
        ("/takeaway", {"text": "Mine."}, "/#takeaway-section"),
    ],
)
def test_a_successful_post_redirects_to_its_section(
    client: TestClient, path: str, data: dict[str, str], anchor: str
) -> None:
    response = client.post(path, data=data)
    assert response.status_code == 303
    assert response.headers["location"] == anchor


def test_numbers_and_reading_redirect_once_committed(client: TestClient) -> None:
    commit(client)
    numbers = client.post("/numbers", data={"row1_mean": "2"})
    assert (numbers.status_code, numbers.headers["location"]) == (303, "/#numbers-section")
    reading = client.post("/reading", data={"choice": WRONG_READING})
    assert (reading.status_code, reading.headers["location"]) == (303, "/#reading-section")


@pytest.mark.parametrize(
    ("path", "data", "form_id"),
    [
        ("/numbers", {"row1_mean": "2"}, "numbers"),
        ("/reading", {"choice": RIGHT_READING}, "reading"),
    ],
)
def test_try_it_before_the_commit_is_409_with_the_message_by_the_form(
    client: TestClient, path: str, data: dict[str, str], form_id: str
) -> None:
    response = client.post(path, data=data)
    assert response.status_code == 409
    soup = soup_of(response.text)
    alert = one(soup, f"#{form_id}-alert")
    assert alert["role"] == "alert"
    assert alert.get_text(strip=True) == LESSON.predict.locked_note
    # The alert sits inside the form's own region, and nothing was recorded.
    assert alert.find_parent(id=form_id) is not None
    assert state(client)["evaluated_runs"] == 0


def test_a_refused_numbers_form_keeps_what_was_typed(client: TestClient) -> None:
    response = client.post("/numbers", data={"row1_mean": "2.5", "row2_variance": "abc"})
    assert response.status_code == 409
    soup = soup_of(response.text)
    assert one(soup, "#field-row1_mean")["value"] == "2.5"
    assert one(soup, "#field-row2_variance")["value"] == "abc"


@pytest.mark.parametrize(
    ("path", "data", "form_id", "message", "anchor"),
    [
        ("/predict", {}, "predict", "Pick one of the two answers before committing.", "predict"),
        ("/predict", {"choice": "both"}, "predict", "Pick one of the two answers", "predict"),
        (
            "/numbers",
            {"row1_mean": "  "},
            "numbers",
            "Type a number in at least one field",
            "numbers-alert",
        ),
        ("/reading", {}, "reading", "Pick one of the four readings", "reading-section"),
        (
            "/reading",
            {"choice": "nope"},
            "reading",
            "Pick one of the four readings",
            "reading-section",
        ),
    ],
)
def test_unusable_input_is_422_with_a_message(
    client: TestClient, path: str, data: dict[str, str], form_id: str, message: str, anchor: str
) -> None:
    if path != "/predict":
        commit(client)
    before = state(client)
    response = client.post(path, data=data)
    assert response.status_code == 422
    soup = soup_of(response.text)
    assert message in text(soup, f"#{form_id}-alert")
    # The refusal stands in for the form's prompt, not beside it.
    region = {"predict": "#predict-body", "reading": "#reading", "numbers": "#numbers"}[form_id]
    assert one(soup, region).select(".prompt") == []
    # The page opens at its top: the message is there too, with a link down to the form.
    summary = one(soup, "#error-summary")
    assert message in " ".join(summary.get_text().split())
    assert one(summary, "a")["href"] == f"#{anchor}"
    assert state(client) == before
    # The page script's answer carries the form's regions only: no summary.
    answer = client.post(path, data=data, headers=JSON)
    assert "error-summary" not in str(answer.json()["fragments"])


# What a browser sends with a form it submits itself (Fetch Metadata): a page without
# JavaScript.
NAVIGATE = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}


@pytest.mark.parametrize(
    ("path", "data", "form_id", "message"),
    [
        ("/predict", {}, "predict", "Pick one of the two answers before committing."),
        ("/predict", {"choice": "both"}, "predict", "Pick one of the two answers"),
    ],
)
def test_a_browser_refused_without_javascript_is_redirected_to_a_page_it_can_return_to(
    client: TestClient, path: str, data: dict[str, str], form_id: str, message: str
) -> None:
    before = state(client)
    refused = client.post(path, data={**data, "eps": "off", "row": "1 2"}, headers=NAVIGATE)
    # Post/Redirect/Get: the refusal is a GET away, so Back and reload never post again.
    assert refused.status_code == 303
    assert refused.headers["location"] == "/?eps=off&row=1+2#error-summary"
    assert refused.headers["cache-control"] == "no-store"
    assert "frame-ancestors" in refused.headers["content-security-policy"]
    assert state(client) == before  # nothing written
    landed = client.get(refused.headers["location"])
    assert landed.status_code == 200
    soup = soup_of(landed.text)
    assert message in text(soup, "#error-summary")
    assert message in text(soup, f"#{form_id}-alert")
    # Shown once: the page that showed it deletes the cookie; the next visit is plain.
    assert FLASH_COOKIE not in client.cookies
    assert soup_of(client.get("/").text).select_one("#error-summary") is None


def test_a_takeaway_over_the_limit_redirected_keeps_every_character(client: TestClient) -> None:
    long_text = "Mine, and long: ω " * 200  # over the limit, not ASCII
    assert len(long_text) > LESSON.takeaway.max_chars
    refused = client.post("/takeaway", data={"text": long_text}, headers=NAVIGATE)
    assert refused.status_code == 303
    soup = soup_of(client.get(refused.headers["location"]).text)
    assert one(soup, "#takeaway-text").get_text() == long_text
    assert one(soup, "#takeaway-status")["role"] == "alert"
    assert state(client)["takeaway"] is None


def test_a_refusal_too_large_for_a_cookie_is_answered_in_place(client: TestClient) -> None:
    # Typed text a cookie cannot hold is never cut: the page comes as the refusal's answer.
    noise = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(4000))
    refused = client.post("/takeaway", data={"text": noise}, headers=NAVIGATE)
    assert refused.status_code == 422
    assert one(soup_of(refused.text), "#takeaway-text").get_text() == noise


def test_a_flash_is_read_only_by_its_own_learner_and_only_when_signed(
    client: TestClient, app: Starlette
) -> None:
    refused = client.post("/predict", data={}, headers=NAVIGATE)
    flash = refused.cookies[FLASH_COOKIE]

    def shown(value: str) -> bool:
        client.cookies.delete(FLASH_COOKIE)
        client.cookies.set(FLASH_COOKIE, value)
        answer = client.get("/")
        assert answer.status_code == 200
        return soup_of(answer.text).select_one("#error-summary") is not None

    # Another learner's, signed by this server: not this learner's to see.
    secret = app.state.services.settings.secret_key
    assert not shown(str(flash_value(Refusal("predict", "Not yours."), "0" * 32, secret)))
    assert not shown(altered_signature(flash))  # forged
    assert not shown("not even base64 %%%")
    assert shown(flash)


def test_a_page_without_a_refusal_has_no_error_summary(client: TestClient) -> None:
    assert soup_of(client.get("/").text).select_one("#error-summary") is None


def test_the_prediction_never_changes(client: TestClient) -> None:
    commit(client, "layer_norm")
    again = client.post("/predict", data={"choice": "residual"})
    assert again.status_code == 409
    assert state(client)["prediction"] == "layer_norm"
    # The page no longer offers the form, so the refusal is shown as a page alert.
    assert "already committed" in again.text


def test_numbers_land_count_attempts_and_give_feedback(client: TestClient) -> None:
    commit(client)
    # A format error costs no attempt; a slip gets its own feedback.
    client.post("/numbers", data={"row1_mean": "two", "row1_variance": "1"})
    soup = soup_of(client.get("/").text)
    assert text(soup, "#field-row1_mean-attempts") == "Attempts: 0"
    assert "not a number" in text(soup, "#field-row1_mean-feedback")
    assert text(soup, "#field-row1_variance-attempts") == "Attempts: 1"
    assert text(soup, "#field-row1_variance-feedback") == " ".join(
        LESSON.slip_feedback["variance_n_minus_1"].split()
    )
    assert one(soup, "#field-row1_variance")["aria-invalid"] == "true"

    client.post("/numbers", data={"row1_mean": "2", "row1_variance": "0.667"})
    soup = soup_of(client.get("/").text)
    for field_id, attempts in (("row1_mean", 1), ("row1_variance", 2)):
        box = one(soup, f"#field-{field_id}")
        assert box.has_attr("readonly")
        assert text(soup, f"#field-{field_id}-attempts") == f"Attempts: {attempts}"
        assert LESSON.numbers.landed_text in text(soup, f"#field-{field_id}-feedback")
    assert text(soup, "#gate-numbers") == "2 of 6 numbers landed."
    assert LESSON.hints.runs_sentence(2) == text(soup, "#hints-run-count")


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("NaN", "That is not a number (NaN); the answer is a finite number."),
        ("inf", "That is infinite; the answer is a finite number."),
        ("-Infinity", "That is infinite; the answer is a finite number."),
        ("1e999999", "That exponent is out of range"),
        ("1e400", "That number is too large to work with here."),
        ("1/0", "That divides by zero"),
    ],
)
def test_a_number_that_is_not_finite_is_a_format_error_and_costs_nothing(
    client: TestClient, typed: str, said: str
) -> None:
    commit(client)
    answer = client.post("/numbers", data={"row1_mean": typed}, headers=JSON)
    assert answer.status_code == 200 and said in answer.json()["message"]
    fields = state(client)["fields"]
    assert isinstance(fields, dict)
    field = fields["row1_mean"]
    assert field["last_verdict"] == "format_error"
    assert (field["attempts"], field["landed"]) == (0, False)


@pytest.mark.parametrize("headers", [{}, JSON], ids=["no-js", "js"])
def test_an_unchanged_wrong_answer_costs_nothing_on_both_paths(
    client: TestClient, headers: dict[str, str]
) -> None:
    # The mean of [1, 2, 3] is 2: "2.5" is wrong. Checking only the variance next sends the
    # untouched "2.5" again; it is not graded again.
    commit(client)
    client.post("/numbers", data={"row1_mean": "2.5"}, headers=headers)
    client.post("/numbers", data={"row1_mean": "2.5", "row1_variance": "1"}, headers=headers)
    fields = state(client)["fields"]
    assert isinstance(fields, dict)
    assert fields["row1_mean"]["attempts"] == 1
    assert fields["row1_variance"]["attempts"] == 1
    assert state(client)["evaluated_runs"] == 2

    # Every typed answer unchanged: a 409 with the message by the form, nothing appended.
    again = client.post(
        "/numbers", data={"row1_mean": "2.5", "row1_variance": "1"}, headers=headers
    )
    assert again.status_code == 409
    said = again.json()["message"] if headers else text(soup_of(again.text), "#numbers-alert")
    assert said.startswith("Nothing has changed since your last check")
    assert state(client)["evaluated_runs"] == 2
    assert state(client)["fields"]["row1_mean"]["attempts"] == 1  # type: ignore[index]
    # The refusal leaves the fields as they were: still wrong, with their feedback.
    page = soup_of(client.get("/").text if headers else again.text)
    if headers:
        fragment = again.json()["fragments"]["numbers"]
        page = soup_of(fragment)
    mean = one(page, "#field-row1_mean")
    assert mean.get("aria-invalid") == "true"
    assert text(page, "#field-row1_mean-feedback") != ""


def test_a_refusal_echoing_another_answer_sets_the_verdict_aside(client: TestClient) -> None:
    # The verdict stays on the page, hidden, with the answer it was given for, so that page.js
    # can bring it back when that answer is typed again; the field is not marked invalid.
    commit(client)
    client.post("/numbers", data={"row1_mean": "2.5"})
    refused = client.post("/numbers", data={"row1_mean": " "})
    assert refused.status_code == 409  # a blank field is not checked: it keeps its answer
    page = soup_of(refused.text)
    mean = one(page, "#field-row1_mean")
    assert mean.get("value") == " "
    assert mean.get("data-graded") == "2.5"
    assert mean.has_attr("data-graded-invalid")
    assert not mean.has_attr("aria-invalid")
    feedback = one(page, "#field-row1_mean-feedback")
    assert feedback.has_attr("hidden") and text(page, "#field-row1_mean-feedback") != ""
    # The same answer echoed: the verdict stands, shown.
    unchanged = soup_of(client.post("/numbers", data={"row1_mean": "2.5"}).text)
    assert one(unchanged, "#field-row1_mean").get("aria-invalid") == "true"
    assert not one(unchanged, "#field-row1_mean-feedback").has_attr("hidden")
    # A field without a verdict says nothing of one.
    assert not one(unchanged, "#field-row1_variance").has_attr("data-graded")


def test_all_six_landed_disables_the_check(client: TestClient) -> None:
    commit(client)
    client.post("/numbers", data=RIGHT)
    soup = soup_of(client.get("/").text)
    assert text(soup, "#gate-numbers") == "6 of 6 numbers landed."
    assert one(soup, "#numbers-check").has_attr("disabled")
    again = client.post("/numbers", data=RIGHT)
    assert again.status_code == 409
    assert "nothing left to check" in text(soup_of(again.text), "#numbers-alert")


def test_a_wrong_reading_may_be_locked_again_and_the_right_one_is_final(
    client: TestClient,
) -> None:
    commit(client)
    client.post("/reading", data={"choice": WRONG_READING})
    soup = soup_of(client.get("/").text)
    feedback = text(soup, "#reading-feedback")
    assert "[4, 4, 4, 4]" in feedback
    # Wrong in words, not in colour alone; the right reading's feedback opens with "Right.".
    assert feedback.startswith(f"{LESSON.reading.wrong_opening} ")
    assert one(soup, f"#reading-{WRONG_READING}").has_attr("checked")
    assert not one(soup, "#reading fieldset").has_attr("disabled")

    client.post("/reading", data={"choice": RIGHT_READING})
    soup = soup_of(client.get("/").text)
    assert one(soup, "#reading fieldset").has_attr("disabled")
    assert soup.select_one("#reading-lock") is None
    assert "right" in str(one(soup, "#reading-feedback")["class"])
    assert text(soup, "#reading-feedback").startswith("✓ Right.")
    assert text(soup, "#gate-reading") == "The right reading is locked."
    final = client.post("/reading", data={"choice": WRONG_READING})
    assert final.status_code == 409
    assert state(client)["reading"]["right"] is True  # type: ignore[index]


def test_the_reading_locked_last_is_not_locked_again(client: TestClient) -> None:
    # A double click or a resent form: its verdict is on the page already, and it is no run.
    commit(client)
    assert client.post("/reading", data={"choice": WRONG_READING}).status_code == 303
    for headers in ({}, JSON):
        again = client.post("/reading", data={"choice": WRONG_READING}, headers=headers)
        assert again.status_code == 409
    assert again.json()["ok"] is False
    assert again.json()["message"] == SAME_READING_AGAIN
    html_again = client.post("/reading", data={"choice": WRONG_READING})
    assert SAME_READING_AGAIN in text(soup_of(html_again.text), "#reading-alert")
    reading = state(client)["reading"]
    assert (reading["locks"], state(client)["evaluated_runs"]) == (1, 1)  # type: ignore[index]
    # Another reading may be locked, and after it the first one again.
    assert client.post("/reading", data={"choice": OTHER_WRONG_READING}).status_code == 303
    assert client.post("/reading", data={"choice": WRONG_READING}).status_code == 303
    assert state(client)["evaluated_runs"] == 3


def test_the_takeaway_is_saved_escaped_and_shown_again(client: TestClient) -> None:
    sneaky = '<script>alert("x")</script> & <b>bold</b>'
    assert client.post("/takeaway", data={"text": sneaky}).status_code == 303
    html = client.get("/").text
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    soup = soup_of(html)
    assert one(soup, "#takeaway-text").get_text() == sneaky
    assert text(soup, "#takeaway-status") == "Saved"


def test_a_takeaway_saved_empty_says_it_is_cleared(client: TestClient) -> None:
    client.post("/takeaway", data={"text": "A line."})
    answer = client.post("/takeaway", data={"text": ""}, headers=JSON).json()
    assert answer["message"] == LESSON.takeaway.cleared_text
    soup = soup_of(client.get("/").text)
    assert one(soup, "#takeaway-text").get_text() == ""
    assert text(soup, "#takeaway-status") == "Saved empty: your takeaway is cleared."


def test_a_takeaway_over_the_limit_is_422_and_keeps_the_text(client: TestClient) -> None:
    long_text = "a" * (LESSON.takeaway.max_chars + 1)
    response = client.post("/takeaway", data={"text": long_text})
    assert response.status_code == 422
    soup = soup_of(response.text)
    status = one(soup, "#takeaway-status")
    assert status["role"] == "alert"
    assert "2,001 characters" in status.get_text() and "2,000" in status.get_text()
    assert one(soup, "#takeaway-text").get_text() == long_text
    assert state(client)["takeaway"] is None


def test_actions_while_8_5_is_not_done_are_refused_on_the_locked_page(
    make_settings: SettingsFactory,
) -> None:
    with PageClient(create_app(make_settings(dev_prerequisite_done=False))) as test_client:
        response = test_client.post("/predict", data={"choice": "residual"})
        data = test_client.post("/takeaway", data={"text": "x"}, headers=JSON)
    assert response.status_code == 409
    assert " ".join(LESSON.prerequisite.locked_text.split()) in text(
        soup_of(response.text), "[role=alert]"
    )
    assert data.status_code == 409 and data.json()["ok"] is False


def test_a_reload_shows_exactly_the_same_state(client: TestClient) -> None:
    commit(client)
    client.post("/numbers", data={"row1_mean": "2", "row2_mean": "4"})
    client.post("/reading", data={"choice": WRONG_READING})
    client.post("/takeaway", data={"text": "Kept."})
    first, second = client.get("/").text, client.get("/").text
    assert first == second


# --- with JavaScript (Accept: application/json) ----------------------------------------------


def test_json_success_returns_the_message_and_the_fragments(client: TestClient) -> None:
    response = client.post("/predict", data={"choice": "residual"}, headers=JSON)
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["message"] == f"{LESSON.predict.committed_text} Residual connections"
    assert set(body["fragments"]) == {
        "predict-body",
        "try-lock",
        "eps-control",
        "own-row",
        "numbers",
        "reading",
        "hints-body",
        "gate",
        # Issue 4: the row predictions open and Compare states the opening prediction.
        "ablation-rows",
        "compare-body",
    }
    for element_id, html in body["fragments"].items():
        root = soup_of(html).find(True)
        assert isinstance(root, Tag) and root["id"] == element_id


def test_each_fragment_is_exactly_that_region_of_the_page(client: TestClient) -> None:
    commit(client)
    body = client.post("/numbers", data={"row1_mean": "2", "row1_variance": "1"}, headers=JSON)
    page = soup_of(client.get("/").text)
    for element_id, html in body.json()["fragments"].items():
        assert soup_of(html) == soup_of(str(one(page, f"#{element_id}"))), element_id


def test_json_numbers_announce_each_field(client: TestClient) -> None:
    commit(client)
    body = client.post(
        "/numbers", data={"row1_mean": "2", "row1_variance": "1"}, headers=JSON
    ).json()
    assert body["ok"] is True
    # Each field's part ends as a sentence, so the next is heard apart.
    assert body["message"].startswith(
        f"Mean of [1, 2, 3]: {LESSON.numbers.landed_text}. Variance of [1, 2, 3]: "
    )
    assert "Variance of [1, 2, 3]: That divides by n - 1" in body["message"]
    assert body["message"].endswith(".")
    numbers = soup_of(body["fragments"]["numbers"])
    assert text(numbers, "#field-row1_variance-attempts") == "Attempts: 1"
    assert LESSON.numbers.all_landed_text not in body["message"]
    # The check that lands the last of the six says so, and what comes next.
    rest = {k: v for k, v in RIGHT.items() if k != "row1_mean"}
    last = client.post("/numbers", data=rest, headers=JSON).json()
    assert last["message"].endswith(
        f"{LESSON.numbers.landed_text}. {LESSON.numbers.all_landed_text}"
    )


@pytest.mark.parametrize(
    ("path", "data", "status", "fragment", "alert_id"),
    [
        ("/numbers", {"row1_mean": "2"}, 409, "numbers", "numbers-alert"),
        ("/reading", {"choice": RIGHT_READING}, 409, "reading", "reading-alert"),
        ("/predict", {"choice": ""}, 422, "predict-body", "predict-alert"),
        ("/takeaway", {"text": "z" * 2001}, 422, "takeaway-status", "takeaway-status"),
    ],
)
def test_json_refusals_keep_their_status_and_render_the_alert(
    client: TestClient,
    path: str,
    data: dict[str, str],
    status: int,
    fragment: str,
    alert_id: str,
) -> None:
    response = client.post(path, data=data, headers=JSON)
    assert response.status_code == status
    body = response.json()
    assert body["ok"] is False and body["message"]
    alert = one(soup_of(body["fragments"][fragment]), f"#{alert_id}")
    assert alert["role"] == "alert"
    assert alert.get_text(strip=True) == body["message"]


def test_json_takeaway_returns_only_its_status_line(client: TestClient) -> None:
    body = client.post("/takeaway", data={"text": "Short and mine."}, headers=JSON).json()
    assert body == {
        "ok": True,
        "message": "Saved",
        "fragments": {
            "takeaway-status": (
                '<p id="takeaway-status" class="status" data-base="Short and mine.">Saved</p>'
            )
        },
    }


def base_of(page_html: str) -> str:
    """The saved takeaway a page's takeaway form was drawn from (its hidden field)."""
    return str(one(soup_of(page_html), "#takeaway input[name=base]")["value"])


def test_an_old_tab_never_saves_over_a_newer_takeaway(
    client: TestClient, make_client: MakeClient
) -> None:
    # Two tabs of one learner: the same cookie, each page drawn before either saved.
    assert client.post("/takeaway", data={"text": "First words."}).status_code == 303
    tab_two = make_client()
    tab_two.cookies.update(client.cookies)
    base_one = base_of(client.get("/").text)
    base_two = base_of(tab_two.get("/").text)
    assert base_one == base_two == "First words."

    saved = tab_two.post("/takeaway", data={"text": "Tab two's.", "base": base_two}, headers=JSON)
    assert saved.status_code == 200
    assert (
        one(soup_of(saved.json()["fragments"]["takeaway-status"]), "#takeaway-status")["data-base"]
        == "Tab two's."
    )

    stale = LESSON.takeaway.stale.format(saved="Tab two's.")
    late = client.post("/takeaway", data={"text": "Tab one's.", "base": base_one}, headers=JSON)
    assert late.status_code == 409
    body = late.json()
    assert (body["ok"], body["message"]) == (False, stale)
    status = one(soup_of(body["fragments"]["takeaway-status"]), "#takeaway-status")
    assert (status["role"], status["data-base"]) == ("alert", "Tab two's.")
    assert state(client)["takeaway"] == "Tab two's."

    # Without JavaScript: the error summary says it, and the box keeps what tab one typed.
    page = client.post("/takeaway", data={"text": "Tab one's.", "base": base_one}, headers=NAVIGATE)
    assert page.status_code == 303
    soup = soup_of(client.get(page.headers["location"]).text)
    assert stale in text(soup, "#error-summary")
    assert one(soup, "#takeaway-text").get_text() == "Tab one's."
    assert base_of(str(soup)) == "Tab two's."
    assert state(client)["takeaway"] == "Tab two's."

    # Told, tab one saves over the newer text from the base it was shown; the same text twice
    # is no conflict, and a post with no base (a script) is last-write-wins as before.
    again = client.post("/takeaway", data={"text": "Both tabs'.", "base": "Tab two's."})
    assert again.status_code == 303
    repeat = tab_two.post("/takeaway", data={"text": "Both tabs'.", "base": base_two})
    assert repeat.status_code == 303
    assert client.post("/takeaway", data={"text": "A script's."}).status_code == 303
    assert state(client)["takeaway"] == "A script's."


def test_a_form_body_that_is_not_a_form_is_refused_as_such(client: TestClient) -> None:
    response = client.post(
        "/predict", content=b'{"choice": "residual"}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 415
    assert state(client)["prediction"] is None


def test_unknown_form_fields_are_ignored(client: TestClient) -> None:
    commit(client)
    response = client.post("/numbers", data={"row1_mean": "2", "extra": "1"}, headers=JSON)
    assert response.status_code == 200
    assert state(client)["fields"]["row1_mean"]["landed"] is True  # type: ignore[index]
