"""Submission Review 1.0 (LtiSubmissionReviewRequest) against the tool over HTTP, with real
keys: a staff member's request with for_user opens that learner's D9 as they left it,
read-only, through a review grant (nobody is signed in as the learner); a learner's request
about another user is refused readably; each way a grant can be misused is refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from bs4 import BeautifulSoup
from joserfc.jwk import RSAKey
from pydantic import SecretStr
from sqlalchemy import Engine, insert, select
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SettingsFactory
from lesson_answers import RIGHT_READING_ID
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    INSTRUCTOR_ROLE,
    ISSUER,
    LEARNER_ROLE,
    KeySetServer,
    browser,
    launch,
    launch_claims,
    login,
    register_platform,
    signed,
)
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lesson.translations import localized
from normdive.lti import submission_review
from normdive.lti.learners import latest_course, member_key
from normdive.lti.submission_review import Review, grant_token
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LtiRegistration, LtiRosterMember, LtiRosterService
from normdive.web.infrastructure.identity import COOKIE_NAME
from tamper import altered_signature

LESSON = load_lesson()
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
REVIEW = "LtiSubmissionReviewRequest"
LINEITEM = "https://platform.example.edu/lineitems/d9"


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def platform(engine: Engine, jwks: KeySetServer) -> None:
    register_platform(engine, jwks.url)


@pytest.fixture
def clients(app: Starlette, platform: None) -> Iterator[list[TestClient]]:
    opened: list[TestClient] = []
    yield opened
    for client in opened:
        client.__exit__(None, None, None)


def _send(
    app: Starlette, clients: list[TestClient], key: RSAKey, **claims: Any
) -> tuple[TestClient, Any]:
    client = browser(app).__enter__()
    clients.append(client)
    asked = login(client)
    token = signed(launch_claims(asked.nonce, **claims), key)
    return client, launch(client, token, asked.state)


def _learner(app: Starlette, clients: list[TestClient], key: RSAKey, sub: str) -> str:
    client, answer = _send(app, clients, key, sub=sub)
    assert answer.status_code == 303, answer.text
    return str(client.cookies.get(COOKIE_NAME)).split(".")[0]


def _review(
    app: Starlette,
    clients: list[TestClient],
    key: RSAKey,
    *,
    sub: str = "teacher",
    staff: bool = True,
    for_user: dict[str, Any] | None = None,
    **claims: Any,
) -> tuple[TestClient, Any]:
    claims.setdefault("lti_message_type", REVIEW)
    claims.setdefault("lti_for_user", for_user or {"user_id": "ada", "name": "Ada Lovelace"})
    claims.setdefault(AGS_CLAIM, {"scope": [], "lineitem": LINEITEM})
    if staff:
        claims.setdefault("lti_roles", [INSTRUCTOR_ROLE])
    return _send(app, clients, key, sub=sub, **claims)


def _work(store: Store, learner: str) -> None:
    """Ada's D9 as she leaves it: a prediction, a wrong then a right reading, two rows
    predicted, one played, a takeaway."""
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": LESSON.predict.choices[0].id})
    wrong = next(c.id for c in LESSON.reading.choices if not c.correct)
    store.append(learner, EventKind.READING_LOCKED, {"choice": wrong, "right": False})
    store.append(learner, EventKind.READING_LOCKED, {"choice": RIGHT_READING_ID, "right": True})
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "neither", "outcome": "chance"})
    store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "Residuals carry the copy."})


def _grant_cookie(answer: Any) -> str:
    """The Set-Cookie header that carries the review grant."""
    [cookie] = [
        header
        for header in answer.headers.get_list("set-cookie")
        if header.startswith(f"{submission_review.REVIEW_COOKIE}=")
    ]
    return str(cookie)


def _granted_token(answer: Any) -> str:
    return _grant_cookie(answer).split(";", 1)[0].split("=", 1)[1]


def _text(node: Any) -> str:
    return " ".join(node.get_text().split())


def _alert(response: Any) -> str:
    """The refusal page's message, as read."""
    return _text(BeautifulSoup(response.text, "html.parser").find(role="alert"))


