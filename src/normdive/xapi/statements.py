"""A learner's events as xAPI 1.0.3 statements: one pure function, `statements_of`, and the
voiding statement that withdraws one (`voiding`). Which event makes which statement is README's
table ("Learning records (xAPI)"); a statement's id derives from its event (RFC 4122 version
5), so the same event sent twice is one statement in the LRS (Communication 2.1.2).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Any
from urllib.parse import quote

from normdive.config import ActorIdentity
from normdive.lesson.content import Lesson
from normdive.lti.launch import CONTEXT_CLAIM, RESOURCE_LINK_CLAIM
from normdive.lti.passback import parts_total
from normdive.numeric.targets import exact_value
from normdive.progress.events import Event, EventKind

XAPI_VERSION = "1.0.3"
# The language of the lesson's source text (content/d9.toml), and of every verb's display.
SOURCE_LANGUAGE = "en"
# A platform's titles are in a language nobody said: RFC 5646's "undetermined".
UNDETERMINED_LANGUAGE = "und"
# Where a statement names the tool: an anonymous learner's platform, the voiding agent.
TOOL_NAME = "normdive"

ADL_VERBS = "http://adlnet.gov/expapi/verbs/"
ANSWERED = "answered"
EXPERIENCED = "experienced"
PASSED = "passed"
COMMENTED = "commented"
ATTEMPTED = "attempted"
COMPLETED = "completed"
VOIDED = "voided"

ADL_ACTIVITIES = "http://adlnet.gov/expapi/activities/"
LESSON_TYPE = ADL_ACTIVITIES + "lesson"
QUESTION_TYPE = ADL_ACTIVITIES + "cmi.interaction"
SIMULATION_TYPE = ADL_ACTIVITIES + "simulation"
COURSE_TYPE = ADL_ACTIVITIES + "course"
LINK_TYPE = ADL_ACTIVITIES + "link"
# hint_opened and prerequisite_done make none; migration 0013's trigger names the same kinds.
STATEMENT_KINDS = frozenset(
    {
        EventKind.PREDICTION_COMMITTED,
        EventKind.NUMBERS_CHECKED,
        EventKind.READING_LOCKED,
        EventKind.ROW_PREDICTED,
        EventKind.ROW_PLAYED,
        EventKind.GATE_CLOSED,
        EventKind.TAKEAWAY_SAVED,
        EventKind.LAB_COMMITTED,
        EventKind.LAB_FINISHED,
        EventKind.RERUN_ROW_FINISHED,
    }
)
# The decimal places a number's correct range is written to (its bounds rounded outwards).
PATTERN_PLACES = Decimal("1e-9")

Statement = dict[str, Any]


@dataclass(frozen=True)
class LtiLink:
    """The link the learner last launched when the event was stored, with its issuer."""

    link_key: str
    issuer: str
    user_id: str
    resource_link_id: str
    resource_link_title: str | None
    context_key: str | None
    context_id: str | None
    context_title: str | None
    platform: str | None


@dataclass(frozen=True)
class Learner:
    """`link` None: came outside any LMS; name and email None: not sent, or not kept."""

    learner_id: str
    link: LtiLink | None
    name: str | None = None
    email: str | None = None


@dataclass(frozen=True)
class Tool:
    """What every statement of one deployment shares."""

    origin: str
    version: str
    lesson: Lesson
    identity: ActorIdentity = ActorIdentity.ACCOUNT

    def activity_iri(self, *path: str) -> str:
        parts = "/".join(quote(part, safe="") for part in path)
        return f"{self.origin}/xapi/activities/{self.lesson.id}" + (f"/{parts}" if parts else "")

    def extension(self, name: str) -> str:
        return f"{self.origin}/xapi/extensions/{name}"


def statement_id(tool: Tool, event: Event, part: int) -> str:
    """The id of the `part`-th statement of an event: the same for the same event, always, and
    another for any other event, of any database (the learner's id is 128 random bits)."""
    name = f"{tool.origin}/xapi/statements/{event.learner_id}/{event.id}/{part}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def registration(tool: Tool, learner: Learner) -> str:
    """One registration per learner and resource link (xAPI 1.0.3 Data 2.4.6.1: an attempt
    at the activity); an anonymous learner has one."""
    link = learner.link.link_key if learner.link is not None else ""
    name = f"{tool.origin}/xapi/registrations/{learner.learner_id}/{link}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def actor(tool: Tool, learner: Learner) -> dict[str, Any]:
    """Their LTI account (issuer and sub, which the LMS joins to its users), else their random
    id under the tool's origin; an email and a name only as Tool.identity allows."""
    link = learner.link
    if link is not None:
        account = {"homePage": link.issuer, "name": link.user_id}
    else:
        account = {"homePage": tool.origin, "name": learner.learner_id}
    agent: dict[str, Any] = {"objectType": "Agent"}
    if tool.identity is ActorIdentity.EMAIL_AND_NAME and learner.email:
        agent["mbox"] = f"mailto:{learner.email}"
    else:
        agent["account"] = account
    if tool.identity is not ActorIdentity.ACCOUNT and learner.name:
        agent["name"] = learner.name
    return agent


def _words(english: str, language: str, translated: str) -> dict[str, str]:
    """A language map: the English text, and the learner's language's when that is another."""
    words = {SOURCE_LANGUAGE: english}
    if language != SOURCE_LANGUAGE:
        words[language] = translated
    return words


def _verb(name: str) -> dict[str, Any]:
    return {"id": ADL_VERBS + name, "display": {SOURCE_LANGUAGE: name}}


@dataclass(frozen=True)
class _Texts:
    english: Lesson
    translated: Lesson
    language: str

    def words(self, pick: Any) -> dict[str, str]:
        return _words(pick(self.english), self.language, pick(self.translated))


def _activity(iri: str, definition: dict[str, Any]) -> dict[str, Any]:
    return {"objectType": "Activity", "id": iri, "definition": definition}


def lesson_activity(tool: Tool, texts: _Texts) -> dict[str, Any]:
    return _activity(
        tool.activity_iri(),
        {
            "name": texts.words(lambda lesson: lesson.title),
            "description": texts.words(lambda lesson: lesson.summary),
            "type": LESSON_TYPE,
        },
    )


def _choices(texts: _Texts, pick: Any) -> list[dict[str, Any]]:
    """A choice interaction's components (xAPI 1.0.3 Data 2.4.4.1.3) in both languages."""
    return [
        {"id": english.id, "description": _words(english.label, texts.language, shown.label)}
        for english, shown in zip(pick(texts.english), pick(texts.translated), strict=True)
    ]


def _question(
    name: dict[str, str],
    interaction: str,
    *,
    description: dict[str, str] | None = None,
    choices: list[dict[str, Any]] | None = None,
    correct: list[str] | None = None,
) -> dict[str, Any]:
    definition: dict[str, Any] = {"name": name, "type": QUESTION_TYPE}
    if description is not None:
        definition["description"] = description
    definition["interactionType"] = interaction
    if correct is not None:
        definition["correctResponsesPattern"] = correct
    if choices is not None:
        definition["choices"] = choices
    return definition


def _decimal(value: Fraction, rounding: str) -> str:
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    return str(exact.quantize(PATTERN_PLACES, rounding=rounding).normalize())


def numeric_range(lesson: Lesson, field_id: str) -> str:
    """A number's correct responses as xAPI writes a numeric range ("min[:]max", Data
    2.4.4.1.2): its exact value within the lesson's tolerance, the bounds rounded outwards."""
    field = lesson.field(field_id)
    assert field is not None  # the store keeps only answers to the lesson's fields
    exact = exact_value(lesson.hand_rows[field.row], lesson.eps, field.step)
    tolerance = Fraction(lesson.tolerance)
    low = _decimal(exact - tolerance, ROUND_FLOOR)
    high = _decimal(exact + tolerance, ROUND_CEILING)
    return f"{low}[:]{high}"


def _number_statement(
    tool: Tool, texts: _Texts, answer: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    field_id = answer["field"]
    english, shown = texts.english.field(field_id), texts.translated.field(field_id)
    assert english is not None and shown is not None
    definition = _question(
        _words(english.label, texts.language, shown.label),
        "numeric",
        correct=[numeric_range(texts.english, field_id)],
    )
    verdict = answer.get("verdict")
    extensions: dict[str, Any] = {tool.extension("verdict"): verdict}
    if answer.get("slip"):
        extensions[tool.extension("slip")] = answer["slip"]
    if answer.get("parsed") is not None:
        extensions[tool.extension("parsed")] = answer["parsed"]
    result: dict[str, Any] = {"response": answer.get("raw", "")}
    if verdict in ("right", "wrong"):
        result["success"] = verdict == "right"
    result["extensions"] = extensions
    return _activity(tool.activity_iri("numbers", field_id), definition), result


def _row(texts: _Texts, key: str) -> tuple[dict[str, str], dict[str, str]]:
    """(name, description); a row the lesson does not name keeps its key."""
    english, shown = texts.english.row(key), texts.translated.row(key)
    if english is None or shown is None:
        return {SOURCE_LANGUAGE: key}, {SOURCE_LANGUAGE: key}
    return (
        _words(english.label, texts.language, shown.label),
        _words(english.description, texts.language, shown.description),
    )


def _objects_and_results(
    tool: Tool, texts: _Texts, event: Event
) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(verb, object, result or None) for each statement of `event`, in order."""
    payload = event.payload
    match event.kind:
        case EventKind.PREDICTION_COMMITTED:
            definition = _question(
                texts.words(lambda lesson: lesson.predict.heading),
                "choice",
                description=texts.words(lambda lesson: lesson.predict.question),
                choices=_choices(texts, lambda lesson: lesson.predict.choices),
            )
            opening = _activity(tool.activity_iri("prediction"), definition)
            return [(ANSWERED, opening, {"response": str(payload.get("choice", ""))})]
        case EventKind.NUMBERS_CHECKED:
            answers = [answer for answer in payload.get("answers", []) if isinstance(answer, dict)]
            return [
                (ANSWERED, *_number_statement(tool, texts, answer))
                for answer in answers
                if texts.english.field(str(answer.get("field"))) is not None
            ]
        case EventKind.READING_LOCKED:
            right = [choice.id for choice in texts.english.reading.choices if choice.correct]
            definition = _question(
                texts.words(lambda lesson: lesson.reading.heading),
                "choice",
                description=texts.words(lambda lesson: lesson.reading.question),
                choices=_choices(texts, lambda lesson: lesson.reading.choices),
                correct=right,
            )
            result = {"response": str(payload.get("choice", "")), "success": bool(payload["right"])}
            return [(ANSWERED, _activity(tool.activity_iri("reading"), definition), result)]
        case EventKind.ROW_PREDICTED:
            row = str(payload.get("row"))
            name, description = _row(texts, row)
            definition = _question(
                name,
                "choice",
                description=description,
                choices=_choices(texts, lambda lesson: lesson.outcomes),
            )
            question = _activity(tool.activity_iri("rows", row, "prediction"), definition)
            return [(ANSWERED, question, {"response": str(payload.get("outcome", ""))})]
        case EventKind.ROW_PLAYED:
            row = str(payload.get("row"))
            name, description = _row(texts, row)
            definition = {"name": name, "description": description, "type": SIMULATION_TYPE}
            return [(EXPERIENCED, _activity(tool.activity_iri("rows", row), definition), None)]
        case EventKind.GATE_CLOSED:
            parts = parts_total(texts.english)  # as grade passback scores the gate
            result = {
                "score": {"scaled": 1.0, "raw": parts, "min": 0, "max": parts},
                "success": True,
                "completion": True,
                "extensions": {
                    tool.extension("recording"): {
                        "file": payload.get("recording_file"),
                        "digest": payload.get("recording_digest"),
                    }
                },
            }
            return [(PASSED, lesson_activity(tool, texts), result)]
        case EventKind.TAKEAWAY_SAVED:
            result = {"response": str(payload.get("text", ""))}
            return [(COMMENTED, lesson_activity(tool, texts), result)]
        case EventKind.LAB_COMMITTED:
            result = {
                "response": str(payload.get("outcome", "")),
                "extensions": {
                    tool.extension("run"): payload.get("run"),
                    tool.extension("config"): payload.get("config"),
                },
            }
            return [(ATTEMPTED, _lab_activity(tool, texts), result)]
        case EventKind.LAB_FINISHED:
            result = {
                "completion": True,
                "extensions": {
                    tool.extension("run"): payload.get("run"),
                    tool.extension("final"): payload.get("final"),
                    tool.extension("outcome"): payload.get("outcome"),
                },
            }
            return [(COMPLETED, _lab_activity(tool, texts), result)]
        case EventKind.RERUN_ROW_FINISHED:
            row = str(payload.get("row"))
            name, _ = _row(texts, row)
            heading = texts.words(lambda lesson: lesson.rerun.heading)
            definition = {
                "name": {
                    language: f"{heading[language]}: {name.get(language, row)}"
                    for language in heading
                },
                "type": SIMULATION_TYPE,
            }
            result = {
                "completion": True,
                "extensions": {
                    tool.extension("rerun"): payload.get("rerun"),
                    tool.extension("config"): payload.get("config"),
                    tool.extension("final"): payload.get("final"),
                    tool.extension("outcome"): payload.get("outcome"),
                },
            }
            activity = _activity(tool.activity_iri("rerun", "rows", row), definition)
            return [(COMPLETED, activity, result)]
        case _:
            return []


def _lab_activity(tool: Tool, texts: _Texts) -> dict[str, Any]:
    definition = {
        "name": texts.words(lambda lesson: lesson.lab.heading),
        "description": texts.words(lambda lesson: lesson.lab.intro),
        "type": SIMULATION_TYPE,
    }
    return _activity(tool.activity_iri("lab"), definition)


def _lti_activities(tool: Tool, link: LtiLink) -> list[dict[str, Any]]:
    """Each carrying the LTI claim's ids, so the LMS can join them."""
    found = []
    if link.context_key is not None and link.context_id is not None:
        course: dict[str, Any] = {"type": COURSE_TYPE}
        if link.context_title:
            course["name"] = {UNDETERMINED_LANGUAGE: link.context_title}
        # The LTI claims, so that the LMS can join the activities to its own (LTI 1.3, 5.4.1).
        course["extensions"] = {CONTEXT_CLAIM: {"iss": link.issuer, "id": link.context_id}}
        found.append(_activity(f"{tool.origin}/xapi/lti/contexts/{link.context_key}", course))
    resource: dict[str, Any] = {"type": LINK_TYPE}
    if link.resource_link_title:
        resource["name"] = {UNDETERMINED_LANGUAGE: link.resource_link_title}
    resource["extensions"] = {
        RESOURCE_LINK_CLAIM: {"iss": link.issuer, "id": link.resource_link_id}
    }
    found.append(_activity(f"{tool.origin}/xapi/lti/resource-links/{link.link_key}", resource))
    return found


def context(tool: Tool, learner: Learner, texts: _Texts, top_level: bool) -> dict[str, Any]:
    """`top_level`: the object is the lesson itself, which is the parent of all else."""
    activities: dict[str, Any] = {}
    if not top_level:
        lesson = lesson_activity(tool, texts)
        activities["parent"] = [{"objectType": "Activity", "id": lesson["id"]}]
    if learner.link is not None:
        activities["grouping"] = _lti_activities(tool, learner.link)
    found: dict[str, Any] = {"registration": registration(tool, learner)}
    if activities:
        found["contextActivities"] = activities
    link = learner.link
    found["language"] = texts.language
    found["platform"] = (link.platform or link.issuer) if link is not None else TOOL_NAME
    found["extensions"] = {tool.extension("tool-version"): tool.version}
    return found


def statements_of(
    event: Event, learner: Learner, tool: Tool, translated: Lesson, language: str
) -> list[Statement]:
    """In `language` besides English (`translated`: the lesson in it); none for a kind not in
    STATEMENT_KINDS. The same arguments always give the same statements."""
    texts = _Texts(tool.lesson, translated, language)
    who = actor(tool, learner)
    made = []
    for part, (verb, activity, result) in enumerate(_objects_and_results(tool, texts, event)):
        statement: Statement = {
            "id": statement_id(tool, event, part),
            "actor": who,
            "verb": _verb(verb),
            "object": activity,
        }
        if result is not None:
            statement["result"] = result
        top_level = activity["id"] == tool.activity_iri()
        statement["context"] = context(tool, learner, texts, top_level)
        statement["timestamp"] = event.created_at.astimezone(UTC).isoformat()
        statement["version"] = XAPI_VERSION
        made.append(statement)
    return made


def tool_agent(tool: Tool) -> dict[str, Any]:
    """The tool itself as an Agent: who voids a learner's statements on request."""
    return {"objectType": "Agent", "account": {"homePage": tool.origin, "name": TOOL_NAME}}


def voiding(tool: Tool, voided_id: str, timestamp: str) -> Statement:
    """The statement that voids statement `voided_id` (xAPI 1.0.3 Data 2.3.2); its id is
    derived from the voided one's, so voiding twice is one voiding statement."""
    name = f"{tool.origin}/xapi/voiding/{voided_id}"
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "actor": tool_agent(tool),
        "verb": _verb(VOIDED),
        "object": {"objectType": "StatementRef", "id": voided_id},
        "timestamp": timestamp,
        "version": XAPI_VERSION,
    }
