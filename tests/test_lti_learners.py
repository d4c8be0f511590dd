"""What a launch makes of its user: one learner per (issuer, client, deployment, sub); lesson
8.5 as the registration's mode says (the platform gates it, the report it waits for, or the
launch's custom parameter), staff roles passing the lock; and the course as the pool whose
predictions the page shows, the anonymous pool staying its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, insert
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import HOST_TOKEN, SettingsFactory, client_factory
from lti_platform import (
    INSTRUCTOR_ROLE,
    TOOL_ORIGIN,
    KeySetServer,
    launch,
    launch_claims,
    login,
    register_platform,
    signed,
)
from normdive.config import Settings
from normdive.lti.learners import is_staff, latest_course
from normdive.lti.registrations import PrerequisiteMode
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LtiContextMember, LtiLearner
from normdive.web.infrastructure.identity import COOKIE_NAME

LOCKED = 'id="locked-title"'


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def make_browser(app: Starlette) -> Iterator[Callable[[], TestClient]]:
    """Browsers on the tool's https origin (lti_platform.browser), each a learner of its own."""
    with client_factory(app, TestClient, base_url=TOOL_ORIGIN) as make:
        yield make


def launched(client: TestClient, key: RSAKey, **claims: object) -> str:
    """Log in and launch with these claims; the learner id the browser is signed in as."""
    asked = login(client)
    response = launch(client, signed(launch_claims(asked.nonce, **claims), key), asked.state)
    assert response.status_code == 303, response.text
    cookie = client.cookies.get(COOKIE_NAME)
    assert cookie is not None
    return cookie.split(".")[0]


def prerequisite_sources(store: Store, learner_id: str) -> list[str]:
    return [
        event.payload["source"]
        for event in store.events_for(learner_id)
        if event.kind is EventKind.PREREQUISITE_DONE
    ]


def test_platform_mode_trusts_the_launch(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    store: Store,
    jwks: KeySetServer,
    platform_key: RSAKey,
) -> None:
    register_platform(engine, jwks.url, mode=PrerequisiteMode.PLATFORM)
    client = make_browser()
    learner = launched(client, platform_key)
    assert LOCKED not in client.get("/").text
    # Recorded once, however often the learner launches.
    launched(client, platform_key)
    assert prerequisite_sources(store, learner) == ["lti_platform"]


def test_report_mode_waits_for_the_report(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    jwks: KeySetServer,
    platform_key: RSAKey,
) -> None:
    register_platform(engine, jwks.url, mode=PrerequisiteMode.REPORT)
    client = make_browser()
    learner = launched(client, platform_key)
    assert LOCKED in client.get("/").text
    report = client.post(
        "/api/prerequisite",
        json={"learner_id": learner},
        headers={"Authorization": f"Bearer {HOST_TOKEN}"},
    )
    assert report.status_code == 200, report.text
    assert LOCKED not in client.get("/").text


@pytest.mark.parametrize(("said", "opens"), [("true", True), ("false", False), (None, False)])
def test_custom_mode_takes_the_launch_parameter(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    jwks: KeySetServer,
    platform_key: RSAKey,
    said: str | None,
    opens: bool,
) -> None:
    register_platform(engine, jwks.url, mode=PrerequisiteMode.CUSTOM)
    client = make_browser()
    custom = {"lesson_8_5_done": said} if said is not None else {}
    launched(client, platform_key, lti_custom=custom)
    assert (LOCKED not in client.get("/").text) is opens


STAFF = [
    INSTRUCTOR_ROLE,
    "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
    "http://purl.imsglobal.org/vocab/lis/v2/membership#ContentDeveloper",
    "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator",
    "Instructor",
]


@pytest.mark.parametrize("role", STAFF)
def test_staff_pass_the_lock_whatever_the_mode(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    store: Store,
    jwks: KeySetServer,
    platform_key: RSAKey,
    role: str,
) -> None:
    register_platform(engine, jwks.url, mode=PrerequisiteMode.REPORT)
    client = make_browser()
    learner = launched(client, platform_key, lti_roles=[role])
    assert LOCKED not in client.get("/").text
    assert prerequisite_sources(store, learner) == ["lti_staff"]


