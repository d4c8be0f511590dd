"""Cross-site request forgery (web.security.csrf): every form post needs the learner's form
token and must not come from another origin; a refusal is a readable 403 and writes nothing.
These tests use plain TestClients (no token added for them) and set every header by hand.

Every form route is tried without the token and from another site; each way a request can
come from another origin (or from the page itself) is tried on one route through the app;
and the origin check itself has its own table (`test_foreign_origin`). One app serves the
module: each test's learners are new ones, with cookie jars of their own."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.testclient import TestClient

from helpers import (
    HOST_TOKEN,
    SECRET_KEY,
    SettingsFactory,
    ablation_recording,
    build_settings,
    client_factory,
    migrated_sqlite_url,
    write_recording,
)
from normdive.web.app import create_app
from normdive.web.infrastructure.identity import COOKIE_NAME
from normdive.web.security import csrf
from normdive.web.security.proxy import PEER_TRUSTED

JSON = {"Accept": "application/json"}
SITE = "http://testserver"  # the TestClient's own origin
EVIL = "https://evil.example"
# Every form post of the page, with a body that would succeed for a learner who committed.
FORM_POSTS = [
    ("/predict", {"choice": "residual"}),
    ("/numbers", {"row1_mean": "2"}),
    ("/reading", {"choice": "keeps_finite"}),
    ("/takeaway", {"text": "Mine."}),
    ("/rows/both/predict", {"outcome": "learns"}),
    ("/rows/both/play", {}),
    ("/hints/1", {}),
]
PATHS = [path for path, _ in FORM_POSTS]
# How a refusal for another origin begins ("This request came from another site"), up to the
# origin it names.
FOREIGN_ORIGIN_WORDS = csrf.FOREIGN_ORIGIN.partition(" ({origin})")[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the module's database and recording."""
    return tmp_path_factory.mktemp("csrf")


@pytest.fixture(scope="module")
def database(folder: Path) -> str:
    return migrated_sqlite_url(folder)


@pytest.fixture(scope="module")
def app(folder: Path, database: str) -> Starlette:
    """With a recording, so the ablation's routes are real too."""
    recording = write_recording(folder, ablation_recording())
    return create_app(build_settings(database, folder, recording_path=recording))


@pytest.fixture
def make_browser(app: Starlette) -> Iterator[Callable[[], TestClient]]:
    """Learners as bare clients: nothing adds a token for them."""
    with client_factory(app, TestClient) as make:
        yield make


def open_lesson(client: TestClient) -> str:
    """Open the page as a learner does; returns the form token it carries."""
    soup = BeautifulSoup(client.get("/").text, "html.parser")
    meta = soup.select_one('meta[name="csrf-token"]')
    assert meta is not None
    return str(meta["content"])


def state(client: TestClient) -> dict[str, object]:
    data = client.get("/api/state").json()["state"]
    assert isinstance(data, dict)
    return data


def events_of(client: TestClient) -> tuple[object, ...]:
    """What the learner's events have produced so far (all of it derives from them)."""
    current = state(client)
    return tuple(sorted((key, repr(value)) for key, value in current.items()))


# --- the token -------------------------------------------------------------------------------


def test_the_token_is_an_hmac_of_the_learner_id_under_the_secret_key() -> None:
    key = SecretStr(SECRET_KEY)
    token = csrf.form_token(key, "ab" * 16)
    assert re.fullmatch(r"[0-9a-f]{64}", token)
    assert csrf.form_token(key, "ab" * 16) == token  # stateless: any worker computes it
    assert csrf.form_token(key, "cd" * 16) != token
    assert csrf.form_token(SecretStr("another-secret-key-" + "x" * 32), "ab" * 16) != token


def test_the_page_every_form_and_the_state_carry_the_same_token(
    make_browser: Callable[[], TestClient],
) -> None:
    learner = make_browser()
    learner.post("/predict", data={"choice": "residual", "csrf_token": open_lesson(learner)})
    soup = BeautifulSoup(learner.get("/").text, "html.parser")
    meta = soup.select_one('meta[name="csrf-token"]')
    assert meta is not None
    token = str(meta["content"])
    forms = soup.select("form[method=post]")
    assert len(forms) >= 6
    for form in forms:
        field = form.select_one('input[type=hidden][name="csrf_token"]')
        assert field is not None and field["value"] == token, form.get("action")
    assert learner.get("/api/state").json()["csrf_token"] == token
    # Another learner has another token.
    assert open_lesson(make_browser()) != token


