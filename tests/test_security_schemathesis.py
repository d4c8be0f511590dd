"""Schemathesis against an OpenAPI document of the app's routes (tests/openapi_document.py): cases
generated for every operation, valid and invalid, sent in-process; no answer is a server
error (>= 500), every 4xx says in words what went wrong, and every answer conforms to the
document (status, content type, headers, JSON schema).

Schemathesis generates the parameters and bodies; the credentials are set here, from real
learners: most cases carry a learner's cookie and form token (and the host token), so they get
past the CSRF check and reach the actions. The learners are ready for the deeper paths (8.5
done by the dev setting, the opening prediction committed, the four rows predicted and one
played five times, so the hints open), and the write limit is set out of the way. A share of
the cases (CORRUPT) is sent with forged credentials instead (see FORGERIES), and the Accept
header is drawn (JSON or HTML), so both kinds of answer are checked. Hypothesis runs
derandomised, without its example database: the same cases every run. One test per operation,
so xdist spreads them over the workers; each prints its number of cases and their statuses
(pytest -s shows them).
"""

from __future__ import annotations

import html
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import (
    HOST_TOKEN,
    ablation_recording,
    build_settings,
    migrated_sqlite_url,
    write_recording,
)
from lesson_answers import OTHER_WRONG_READING_CHOICE, WRONG_READING_ID
from normdive.lesson.content import load_lesson
from normdive.web.app import ROUTES, create_app
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.security import csrf
from openapi_document import described_operations, openapi_document, route_operations
from page_client import PageClient
from tamper import altered_signature

WRONG_READINGS = (WRONG_READING_ID, OTHER_WRONG_READING_CHOICE.id)
# Every operation the app routes (30), as "METHOD /path".
OPERATIONS = route_operations(ROUTES)
# Cases per operation and mode. Where Hypothesis runs out of distinct cases sooner, fewer are
# sent: GET /healthz and GET /api/state take no parameter and no body (one case each: what
# varies is the credentials, set below), and no query of GET / is invalid (every value is text,
# so no negative cases). Each operation's floor is MIN_CASES; they add up to at least
# TOTAL_CASES.
EXAMPLES = {GenerationMode.POSITIVE: 84, GenerationMode.NEGATIVE: 42}
FLOORS = {
    "GET /healthz": 1,
    "GET /api/state": 1,
    "GET /": 80,
    # The sweep's figures: a text query (no negative cases), refused alike (409) until the gate
    # has closed, which no generated learner reaches.
    "GET /depths": 40,
    "GET /depths/panel": 40,
    # The lab's panel and page take nothing and are refused alike (409) until the gate has
    # closed.
    "GET /lab": 1,
    "GET /lab/panel": 1,
    "GET /lab/rerun/panel": 1,
    # The tool's keys and Canvas's configuration take nothing: one case each.
    "GET /lti/jwks": 1,
    "GET /lti/canvas.json": 1,
    # Without the instructor cookie every case is the same 403; the page takes one query.
    "GET /instructor": 40,
    "GET /instructor/export.csv": 1,
    "GET /instructor/aggregate.json": 1,
    # Without the instructor cookie (or a grant) every case is the same 403.
    "POST /instructor/resend": 40,
    "GET /lti/review/{learner_id}": 40,
}
MIN_CASES = {op: FLOORS.get(op, 120) for op in OPERATIONS}
TOTAL_CASES = 1_000
# The share of cases sent with forged credentials (see FORGERIES).
CORRUPT = 0.15
FORGERIES = (
    "none",  # no cookie, no token, no host token
    "wrong-token",  # the learner's cookie with a made-up token (and host token)
    "other-learner",  # the learner's cookie with another learner's token
    "tampered-cookie",  # the cookie with its signature changed, the learner's token
    "garbage-cookie",  # a cookie of random text, the learner's token
    "foreign-origin",  # everything right, sent from another site
)
# The writes allowed per learner per minute: out of the way of the fuzzing.
NO_LIMIT = 10**9
CHECKS = [
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Something a person reads: at least four words.
WORDS = re.compile(r"[A-Za-z]+(?:\W+[A-Za-z]+){3,}")
# The text of each role="alert" element of a page (up to its first inner tag).
ALERT = re.compile(r'role="alert"[^>]*>([^<]*)<', re.S)


class Learner:
    """A learner at some point of the lesson, with the cookie and token a page would send."""

    def __init__(self, client: TestClient) -> None:
        state = client.get("/api/state").json()
        self.id: str = state["learner_id"]
        self.token: str = state["csrf_token"]
        self.cookie: str = client.cookies[COOKIE_NAME]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Starlette]:
    folder = tmp_path_factory.mktemp("schemathesis")
    yield create_app(
        build_settings(
            migrated_sqlite_url(folder),
            folder,
            recording_path=write_recording(folder, ablation_recording()),
            attempts_per_minute=NO_LIMIT,
        )
    )
    asgi.shutdown_lifespans()  # schemathesis keeps the app started between calls


@pytest.fixture(scope="module")
def schema(app: Starlette) -> schemathesis.BaseSchema:
    loaded = schemathesis.openapi.from_dict(openapi_document(app))
    loaded.app = app  # cases go to the app in-process (ASGI)
    # The cookie, form token and host token are set per case below, from real learners.
    loaded.config.generation.update(with_security_parameters=False)
    return loaded


