"""What a launch makes of its user: one learner per (issuer, client, deployment, sub); lesson
8.5 as the registration's mode says (the platform gates it, the report it waits for, or the
launch's custom parameter), staff roles passing the lock; and the course as the pool whose
predictions the page shows, the anonymous pool staying its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import Engine, insert, select
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
from normdive.lti.learners import latest_course
from normdive.lti.registrations import PrerequisiteMode
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.store.tables import LtiContextMember, LtiLearner
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.infrastructure.instructor_access import INSTRUCTOR_COOKIE

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


LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
# What Canvas sends a student of this course who teaches another course of the account.
LEARNER_WHO_TEACHES_ELSEWHERE = [
    f"{LIS}membership#Learner",
    f"{LIS}institution/person#Instructor",
    f"{LIS}institution/person#Student",
]
ADMINISTRATOR = [f"{LIS}institution/person#Administrator", f"{LIS}system/person#Administrator"]


def _landing(client: TestClient, key: RSAKey, roles: list[str]) -> str:
    asked = login(client)
    answer = launch(client, signed(launch_claims(asked.nonce, lti_roles=roles), key), asked.state)
    assert answer.status_code == 303, answer.text
    return str(answer.headers["location"])


@pytest.mark.parametrize("roles", [LEARNER_WHO_TEACHES_ELSEWHERE, ADMINISTRATOR])
def test_an_institution_role_makes_nobody_staff_of_this_course(
    make_browser: Callable[[], TestClient],
    engine: Engine,
    jwks: KeySetServer,
    platform_key: RSAKey,
    roles: list[str],
) -> None:
    register_platform(engine, jwks.url)
    classmate = make_browser()
    launched(classmate, platform_key, sub="classmate")
    client = make_browser()
    assert _landing(client, platform_key, roles) == "/"
    assert client.cookies.get(INSTRUCTOR_COOKIE) is None
    assert client.get("/instructor").status_code == 403
    with engine.connect() as connection:
        kept = connection.execute(select(LtiContextMember.course_role)).scalars().all()
    assert sorted(kept) == sorted(
        ["learner", "learner" if roles is LEARNER_WHO_TEACHES_ELSEWHERE else "other"]
    )


@pytest.mark.parametrize(("opted_in", "landing"), [(True, "/instructor"), (False, "/")])
def test_administrators_are_staff_where_the_deployment_opts_in(
    make_settings: SettingsFactory,
    engine: Engine,
    jwks: KeySetServer,
    platform_key: RSAKey,
    opted_in: bool,
    landing: str,
) -> None:
    settings = make_settings(dev_prerequisite_done=False, lti_administrators_are_staff=opted_in)
    register_platform(engine, jwks.url)
    with client_factory(create_app(settings), TestClient, base_url=TOOL_ORIGIN) as make:
        client = make()
        assert _landing(client, platform_key, ADMINISTRATOR) == landing
        assert (client.get("/instructor").status_code == 200) is opted_in
