"""The tool against a platform we did not write: `lti1p3platform` (PyPI), its own OIDC login
initiation, id_token (claims, RS256 signature with its own key, kid from the key's
thumbprint), key set, OAuth 2 token endpoint (which verifies the tool's RFC 7523 client
assertion) and deep linking response check. Its key set and token endpoint are served over
real HTTP on 127.0.0.1; the tool runs in-process on its https origin.

The adapter's two methods are in independent_platform. Dynamic registration is not in the
library. The review from a gradebook, after deep linking or dynamic registration, is
test_lti_review_from_gradebook's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from lti1p3platform.registration import Registration as PlatformRegistration
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from helpers import SettingsFactory
from independent_platform import Login, MessageLaunch, PlatformConfig, pem_pair
from lti_platform import (
    CLIENT_ID,
    DEPLOYMENT_ID,
    INSTRUCTOR_ROLE,
    ISSUER,
    LAUNCH_URL,
    LEARNER_ROLE,
    TOOL_ORIGIN,
    browser,
    register_platform,
    serving,
)
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lti.passback import SCORE_SCOPE, Sender
from normdive.progress.events import EventKind
from normdive.store.event_store import Store
from normdive.web.infrastructure.identity import COOKIE_NAME

LESSON = load_lesson()


@dataclass
class Platform:
    config: PlatformConfig
    base: str = ""
    scores: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    return make_settings(dev_prerequisite_done=False)


@pytest.fixture
def platform(app: Starlette, engine: Engine) -> Iterator[Platform]:
    private, public = pem_pair()
    registration = (
        PlatformRegistration()
        .set_iss(ISSUER)
        .set_client_id(CLIENT_ID)
        .set_deployment_id(DEPLOYMENT_ID)
        .set_oidc_login_url(f"{TOOL_ORIGIN}/lti/login")
        .set_launch_url(LAUNCH_URL)
        .set_deeplink_launch_url(LAUNCH_URL)
        .set_platform_private_key(private)
        .set_platform_public_key(public)
    )
    served = Platform(config=PlatformConfig(registration=registration))
    served.config.get_registration()

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json(200, served.config.get_jwks())

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
            path = urlsplit(self.path).path
            try:
                if path == "/token":
                    form = {k: v[0] for k, v in parse_qs(raw).items()}
                    self._json(200, served.config.get_access_token(form))
                    return
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if not served.config.validate_token(token, allowed_scopes=[SCORE_SCOPE]):
                    raise ValueError("token without the score scope")
                served.scores.append(json.loads(raw))
                self._json(200, {})
            except Exception as error:  # the platform's refusal, kept for the test to show
                served.errors.append(f"{path}: {type(error).__name__}: {error}")
                self._json(400, {"error": str(error)})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        register_platform(engine, f"{served.base}/jwks", token_url=f"{served.base}/token")
        with browser(app) as client:
            registration.set_tool_key_set(client.get("/lti/jwks").json())
        yield served


def _launch(
    client: TestClient, platform: Platform, user: str, roles: list[str], deep_linking: bool
) -> Any:
    login = Login(None, platform.config)
    login.set_lti_message_hint(hint="resource-link-1")
    if deep_linking:
        login.set_deeplinking_launch_url()
    login_url = login.initiate_login(user)
    answer = client.get(login_url)
    assert answer.status_code == 303, answer.text
    preflight = {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()}
    launch = MessageLaunch(preflight, platform.config)
    launch.set_user_data(user, roles, full_name="Ada Lovelace")
    launch.set_launch_context_claim("course-1", context_title="Learn machine learning")
    if deep_linking:
        launch.set_dl(
            deep_link_return_url=f"{platform.base}/deep_links",
            title="Pick a lesson",
            accept_types={"ltiResourceLink"},
        )
    else:
        launch.set_resource_link_claim("resource-link-1", title="D9")
        launch.set_ags(
            lineitems_url=f"{platform.base}/lineitems",
            lineitem_url=f"{platform.base}/lineitems/1",
        )
    data = launch.lti_launch()
    assert data["launch_url"] == LAUNCH_URL
    return client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]})


def test_launch_and_score_with_an_independent_platform(
    app: Starlette, platform: Platform, engine: Engine, store: Store, settings: Settings
) -> None:
    with browser(app) as client:
        response = _launch(client, platform, "learner-7", [LEARNER_ROLE], deep_linking=False)
        assert response.status_code == 303, response.text
        assert client.get("/").status_code == 200
        learner = str(client.cookies.get(COOKIE_NAME)).split(".")[0]
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    report = Sender(engine, LESSON, settings.recording_path).send_due()
    assert (report.sent, report.failed) == (1, 0), platform.errors
    assert platform.errors == []
    score = platform.scores[-1]
    assert score["userId"] == "learner-7"
    assert score["scoreGiven"] == 1
    assert score["scoreMaximum"] == 12


def test_deep_linking_with_an_independent_platform(app: Starlette, platform: Platform) -> None:
    with browser(app) as client:
        response = _launch(client, platform, "teacher-1", [INSTRUCTOR_ROLE], deep_linking=True)
    assert response.status_code == 200, response.text
    hidden = BeautifulSoup(response.text, "html.parser").find("input", attrs={"name": "JWT"})
    assert hidden is not None
    # The platform checks the signed response with the tool's key set, as it would on post.
    items = platform.config.validate_deeplinking_resp({"JWT": str(hidden["value"])})
    [item] = items
    assert item["type"] == "ltiResourceLink"
    assert item["url"] == LAUNCH_URL
    assert item["lineItem"]["scoreMaximum"] == 12


def test_submission_review_with_an_independent_platform(
    app: Starlette, platform: Platform, store: Store
) -> None:
    """lti1p3platform has no submission review message of its own: its login, id_token
    (signed with its key, from its key set) carry the message type and for_user claims as extra
    claims, as a platform that implements Submission Review 1.0 sends them."""
    with browser(app) as client:
        assert _launch(client, platform, "learner-7", [LEARNER_ROLE], False).status_code == 303
        learner = str(client.cookies.get(COOKIE_NAME)).split(".")[0]
    store.append(learner, EventKind.TAKEAWAY_SAVED, {"text": "Residuals carry the copy."})

    def review(user: str, roles: list[str]) -> Any:
        client = browser(app)
        login = Login(None, platform.config)
        login.set_lti_message_hint(hint="resource-link-1")
        answer = client.get(login.initiate_login(user))
        assert answer.status_code == 303, answer.text
        query = parse_qs(urlsplit(answer.headers["location"]).query)
        launch = MessageLaunch({k: v[0] for k, v in query.items()}, platform.config)
        launch.set_user_data(user, roles, full_name="Someone")
        launch.set_launch_context_claim("course-1", context_title="Learn machine learning")
        launch.set_resource_link_claim("resource-link-1", title="D9")
        launch.set_ags(
            lineitems_url=f"{platform.base}/lineitems",
            lineitem_url=f"{platform.base}/lineitems/1",
        )
        launch.set_extra_claims(
            {
                "https://purl.imsglobal.org/spec/lti/claim/message_type": (
                    "LtiSubmissionReviewRequest"
                ),
                "https://purl.imsglobal.org/spec/lti/claim/for_user": {
                    "user_id": "learner-7",
                    "name": "Ada Lovelace",
                },
            }
        )
        data = launch.lti_launch()
        sent = client.post(
            "/lti/launch", data={"id_token": data["id_token"], "state": data["state"]}
        )
        return client, sent

    teacher, answer = review("teacher-1", [INSTRUCTOR_ROLE])
    assert answer.status_code == 303, answer.text
    page = teacher.get(answer.headers["location"])
    assert page.status_code == 200
    soup = BeautifulSoup(page.text, "html.parser")
    assert "Viewing Ada Lovelace as they left it." in soup.get_text()
    assert "Residuals carry the copy." in soup.get_text()
    assert teacher.cookies.get(COOKIE_NAME) is None
    teacher.close()
    other, answer = review("learner-8", [LEARNER_ROLE])
    assert answer.status_code == 403
    assert "review_not_allowed" in answer.text
    other.close()