def test_a_staff_request_opens_that_learners_d9_read_only(
    app: Starlette, clients: list[TestClient], platform_key: RSAKey, store: Store
) -> None:
    ada = _learner(app, clients, platform_key, "ada")
    bob = _learner(app, clients, platform_key, "bob")
    _work(store, ada)
    store.append(bob, EventKind.TAKEAWAY_SAVED, {"text": "Bob's own line."})
    teacher, answer = _review(app, clients, platform_key)
    assert answer.status_code == 303, answer.text
    # The grant is in a cookie scoped to Ada's review page, never in an address.
    location = answer.headers["location"]
    assert location == f"{submission_review.REVIEW_PATH}/{ada}"
    granted = _grant_cookie(answer)
    assert f"Path={location};" in granted and "HttpOnly" in granted and "Partitioned" in granted
    # The reviewer is not signed in as the learner, nor as anyone.
    assert teacher.cookies.get(COOKIE_NAME) is None
    page = teacher.get(location)
    assert page.status_code == 200, page.text
    assert page.headers["cache-control"] == "no-store"
    soup = BeautifulSoup(page.text, "html.parser")
    # No link the page draws (its languages among them) carries the grant.
    token = _granted_token(answer)
    assert token not in page.text and "grant=" not in page.text
    assert _text(soup.find(id="review-banner")).startswith("Viewing Ada Lovelace as they left it.")
    main = soup.find("main")
    assert main is not None
    text = _text(main)
    assert LESSON.predict.choices[0].label in text
    right = next(c.label for c in LESSON.reading.choices if c.correct)
    assert f"Locked 2 times; the latest: {right} (right)." in text
    rows_table = soup.find("caption", id="review-rows-caption").find_parent("table")
    rows = {
        _text(tr.find("th")): [_text(td) for td in tr.find_all("td")]
        for tr in rows_table.find("tbody").find_all("tr")
    }
    labels = {row.key: row.label for row in LESSON.rows}
    outcomes = {outcome.id: outcome.label for outcome in LESSON.outcomes}
    assert rows[labels["both"]] == [outcomes["learns"], "1"]
    assert rows[labels["neither"]] == [outcomes["chance"], "0"]
    assert "Residuals carry the copy." in text
    assert "Bob's own line." not in page.text
    timeline = [_text(li) for li in soup.find("ol", class_="review-timeline").find_all("li")]
    assert len(timeline) == 8  # the launch recorded 8.5, then her seven
    assert timeline[-1].endswith("Saved the takeaway")
    assert any(f"Played the row {labels['both']}" in entry for entry in timeline)
    # Read-only: no form and no control at all.
    assert soup.find_all(["form", "input", "button", "textarea", "select"]) == []