@pytest.mark.parametrize(
    ("roles", "staff"),
    [
        (STAFF[:1], True),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], False),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"], False),
        (["https://example.com/roles#Instructor"], False),  # another vocabulary
        # Made up, though they end in a staff name.
        (["x#Instructor"], False),
        (["#Instructor"], False),
        (["http://purl.imsglobal.org/vocab/lis/v2/evil#Administrator"], False),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership/Learner#Instructor"], False),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#"], False),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Student"], False),
        (["Learner", "http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator"], True),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership/Administrator#Support"], True),
        ([], False),
    ],
)
def test_who_counts_as_staff(roles: list[str], staff: bool) -> None:
    assert is_staff(tuple(roles)) is staff


def test_each_deployment_and_subject_is_its_own_learner(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    jwks: KeySetServer,
    platform_key: RSAKey,
) -> None:
    register_platform(engine, jwks.url)
    ada = launched(make_browser(), platform_key, sub="ada")
    grace = launched(make_browser(), platform_key, sub="grace")
    assert ada != grace
    assert launched(make_browser(), platform_key, sub="ada") == ada


def test_the_latest_course_is_the_learners_pool(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    jwks: KeySetServer,
    platform_key: RSAKey,
) -> None:
    register_platform(engine, jwks.url)
    client = make_browser()
    learner = launched(client, platform_key, lti_context={"id": "course-a"})
    first = latest_course(engine, learner)
    assert first is not None
    launched(client, platform_key, lti_context={"id": "course-b"})
    second = latest_course(engine, learner)
    assert second not in (None, first)
    launched(client, platform_key, lti_context={"id": "course-a"})
    assert latest_course(engine, learner) == first
    assert latest_course(engine, "0" * 32) is None


def _predicting(
    store: Store, choice: str, course: str | None = None, engine: Engine | None = None
) -> str:
    """A learner who committed `choice`; launched into `course` first when one is given, as an
    LMS's learner is (the launch stores them before anything they do)."""
    learner = store.create_learner()
    if course is not None and engine is not None:
        _in_course(engine, learner, course)
    store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": choice})
    return learner


def _in_course(engine: Engine, learner: str, course: str) -> None:
    with engine.begin() as connection:
        connection.execute(insert(LtiLearner).values(link_key=learner * 2, learner_id=learner))
        connection.execute(
            insert(LtiContextMember).values(
                context_key=course, learner_id=learner, last_launch_at=datetime.now(UTC)
            )
        )


@pytest.mark.both_databases
def test_a_course_counts_its_own_learners_and_the_anonymous_pool_its_own(
    store: Store, engine: Engine
) -> None:
    course_a, course_b = "a" * 64, "b" * 64
    for _ in range(3):
        _predicting(store, "residual")
    for _ in range(2):
        _predicting(store, "layer_norm", course_a, engine)
    _predicting(store, "neither", course_b, engine)
    anonymous = store.prediction_counts()
    assert anonymous.committed == 3
    assert dict(anonymous.opening) == {"residual": 3}
    in_a = store.prediction_counts(course_a)
    assert in_a.committed == 2
    assert dict(in_a.opening) == {"layer_norm": 2}
    assert dict(store.prediction_counts(course_b).opening) == {"neither": 1}
    assert store.prediction_counts("c" * 64).committed == 0


def test_the_page_shows_a_launched_learner_their_courses_predictions(
    app: Starlette, store: Store, engine: Engine
) -> None:
    services = app.state.services
    anonymous = [_predicting(store, "layer_norm") for _ in range(5)]
    in_course = _predicting(store, "residual", "a" * 64, engine)
    status = services.recording()

    def opening_total(learner: str) -> int:
        view = services.page_view(learner, services.state_of(learner, status), status)
        assert view.aggregate is not None
        return int(view.aggregate.opening.total)

    assert opening_total(anonymous[0]) == 5
    # One learner in the course: below the minimum, so hidden (0), whatever the others did.
    assert opening_total(in_course) == 0
    for _ in range(4):
        _predicting(store, "residual", "a" * 64, engine)
    assert opening_total(in_course) == 5
    assert opening_total(anonymous[0]) == 5
