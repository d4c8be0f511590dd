"""The event -> statement mapping, a pure function: each kind's verb, object and result, the
actor each identity choice makes, the context, and ids that are the same for the same event
and differ for any other."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from normdive.config import ActorIdentity
from normdive.lesson.content import load_lesson
from normdive.lesson.translations import localized
from normdive.progress.events import Event, EventKind
from normdive.xapi.statements import (
    ADL_VERBS,
    STATEMENT_KINDS,
    Learner,
    LtiLink,
    Tool,
    numeric_range,
    statements_of,
    voiding,
)

LESSON = load_lesson()
ORIGIN = "https://d9.example.edu"
TOOL = Tool(origin=ORIGIN, version="1.2.3", lesson=LESSON)
LINK = LtiLink(
    link_key="k" * 64,
    issuer="https://lms.example.edu",
    user_id="sub-42",
    resource_link_id="link-1",
    resource_link_title="D9",
    context_key="c" * 64,
    context_id="course-1",
    context_title="Machine learning",
    platform="Moodle",
)
ANONYMOUS = Learner("a" * 32, None)
LAUNCHED = Learner("b" * 32, LINK, name="Ada Lovelace", email="ada@example.edu")
MOMENT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def event(
    kind: EventKind, payload: dict[str, Any], event_id: int = 7, learner: Learner = LAUNCHED
) -> Event:
    return Event(event_id, learner.learner_id, kind, payload, MOMENT)


def made(
    kind: EventKind,
    payload: dict[str, Any],
    learner: Learner = LAUNCHED,
    tool: Tool = TOOL,
    language: str = "de",
) -> list[dict[str, Any]]:
    return statements_of(
        event(kind, payload, learner=learner), learner, tool, localized(LESSON, language), language
    )


def test_each_answer_of_a_check_is_one_answered_statement_with_its_slip() -> None:
    answers = [
        {"field": "row1_mean", "raw": "6", "parsed": "6", "verdict": "wrong",
         "slip": "mean_not_divided", "message": None},
        {"field": "row1_variance", "raw": "2/3", "parsed": "2/3", "verdict": "right",
         "slip": None, "message": None},
        {"field": "row2_mean", "raw": "drei", "parsed": None, "verdict": "format_error",
         "slip": None, "message": "not a number"},
    ]  # fmt: skip
    slip, right, typo = made(EventKind.NUMBERS_CHECKED, {"answers": answers})
    assert {s["verb"]["id"] for s in (slip, right, typo)} == {ADL_VERBS + "answered"}
    assert slip["object"]["id"] == f"{ORIGIN}/xapi/activities/d9/numbers/row1_mean"
    definition = slip["object"]["definition"]
    assert definition["interactionType"] == "numeric"
    assert definition["correctResponsesPattern"] == ["1.999[:]2.001"]
    assert definition["name"]["en"] == LESSON.field("row1_mean").label  # type: ignore[union-attr]
    assert definition["name"]["de"] == localized(LESSON, "de").field("row1_mean").label  # type: ignore[union-attr]
    extension = f"{ORIGIN}/xapi/extensions/"
    assert slip["result"] == {
        "response": "6",
        "success": False,
        "extensions": {extension + "verdict": "wrong", extension + "slip": "mean_not_divided",
                       extension + "parsed": "6"},
    }  # fmt: skip
    assert right["result"]["success"] is True
    assert typo["result"] == {
        "response": "drei",
        "extensions": {extension + "verdict": "format_error"},
    }
    assert len({slip["id"], right["id"], typo["id"]}) == 3


def test_the_variance_range_is_exact_within_the_tolerance() -> None:
    # [1, 2, 3]: variance 2/3 = 0.6666..., within 0.001 either side, rounded outwards.
    assert numeric_range(LESSON, "row1_variance") == "0.665666666[:]0.667666667"


def test_the_reading_names_its_right_choice() -> None:
    right = next(choice for choice in LESSON.reading.choices if choice.correct)
    [statement] = made(EventKind.READING_LOCKED, {"choice": right.id, "right": True})
    definition = statement["object"]["definition"]
    assert definition["interactionType"] == "choice"
    assert definition["correctResponsesPattern"] == [right.id]
    assert [c["id"] for c in definition["choices"]] == [c.id for c in LESSON.reading.choices]
    assert statement["result"] == {"response": right.id, "success": True}


@pytest.mark.parametrize(
    ("kind", "payload", "verb", "path"),
    [
        (EventKind.PREDICTION_COMMITTED, {"choice": "residual"}, "answered", "/prediction"),
        (EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"}, "answered",
         "/rows/both/prediction"),
        (EventKind.ROW_PLAYED, {"row": "neither"}, "experienced", "/rows/neither"),
        (EventKind.GATE_CLOSED, {"recording_digest": "0" * 64, "recording_file": "r.json"},
         "passed", ""),
        (EventKind.TAKEAWAY_SAVED, {"text": "norms"}, "commented", ""),
        (EventKind.LAB_COMMITTED, {"run": 1, "config": {}, "outcome": "learns"}, "attempted",
         "/lab"),
        (EventKind.LAB_FINISHED, {"run": 1, "final": {}, "curve": [], "outcome": "chance"},
         "completed", "/lab"),
        (EventKind.RERUN_ROW_FINISHED, {"rerun": 1, "row": "both", "config": {}, "final": {},
         "curve": [], "outcome": "learns"}, "completed", "/rerun/rows/both"),
    ],
)  # fmt: skip
def test_each_kind_has_its_verb_and_object(
    kind: EventKind, payload: dict[str, Any], verb: str, path: str
) -> None:
    [statement] = made(kind, payload)
    assert statement["verb"] == {"id": ADL_VERBS + verb, "display": {"en": verb}}
    assert statement["object"]["id"] == f"{ORIGIN}/xapi/activities/d9{path}"
    assert statement["object"]["definition"]["name"]["en"]
    parent = statement["context"]["contextActivities"].get("parent")
    assert (parent is None) == (path == "")  # the lesson's parts name it as their parent


def test_the_gate_is_passed_with_full_marks() -> None:
    [statement] = made(
        EventKind.GATE_CLOSED, {"recording_digest": "0" * 64, "recording_file": "r.json"}
    )
    assert statement["result"]["score"] == {"scaled": 1.0, "raw": 12, "min": 0, "max": 12}
    assert statement["result"]["success"] is statement["result"]["completion"] is True


def test_kinds_of_no_note_make_no_statement() -> None:
    assert made(EventKind.HINT_OPENED, {"rung": 1}) == []
    assert made(EventKind.PREREQUISITE_DONE, {"source": "host"}) == []
    assert EventKind.HINT_OPENED not in STATEMENT_KINDS


def test_the_same_event_is_the_same_statement_and_another_is_another() -> None:
    payload = {"choice": "residual"}
    once = made(EventKind.PREDICTION_COMMITTED, payload)
    assert made(EventKind.PREDICTION_COMMITTED, payload) == once
    other = statements_of(
        event(EventKind.PREDICTION_COMMITTED, payload, event_id=8),
        LAUNCHED,
        TOOL,
        localized(LESSON, "de"),
        "de",
    )
    assert other[0]["id"] != once[0]["id"]
    # The same event id in another database: another learner, another statement.
    elsewhere = made(EventKind.PREDICTION_COMMITTED, payload, learner=ANONYMOUS)
    assert elsewhere[0]["id"] != once[0]["id"]
    assert once[0]["timestamp"] == "2026-03-01T12:00:00+00:00"


def test_the_actor_is_the_lti_account_unless_the_deployment_chooses_more() -> None:
    payload = {"choice": "residual"}
    [account] = made(EventKind.PREDICTION_COMMITTED, payload)
    assert account["actor"] == {
        "objectType": "Agent",
        "account": {"homePage": "https://lms.example.edu", "name": "sub-42"},
    }
    named = Tool(ORIGIN, "1", LESSON, ActorIdentity.ACCOUNT_AND_NAME)
    [with_name] = made(EventKind.PREDICTION_COMMITTED, payload, tool=named)
    assert with_name["actor"]["name"] == "Ada Lovelace"
    assert "account" in with_name["actor"]
    emailed = Tool(ORIGIN, "1", LESSON, ActorIdentity.EMAIL_AND_NAME)
    [with_email] = made(EventKind.PREDICTION_COMMITTED, payload, tool=emailed)
    assert with_email["actor"] == {
        "objectType": "Agent",
        "mbox": "mailto:ada@example.edu",
        "name": "Ada Lovelace",
    }
    # Nothing sent by the platform: the account alone, whatever the choice.
    [anonymous] = made(EventKind.PREDICTION_COMMITTED, payload, learner=ANONYMOUS, tool=emailed)
    assert anonymous["actor"] == {
        "objectType": "Agent",
        "account": {"homePage": ORIGIN, "name": "a" * 32},
    }


def test_the_context_names_the_lti_course_and_link_language_platform_and_version() -> None:
    [statement] = made(EventKind.ROW_PLAYED, {"row": "both"})
    context = statement["context"]
    assert context["language"] == "de"
    assert context["platform"] == "Moodle"
    assert context["extensions"] == {f"{ORIGIN}/xapi/extensions/tool-version": "1.2.3"}
    course, link = context["contextActivities"]["grouping"]
    assert course["definition"]["extensions"] == {
        "https://purl.imsglobal.org/spec/lti/claim/context": {
            "iss": "https://lms.example.edu",
            "id": "course-1",
        }
    }
    assert link["definition"]["name"] == {"und": "D9"}
    [again] = made(EventKind.ROW_PLAYED, {"row": "neither"})
    assert again["context"]["registration"] == context["registration"]
    [english] = made(EventKind.ROW_PLAYED, {"row": "both"}, learner=ANONYMOUS, language="en")
    assert english["context"]["platform"] == "normdive"
    assert "grouping" not in english["context"]["contextActivities"]
    assert set(english["object"]["definition"]["name"]) == {"en"}


def test_a_voiding_statement_names_the_one_it_voids() -> None:
    voided = voiding(TOOL, "0b0ef2c4-1d1d-4b4b-9c9c-000000000000", "2026-03-02T00:00:00+00:00")
    assert voided["verb"]["id"] == ADL_VERBS + "voided"
    assert voided["object"] == {
        "objectType": "StatementRef",
        "id": "0b0ef2c4-1d1d-4b4b-9c9c-000000000000",
    }
    assert voiding(TOOL, voided["object"]["id"], "later")["id"] == voided["id"]