def test_a_learner_may_review_only_their_own_work(
    app: Starlette, clients: list[TestClient], platform_key: RSAKey, store: Store
) -> None:
    ada = _learner(app, clients, platform_key, "ada")
    _learner(app, clients, platform_key, "eve")
    _, answer = _review(app, clients, platform_key, sub="eve", staff=False)
    assert answer.status_code == 403
    soup = BeautifulSoup(answer.text, "html.parser")
    assert _text(soup.find(role="alert")).startswith(
        "This submission review asks to show another user's work, but the user who opened it "
        "is not staff of the course"
    )
    assert "review_not_allowed" in answer.text
    # Her own: allowed, through a grant for her alone.
    client, answer = _review(app, clients, platform_key, sub="ada", staff=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{submission_review.REVIEW_PATH}/{ada}"
    own = client.get(answer.headers["location"])
    assert own.status_code == 200
    banner = BeautifulSoup(own.text, "html.parser").find(id="review-banner")
    assert _text(banner).startswith("Your work as you left it.")


def test_an_unknown_user_gets_a_readable_page(
    app: Starlette, clients: list[TestClient], platform_key: RSAKey
) -> None:
    _learner(app, clients, platform_key, "ada")
    _, answer = _review(app, clients, platform_key, for_user={"user_id": "nobody"})
    assert answer.status_code == 200
    soup = BeautifulSoup(answer.text, "html.parser")
    assert _text(soup.find("main")) == (
        "nobody has not opened D9 from this course yet, so there is no work to show."
    )
    # A learner of another course is no learner of this one.
    _, answer = _review(
        app, clients, platform_key, lti_context={"id": "course-2", "title": "Another"}
    )
    assert answer.status_code == 200
    assert "has not opened D9 from this course yet" in answer.text


@pytest.mark.parametrize(
    ("claims", "words"),
    [
        ({"lti_for_user": {"name": "No id"}}, "names no user whose work is reviewed"),
        ({AGS_CLAIM: {"scope": []}}, "names no line item under review"),
        ({"lti_resource_link": None}, "names no resource link"),
    ],
)
def test_a_review_request_without_what_the_spec_requires_is_refused(
    app: Starlette,
    clients: list[TestClient],
    platform_key: RSAKey,
    claims: dict[str, Any],
    words: str,
) -> None:
    _learner(app, clients, platform_key, "ada")
    _, answer = _review(app, clients, platform_key, **claims)
    assert answer.status_code == 401
    assert words in _alert(answer)
    assert "missing_claim" in answer.text


def test_a_grant_opens_only_its_learner_and_only_while_it_holds(
    app: Starlette,
    clients: list[TestClient],
    platform_key: RSAKey,
    settings: Settings,
    store: Store,
) -> None:
    ada = _learner(app, clients, platform_key, "ada")
    bob = _learner(app, clients, platform_key, "bob")
    teacher, answer = _review(app, clients, platform_key)
    token = _granted_token(answer)
    assert teacher.get(f"{submission_review.REVIEW_PATH}/{ada}").status_code == 200
    # A grant in a link's query is exchanged for the cookie, and the address cleaned.
    stranger = browser(app).__enter__()
    clients.append(stranger)
    linked = stranger.get(f"{submission_review.REVIEW_PATH}/{ada}?grant={token}")
    assert linked.status_code == 303
    assert linked.headers["location"] == f"{submission_review.REVIEW_PATH}/{ada}"
    assert _granted_token(linked) == token
    assert stranger.get(linked.headers["location"]).status_code == 200
    for client, url in (
        (teacher, f"{submission_review.REVIEW_PATH}/{bob}?grant={token}"),  # another learner
        (teacher, f"{submission_review.REVIEW_PATH}/{bob}"),  # Ada's cookie is not Bob's
        (browser(app).__enter__(), f"{submission_review.REVIEW_PATH}/{ada}"),  # no grant
        (teacher, f"{submission_review.REVIEW_PATH}/{ada}?grant={altered_signature(token)}"),
    ):
        clients.append(client)
        refused = client.get(url)
        assert refused.status_code == 403, url
        assert "Open the review again from the platform's gradebook" in _alert(refused)
    review = Review(learner_id=ada, context_key=None, reviewer="r", label="Ada", own=False)
    lapsed = grant_token(
        review,
        settings.secret_key,
        now=time.time() - submission_review.REVIEW_GRANT_TTL_S - 1,
    )
    refused = teacher.get(f"{submission_review.REVIEW_PATH}/{ada}?grant={lapsed}")
    assert refused.status_code == 403
    assert "it has expired" in _alert(refused)
    heading = BeautifulSoup(refused.text, "html.parser").find("h1")
    assert heading is not None and heading.get_text() == "This review cannot be opened"
    # Another server's secret signs nothing here.
    other = grant_token(review, SecretStr("x" * 64))
    assert teacher.get(f"{submission_review.REVIEW_PATH}/{ada}?grant={other}").status_code == 403


def test_the_review_writes_nothing(
    app: Starlette, clients: list[TestClient], platform_key: RSAKey, store: Store
) -> None:
    ada = _learner(app, clients, platform_key, "ada")
    _work(store, ada)
    before = len(store.events_for(ada))
    teacher, answer = _review(app, clients, platform_key)
    location = answer.headers["location"]
    token = _granted_token(answer)
    assert teacher.post(location, data={"grant": token}).status_code == 405
    for path in ("/takeaway", "/predict", "/reading", "/rows/both/play"):
        refused = teacher.post(
            f"{path}?grant={token}",
            data={"grant": token, "text": "overwritten", "choice": "x"},
            headers={"Origin": "https://tool.test"},
        )
        assert refused.status_code == 403, path
    assert len(store.events_for(ada)) == before
    assert teacher.cookies.get(COOKIE_NAME) is None


def test_every_kind_of_event_is_said_in_words() -> None:
    from datetime import UTC, datetime

    from normdive.progress.events import Event

    said = submission_review.timeline(
        [
            Event(id=n, learner_id="l", kind=kind, payload={}, created_at=datetime.now(UTC))
            for n, kind in enumerate(EventKind)
        ],
        LESSON,
    )
    assert [entry.kind for entry in said] == list(EventKind)
    assert all(entry.text for entry in said)


@pytest.mark.parametrize(
    ("language", "banner", "locked", "played", "saved"),
    [
        (
            "de",
            "Ansicht von Ada Lovelace, so wie es hinterlassen wurde.",
            "2-mal festgelegt; zuletzt:",
            "Die Zeile {row} abgespielt",
            "Die Erkenntnis gespeichert",
        ),
        (
            "ar",
            "عرض عمل Ada Lovelace كما تركه.",
            "ثُبّت مرتين؛ الأخير:",
            "شغّل الصف {row}",
            "حفظ الخلاصة",
        ),
    ],
)
def test_the_review_and_its_timeline_speak_the_reviewers_language(
    app: Starlette,
    clients: list[TestClient],
    platform_key: RSAKey,
    store: Store,
    language: str,
    banner: str,
    locked: str,
    played: str,
    saved: str,
) -> None:
    ada = _learner(app, clients, platform_key, "ada")
    _work(store, ada)
    teacher, answer = _review(app, clients, platform_key)
    page = teacher.get(answer.headers["location"], headers={"Accept-Language": language})
    assert page.status_code == 200, page.text
    soup = BeautifulSoup(page.text, "html.parser")
    assert soup.find("html")["lang"] == language  # type: ignore[index]
    assert _text(soup.find(id="review-banner")).startswith(banner)
    text = _text(soup.find("main"))
    translated = localized(LESSON, language)
    assert translated.predict.choices[0].label in text
    assert locked in text and "Locked" not in text
    timeline = [_text(li) for li in soup.find("ol", class_="review-timeline").find_all("li")]
    assert timeline[-1].endswith(saved)
    both = translated.row("both")
    assert both is not None
    assert any(played.format(row=both.label) in entry for entry in timeline)


def test_a_learner_who_teaches_elsewhere_cannot_review_a_classmate(
    app: Starlette, clients: list[TestClient], platform_key: RSAKey
) -> None:
    _learner(app, clients, platform_key, "ada")
    lis = "http://purl.imsglobal.org/vocab/lis/v2/"
    roles = [
        f"{lis}membership#Learner",
        f"{lis}institution/person#Instructor",
        f"{lis}institution/person#Student",
    ]
    _, answer = _review(app, clients, platform_key, sub="eve", staff=False, lti_roles=roles)
    assert answer.status_code == 403
    assert "review_not_allowed" in answer.text
    assert submission_review.REVIEW_COOKIE not in answer.headers.get("set-cookie", "")


def test_a_review_names_the_learner_when_the_request_does_not(
    app: Starlette, clients: list[TestClient], platform_key: RSAKey, engine: Engine
) -> None:
    # Ada's launch named her; the platform's review request (as Moodle's) names only her id.
    ada = _learner(app, clients, platform_key, "ada")
    teacher, answer = _review(app, clients, platform_key, for_user={"user_id": "ada"})
    page = teacher.get(answer.headers["location"])
    banner = BeautifulSoup(page.text, "html.parser").find(id="review-banner")
    assert _text(banner).startswith("Viewing Ada Learner as they left it.")
    # The course's roster, where it names her, names her first.
    course = latest_course(engine, ada)
    assert course is not None
    with engine.begin() as connection:
        registration = connection.execute(select(LtiRegistration.id)).scalar_one()
        connection.execute(
            insert(LtiRosterService).values(
                context_key=course,
                registration_id=registration,
                deployment_id=DEPLOYMENT_ID,
                memberships_url="https://platform.example.edu/memberships",
            )
        )
        connection.execute(
            insert(LtiRosterMember).values(
                context_key=course,
                link_key=member_key(ISSUER, CLIENT_ID, DEPLOYMENT_ID, "ada"),
                status="Active",
                roles=LEARNER_ROLE,
                name="Ada Lovelace",
            )
        )
    teacher, answer = _review(app, clients, platform_key, for_user={"user_id": "ada"})
    page = teacher.get(answer.headers["location"])
    banner = BeautifulSoup(page.text, "html.parser").find(id="review-banner")
    assert _text(banner).startswith("Viewing Ada Lovelace as they left it.")
    # Someone the course's roster names who never opened D9.
    with engine.begin() as connection:
        connection.execute(
            insert(LtiRosterMember).values(
                context_key=course,
                link_key=member_key(ISSUER, CLIENT_ID, DEPLOYMENT_ID, "sam"),
                status="Active",
                roles=LEARNER_ROLE,
                name="Sam Student",
            )
        )
    _, answer = _review(app, clients, platform_key, for_user={"user_id": "sam"})
    assert answer.status_code == 200
    assert "Sam Student has not opened D9 from this course yet" in _text(
        BeautifulSoup(answer.text, "html.parser").find("main")
    )