def test_json_answers_to_a_form_carry_the_token_in_the_swapped_regions(
    make_browser: Callable[[], TestClient],
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    answer = learner.post(
        "/predict", data={"choice": "residual", "csrf_token": token}, headers=JSON
    )
    assert answer.status_code == 200
    numbers = answer.json()["fragments"]["numbers"]
    assert f'name="csrf_token" value="{token}"' in numbers


@pytest.mark.parametrize("how", ["field", "header"])
def test_the_token_as_a_form_field_or_as_a_header_is_accepted(
    make_browser: Callable[[], TestClient], how: str
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    data = {"choice": "residual", **({"csrf_token": token} if how == "field" else {})}
    headers = {csrf.HEADER: token} if how == "header" else {}
    response = learner.post("/predict", data=data, headers={"Origin": SITE, **headers})
    assert response.status_code == 303
    assert state(learner)["prediction"] == "residual"


def assert_refused(
    learner: TestClient, path: str, data: dict[str, str], headers: dict[str, str], message: str
) -> str:
    """403 twice, as a page for a browser and as JSON for the page script, both saying
    `message` (what the JSON says in full is returned)."""
    page = learner.post(path, data=data, headers=headers)
    assert page.status_code == 403
    assert page.headers["content-type"].startswith("text/html")
    assert message in BeautifulSoup(page.text, "html.parser").get_text(" ")
    answer = learner.post(path, data=data, headers={**headers, **JSON})
    assert answer.status_code == 403
    assert answer.json()["ok"] is False
    assert answer.json()["message"].startswith(message)
    return str(answer.json()["message"])


@pytest.mark.parametrize("path", PATHS)
def test_every_form_refuses_a_post_without_the_token_or_from_another_site(
    make_browser: Callable[[], TestClient], path: str
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    learner.post("/predict", data={"choice": "layer_norm", "csrf_token": token})
    before = events_of(learner)
    data = dict(FORM_POSTS)[path]
    assert assert_refused(learner, path, data, {}, csrf.MISSING_TOKEN) == csrf.MISSING_TOKEN
    assert_refused(
        learner, path, {**data, "csrf_token": token}, {"Origin": EVIL}, FOREIGN_ORIGIN_WORDS
    )
    assert events_of(learner) == before


@pytest.mark.parametrize(
    "wrong",
    [
        "0" * 64,
        "not a token",
        "ünïcödé",
        "",  # an empty field says nothing: the header below is the one that is wrong
    ],
)
def test_a_wrong_token_is_refused(make_browser: Callable[[], TestClient], wrong: str) -> None:
    learner = make_browser()
    open_lesson(learner)
    response = learner.post(
        "/predict",
        data={"choice": "residual", "csrf_token": wrong},
        headers={**JSON, csrf.HEADER: "f" * 64},
    )
    assert response.status_code == 403
    assert response.json()["message"] == csrf.WRONG_TOKEN
    assert state(learner)["prediction"] is None


def test_a_right_token_in_either_place_is_enough(make_browser: Callable[[], TestClient]) -> None:
    """The page sends both; one stale copy (a region swapped in later) does not matter."""
    learner = make_browser()
    token = open_lesson(learner)
    response = learner.post(
        "/predict",
        data={"choice": "residual", "csrf_token": "stale"},
        headers={**JSON, csrf.HEADER: token},
    )
    assert response.status_code == 200


def test_a_post_without_a_learner_cookie_is_refused_and_creates_no_learner(
    make_browser: Callable[[], TestClient],
) -> None:
    stranger = make_browser()
    response = stranger.post("/predict", data={"choice": "residual"}, headers=JSON)
    assert response.status_code == 403
    assert response.json()["message"] == csrf.NO_LEARNER
    assert "set-cookie" not in response.headers
    assert COOKIE_NAME not in stranger.cookies


def test_the_token_of_another_learner_is_refused(make_browser: Callable[[], TestClient]) -> None:
    alice, mallory = make_browser(), make_browser()
    open_lesson(alice)
    mallory_token = open_lesson(mallory)
    response = alice.post(
        "/predict", data={"choice": "residual", "csrf_token": mallory_token}, headers=JSON
    )
    assert response.status_code == 403
    assert response.json()["message"] == csrf.WRONG_TOKEN
    assert state(alice)["prediction"] is None and state(mallory)["prediction"] is None


# --- the origin ------------------------------------------------------------------------------


# Each way a post can come from another site, on a route of its own (every route is tried
# from another site above).
FOREIGN = [
    ("origin", "/numbers", {"Origin": EVIL}),
    ("null", "/reading", {"Origin": "null"}),
    ("suffix", "/takeaway", {"Origin": "http://testserver.evil.example"}),
    ("port", "/rows/both/predict", {"Origin": "http://testserver:8080"}),
    ("referer", "/rows/both/play", {"Referer": f"{EVIL}/lesson"}),
    # The Origin decides when there is one.
    ("origin-over-referer", "/hints/1", {"Origin": EVIL, "Referer": f"{SITE}/"}),
]


@pytest.mark.parametrize(
    ("path", "headers"), [case[1:] for case in FOREIGN], ids=[case[0] for case in FOREIGN]
)
def test_a_post_from_another_origin_is_refused_even_with_the_token(
    make_browser: Callable[[], TestClient], path: str, headers: dict[str, str]
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    learner.post("/predict", data={"choice": "layer_norm", "csrf_token": token})
    before = events_of(learner)
    data = {**dict(FORM_POSTS)[path], "csrf_token": token}
    message = assert_refused(learner, path, data, headers, FOREIGN_ORIGIN_WORDS)
    assert "nothing was saved" in message
    assert events_of(learner) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": SITE},
        {"Origin": "HTTP://TESTSERVER"},
        {"Origin": "https://testserver"},  # TLS ended by a proxy in front of the server
        {"Referer": f"{SITE}/?eps=off#numbers"},
        {},
    ],
    ids=["origin", "case", "https", "referer", "neither"],
)
def test_a_post_from_the_page_itself_is_accepted(
    make_browser: Callable[[], TestClient], headers: dict[str, str]
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    response = learner.post(
        "/predict", data={"choice": "residual", "csrf_token": token}, headers=headers
    )
    assert response.status_code == 303


def _request(headers: dict[str, str], *, trusted_peer: bool = False) -> Request:
    """A request as web.security.proxy hands it on: from a trusted proxy, or from anyone."""
    raw = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]
    scope = {"type": "http", "method": "POST", "path": "/predict", "headers": raw}
    return Request({**scope, PEER_TRUSTED: trusted_peer})


@pytest.mark.parametrize(
    ("headers", "foreign"),
    [
        ({"host": "lesson.example:8000", "origin": "http://lesson.example:8000"}, None),
        ({"host": "lesson.example", "origin": "https://lesson.example"}, None),
        (
            {"host": "lesson.example", "origin": "https://lesson.example.evil"},
            "https://lesson.example.evil",
        ),
        ({"host": "lesson.example", "origin": "null"}, "null"),
        ({"host": "lesson.example", "origin": "ftp://lesson.example"}, "ftp://lesson.example"),
        ({"host": "lesson.example", "origin": "http://[::1"}, "http://[::1"),
        ({"host": "lesson.example", "referer": "https://lesson.example/x"}, None),
        ({"host": "lesson.example", "referer": "https://evil/x"}, "https://evil/x"),
        ({"host": "lesson.example", "referer": "garbage"}, "garbage"),
        ({"host": "lesson.example"}, None),
        ({"origin": "https://lesson.example"}, "https://lesson.example"),  # no Host to match
    ],
)
def test_foreign_origin(headers: dict[str, str], foreign: str | None) -> None:
    assert csrf.foreign_origin(_request(headers), None) == foreign


PROXIED = {"host": "127.0.0.1:8000", "x-forwarded-host": "lesson.example, proxy.internal"}


@pytest.mark.parametrize(
    ("headers", "trusted", "foreign"),
    [
        # Behind a trusted proxy that rewrites Host and says where the request was sent.
        ({**PROXIED, "origin": "https://lesson.example"}, True, None),
        ({**PROXIED, "origin": EVIL}, True, EVIL),
        # From any other peer, X-Forwarded-Host is anyone's to write: it does not count.
        ({**PROXIED, "origin": "https://lesson.example"}, False, "https://lesson.example"),
        (
            {"host": "lesson.example", "x-forwarded-host": "evil.example", "origin": EVIL},
            False,
            EVIL,
        ),
    ],
)
def test_forwarded_host_counts_only_from_a_trusted_proxy(
    headers: dict[str, str], trusted: bool, foreign: str | None
) -> None:
    assert csrf.foreign_origin(_request(headers, trusted_peer=trusted), None) == foreign


BEHIND_A_PROXY = {"host": "127.0.0.1:8000"}  # a proxy that forwards neither Host nor X-F-Host


@pytest.mark.parametrize(
    ("headers", "public_origin", "foreign"),
    [
        ({**BEHIND_A_PROXY, "origin": "https://lesson.example"}, "https://lesson.example", None),
        ({**BEHIND_A_PROXY, "origin": "https://lesson.example"}, None, "https://lesson.example"),
        ({**BEHIND_A_PROXY, "origin": EVIL}, "https://lesson.example", EVIL),
        (
            {**BEHIND_A_PROXY, "origin": "https://lesson.example:8443"},
            "https://lesson.example:8443",
            None,
        ),
        (
            {**BEHIND_A_PROXY, "origin": "https://lesson.example"},
            "https://lesson.example:8443",
            "https://lesson.example",
        ),
        # The request's own Host still counts.
        ({**BEHIND_A_PROXY, "origin": "http://127.0.0.1:8000"}, "https://lesson.example", None),
        # On the public origin's host, its scheme too: plain http there is another origin,
        # even when a proxy forwards that host.
        (
            {**BEHIND_A_PROXY, "origin": "http://lesson.example"},
            "https://lesson.example",
            "http://lesson.example",
        ),
        (
            {"host": "lesson.example", "origin": "http://lesson.example"},
            "https://lesson.example",
            "http://lesson.example",
        ),
        (
            {"host": "lesson.example", "referer": "http://lesson.example/"},
            "https://lesson.example",
            "http://lesson.example/",
        ),
        (
            {"host": "lesson.example", "origin": "HTTPS://lesson.example"},
            "https://lesson.example",
            None,
        ),
    ],
)
def test_the_public_origin_is_this_site(
    headers: dict[str, str], public_origin: str | None, foreign: str | None
) -> None:
    assert csrf.foreign_origin(_request(headers), public_origin) == foreign


@pytest.mark.parametrize(("path", "data"), FORM_POSTS, ids=PATHS)
def test_a_forged_origin_naming_itself_in_x_forwarded_host_is_refused(
    make_browser: Callable[[], TestClient], path: str, data: dict[str, str]
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    learner.post("/predict", data={"choice": "residual", "csrf_token": token})
    before = events_of(learner)
    headers = {"Origin": EVIL, "X-Forwarded-Host": "evil.example", **JSON}
    response = learner.post(path, data={**data, "csrf_token": token}, headers=headers)
    assert response.status_code == 403
    assert "another site" in response.json()["message"]
    assert events_of(learner) == before


def test_x_forwarded_host_counts_when_the_peer_is_in_forwarded_allow_ips(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    # The in-process client's peer is called "testclient"; uvicorn's rule takes such names too.
    settings = make_settings(
        recording_path=write_recording(tmp_path, ablation_recording()),
        FORWARDED_ALLOW_IPS="testclient",
    )
    with TestClient(create_app(settings)) as learner:
        token = open_lesson(learner)
        headers = {"Origin": "https://lesson.example", "X-Forwarded-Host": "lesson.example"}
        accepted = learner.post(
            "/predict",
            data={"choice": "residual", "csrf_token": token},
            headers=headers,
            follow_redirects=False,
        )
        assert accepted.status_code == 303


def test_a_long_foreign_origin_is_cut_in_the_message(
    make_browser: Callable[[], TestClient],
) -> None:
    learner = make_browser()
    token = open_lesson(learner)
    origin = "https://" + "e" * 500 + ".example"
    response = learner.post(
        "/predict",
        data={"choice": "residual", "csrf_token": token},
        headers={"Origin": origin, **JSON},
    )
    assert response.status_code == 403
    assert len(response.json()["message"]) < len(csrf.FOREIGN_ORIGIN) + csrf.MAX_ECHOED_ORIGIN


# --- what stays open -------------------------------------------------------------------------


def test_the_host_platform_reports_without_a_form_token(
    folder: Path, database: str, make_browser: Callable[[], TestClient]
) -> None:
    learner = make_browser()
    open_lesson(learner)
    learner_id = learner.get("/api/state").json()["learner_id"]
    settings = build_settings(database, folder, dev_prerequisite_done=False)
    with TestClient(create_app(settings)) as host:
        response = host.post(
            "/api/prerequisite",
            json={"learner_id": learner_id},
            headers={"Authorization": f"Bearer {HOST_TOKEN}"},
        )
    assert response.status_code == 200 and response.json()["ok"] is True


def test_reading_needs_no_token(make_browser: Callable[[], TestClient]) -> None:
    """GET changes nothing, so a link from anywhere may open the page."""
    visitor = make_browser()
    assert visitor.get("/", headers={"Referer": f"{EVIL}/"}).status_code == 200
    assert visitor.get("/api/state", headers={"Origin": EVIL}).status_code == 200