@pytest.fixture(scope="module")
def make_learners(app: Starlette) -> Iterator[Callable[[], list[Learner]]]:
    """Three learners for one operation: one who has done nothing yet, one who committed
    the opening prediction, one who also predicted every row and has five runs."""
    clients: list[PageClient] = []

    def make() -> list[Learner]:
        fresh, committed, deep = (PageClient(app, follow_redirects=False) for _ in range(3))
        clients.extend((fresh, committed, deep))
        fresh.get("/")
        for client in (committed, deep):
            assert client.post("/predict", data={"choice": "residual"}).status_code == 303
        for key, outcome in (
            ("both", "learns"),
            ("residual_only", "partial"),
            ("layernorm_only", "chance"),
            ("neither", "chance"),
        ):
            assert deep.post(f"/rows/{key}/predict", data={"outcome": outcome}).status_code == 303
        # Enough runs to open both hint rungs: three rows' first plays (one row stays unplayed)
        # and two different wrong readings.
        for key in ("both", "residual_only", "neither"):
            assert deep.post(f"/rows/{key}/play").status_code == 303
        for reading in WRONG_READINGS:
            assert deep.post("/reading", data={"choice": reading}).status_code == 303
        return [Learner(fresh), Learner(committed), Learner(deep)]

    yield make
    for client in clients:
        client.close()


def readable(response: Any) -> str:
    """The message a 4xx gives a person: JSON's `message`, or the page's alerts."""
    if response.headers.get("content-type", [""])[0].startswith("application/json"):
        message = response.json().get("message")
        return message if isinstance(message, str) else ""
    return " ".join(html.unescape(text) for text in ALERT.findall(response.text))


def run_mode(
    operation: schemathesis.APIOperation,
    mode: GenerationMode,
    learners: list[Learner],
    statuses: Counter[int],
    problems: list[str],
) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES[mode],
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def send(case: schemathesis.Case) -> None:
        # Seeded by the case itself: evenly spread, and a failing case replays exactly.
        chance = random.Random(repr((case.path_parameters, case.query, case.body, case.headers)))
        learner, other = chance.sample(learners, 2)
        headers = {
            "Accept": chance.choice(("application/json", "text/html")),
            csrf.HEADER: learner.token,
            "Authorization": f"Bearer {HOST_TOKEN}",
        }
        cookie = learner.cookie
        forgery = chance.choice(FORGERIES) if chance.random() < CORRUPT else None
        if forgery == "none":
            headers = {"Accept": headers["Accept"]}
        elif forgery == "wrong-token":
            headers[csrf.HEADER] = chance.randbytes(32).hex()
        elif forgery == "other-learner":
            headers[csrf.HEADER] = other.token
        elif forgery == "tampered-cookie":
            cookie = altered_signature(cookie)
        elif forgery == "garbage-cookie":
            cookie = "".join(chance.choices(string.printable[:94], k=chance.randrange(60)))
        elif forgery == "foreign-origin":
            headers["Origin"] = "https://evil.example"
        if isinstance(case.body, dict) and "learner_id" in case.body and chance.random() < 0.5:
            case.body = {**case.body, "learner_id": learner.id}  # one the store knows
        cookies = {COOKIE_NAME: cookie} if forgery != "none" else {}
        response = case.call(headers=headers, cookies=cookies)
        statuses[response.status_code] += 1
        where = f"{operation.method.upper()} {operation.path} ({mode.value})"
        if response.status_code >= 500:
            problems.append(f"{where}: {response.status_code} {response.text[:200]}")
        elif response.status_code >= 400 and not WORDS.search(readable(response)):
            problems.append(f"{where}: {response.status_code} has no words: {response.text[:200]}")
        try:
            case.validate_response(response, checks=CHECKS)
        except AssertionError as failure:  # schemathesis raises a subclass with the details
            problems.append(f"{where}: {str(failure)[:400]}")

    try:
        send()
    except Unsatisfiable:
        # Nothing in this operation can be made invalid (every query value of GET / is text).
        assert mode is GenerationMode.NEGATIVE, operation.path


def test_the_floors_add_up_to_the_total() -> None:
    assert len(OPERATIONS) == 30
    assert sum(MIN_CASES.values()) >= TOTAL_CASES


def test_the_document_writes_out_every_route_of_the_app(
    app: Starlette, schema: schemathesis.BaseSchema
) -> None:
    in_document = {
        f"{result.ok().method.upper()} {result.ok().path}" for result in schema.get_all_operations()
    }
    routes = set(route_operations(app.routes))
    assert in_document == set(OPERATIONS) == routes
    assert set(described_operations(load_lesson())) == routes


@pytest.mark.slow
@pytest.mark.parametrize("name", OPERATIONS)
def test_generated_cases(
    name: str, schema: schemathesis.BaseSchema, make_learners: Callable[[], list[Learner]]
) -> None:
    method, path = name.split(" ", 1)
    operation = schema[path][method]
    learners = make_learners()
    statuses: Counter[int] = Counter()
    problems: list[str] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        run_mode(operation, mode, learners, statuses, problems)
    counts = ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()))
    print(f"\nschemathesis {name}: {statuses.total()} cases ({counts})")
    assert problems == []
    assert statuses.total() >= MIN_CASES[name], counts
    assert max(statuses) < 500
