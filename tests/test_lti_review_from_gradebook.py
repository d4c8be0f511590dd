"""A learner's D9 opened from a gradebook (Submission Review 1.0) in a course set up the usual
way: an instructor adds D9 by deep linking, the platform makes the column from the response's
line item, a learner works, D9 scores them there, and the gradebook then sends
LtiSubmissionReviewRequest for that learner on that column.

The platform is `lti1p3platform` (independent_platform: its login, id_tokens signed with its
own key, key set, token endpoint checking the tool's client assertion, deep linking response
check), served over real HTTP on 127.0.0.1 with the gradebook of a platform that follows
Submission Review 1.0: it offers a review only on a line item that declares submissionReview,
only for a score whose activityProgress that declaration lists, and, with a tool that
registered itself, only when the tool's registration lists the review message. It is set up
twice: registered by hand (`normdive lti register`), and by dynamic registration (the URL
`normdive lti invite` prints)."""

from __future__ import annotations

import json
import threading
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
from typer.testing import CliRunner

from helpers import SECRET_KEY, SettingsFactory
from independent_platform import Login, MessageLaunch, PlatformConfig, pem_pair
from lesson_answers import RIGHT_NUMBERS
from lti_platform import (
    INSTRUCTOR_ROLE,
    LAUNCH_URL,
    LEARNER_ROLE,
    TOOL_ORIGIN,
    browser,
    serving,
)
from normdive.cli import app as cli
from normdive.config import Settings
from normdive.lesson.content import load_lesson
from normdive.lti.passback import SCORE_SCOPE, Sender
from normdive.lti.registrations import all_registrations, register, validated
from normdive.web.infrastructure.identity import COOKIE_NAME
from page_client import PageClient

LESSON = load_lesson()
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
REVIEW_MESSAGE = "LtiSubmissionReviewRequest"
COURSE = "course-1"
DEPLOYMENT = "deployment-1"
CLIENT = "tool-client-9"
TAKEAWAY = "Residuals carry the copy; layer norm keeps the scale."


class NoReviewOffered(Exception):
    """The gradebook offers no review of this learner's work in the tool: what a platform
    that follows Submission Review 1.0 shows when nothing declared one."""


@dataclass
class LineItem:
    url: str
    label: str
    score_maximum: float
    resource_link_id: str
    # The line item's submissionReview as the tool declared it; None: no review offered.
    submission_review: dict[str, Any] | None


@dataclass
class ResourceLink:
    id: str
    url: str
    lineitem: LineItem


@dataclass
class ReviewingPlatform:
    """The platform's side: its registration of the tool (lti1p3platform's), its line items,
    the latest score of each user on each, and what the tool registered itself with."""

    config: PlatformConfig
    registration: PlatformRegistration
    base: str = ""
    lineitems: dict[str, LineItem] = field(default_factory=dict)
    scores: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # The tool's configuration from dynamic registration; None when registered by hand.
    tool_configuration: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    # (method, path) of every request the platform was sent.
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def registered(self, sent: dict[str, Any]) -> dict[str, Any]:
        """The registration endpoint's work (Dynamic Registration 1.0, 3.6): keep the tool's
        configuration, point this platform's registration of the tool at its URLs, and answer
        with the client id and deployment id."""
        configuration = sent[TOOL_CONFIGURATION]
        self.tool_configuration = configuration
        deep_linking = [
            m for m in configuration["messages"] if m["type"] == "LtiDeepLinkingRequest"
        ]
        (
            self.registration.set_client_id(CLIENT)
            .set_deployment_id(DEPLOYMENT)
            .set_oidc_login_url(sent["initiate_login_uri"])
            .set_launch_url(configuration["target_link_uri"])
            .set_deeplink_launch_url(
                deep_linking[0].get("target_link_uri") or configuration["target_link_uri"]
            )
        )
        return {
            **sent,
            "client_id": CLIENT,
            TOOL_CONFIGURATION: {**configuration, "deployment_id": DEPLOYMENT},
        }

    @property
    def issuer(self) -> str:
        return str(self.registration.get_iss())

    def add_by_deep_linking(self, app: Starlette, teacher: str) -> ResourceLink:
        """An instructor picks D9 in the content picker; the platform makes a resource link
        and, from the response's lineItem, its gradebook column (Deep Linking 2.0, 3.4)."""
        with browser(app) as client:
            preflight = _preflight(client, self, teacher, hint="picker", deep_linking=True)
            launch = MessageLaunch(preflight, self.config)
            launch.set_user_data(teacher, [INSTRUCTOR_ROLE], full_name="Grace Hopper")
            launch.set_launch_context_claim(COURSE, context_title="Learn machine learning")
            launch.set_dl(
                deep_link_return_url=f"{self.base}/deep_links",
                title="Add an activity",
                accept_types={"ltiResourceLink"},
            )
            answer = _post_launch(client, launch.lti_launch())
        assert answer.status_code == 200, answer.text
        form = BeautifulSoup(answer.text, "html.parser").find("form")
        assert form is not None and form["action"] == f"{self.base}/deep_links"
        hidden = form.find("input", attrs={"name": "JWT"})
        assert hidden is not None
        [item] = self.config.validate_deeplinking_resp({"JWT": str(hidden["value"])})
        assert item["type"] == "ltiResourceLink"
        declared = item["lineItem"]
        link_id = f"link-{len(self.lineitems) + 1}"
        url = f"{self.base}/lineitems/{len(self.lineitems) + 1}"
        lineitem = LineItem(
            url=url,
            label=str(declared["label"]),
            score_maximum=float(declared["scoreMaximum"]),
            resource_link_id=link_id,
            submission_review=declared.get("submissionReview"),
        )
        with self.lock:
            self.lineitems[url] = lineitem
        return ResourceLink(id=link_id, url=str(item.get("url") or LAUNCH_URL), lineitem=lineitem)

    def launch(self, client: TestClient, user: str, name: str, link: ResourceLink) -> Any:
        """A learner opens the link: a resource link launch naming the link's line item."""
        preflight = _preflight(client, self, user, hint=link.id, launch_url=link.url)
        launch = MessageLaunch(preflight, self.config)
        launch.set_user_data(user, [LEARNER_ROLE], full_name=name)
        launch.set_launch_context_claim(COURSE, context_title="Learn machine learning")
        launch.set_resource_link_claim(link.id, title=link.lineitem.label)
        launch.set_ags(lineitems_url=f"{self.base}/lineitems", lineitem_url=link.lineitem.url)
        return _post_launch(client, launch.lti_launch())

    def review_url(self, link: ResourceLink, user: str) -> str:
        """Where the gradebook sends the review of `user`'s work on the link's column, or
        NoReviewOffered (Submission Review 1.0: the line item's submissionReview, its url or
        else the link's; a tool that registered itself must have listed the message, and its
        message's target_link_uri is the default)."""
        review = link.lineitem.submission_review
        if review is None:
            raise NoReviewOffered(f"{link.lineitem.label}: the line item declares no review")
        score = self.scores.get((link.lineitem.url, user))
        if score is None:
            raise NoReviewOffered(f"{user} has no score on {link.lineitem.label}")
        reviewable = review.get("reviewableStatus")
        if isinstance(reviewable, list) and score["activityProgress"] not in reviewable:
            raise NoReviewOffered(f"{score['activityProgress']} is not in {reviewable}")
        url = review.get("url")
        if self.tool_configuration is not None:
            messages = self.tool_configuration.get("messages", [])
            declared = [m for m in messages if m.get("type") == REVIEW_MESSAGE]
            if not declared:
                raise NoReviewOffered("the tool's registration lists no review message")
            url = url or declared[0].get("target_link_uri")
        return str(url or link.url)

    def review(
        self, app: Starlette, reviewer: str, roles: list[str], link: ResourceLink, user: str
    ) -> tuple[TestClient, Any]:
        """The gradebook's "open in the tool" for `user`'s work, by `reviewer`."""
        url = self.review_url(link, user)
        client = browser(app)
        preflight = _preflight(client, self, reviewer, hint=link.id, launch_url=url)
        launch = MessageLaunch(preflight, self.config)
        launch.set_user_data(reviewer, roles, full_name="Reviewer")
        launch.set_launch_context_claim(COURSE, context_title="Learn machine learning")
        launch.set_resource_link_claim(link.id, title=link.lineitem.label)
        launch.set_ags(lineitems_url=f"{self.base}/lineitems", lineitem_url=link.lineitem.url)
        launch.set_extra_claims(
            {
                CLAIM + "message_type": REVIEW_MESSAGE,
                CLAIM + "for_user": {"user_id": user, "name": "Ada Lovelace"},
            }
        )
        return client, _post_launch(client, launch.lti_launch())


def _preflight(
    client: TestClient,
    platform: ReviewingPlatform,
    user: str,
    hint: str,
    launch_url: str = LAUNCH_URL,
    deep_linking: bool = False,
) -> dict[str, str]:
    """The OIDC login: the platform's initiation, the tool's redirect to the platform's
    authorization endpoint, whose parameters the launch answers."""
    login = Login(None, platform.config)
    login.set_lti_message_hint(hint=hint)
    if deep_linking:
        login.set_deeplinking_launch_url()
    else:
        login.set_launch_url(launch_url)
    answer = client.get(login.initiate_login(user))
    assert answer.status_code == 303, answer.text
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    return {key: values[0] for key, values in query.items()}


def _post_launch(client: TestClient, data: dict[str, Any]) -> Any:
    path = urlsplit(data["launch_url"]).path
    return client.post(path, data={"id_token": data["id_token"], "state": data["state"]})


def _serve(platform: ReviewingPlatform) -> ThreadingHTTPServer:
    """The platform's endpoints: its key set, OpenID configuration and registration endpoint,
    token endpoint, line items and their scores. `methods` keeps every request's method."""

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            platform.requests.append(("GET", path))
            base = platform.base
            if path == "/jwks":
                self._json(200, platform.config.get_jwks())
            elif path == "/.well-known/openid-configuration":
                self._json(
                    200,
                    {
                        "issuer": base,
                        "authorization_endpoint": f"{base}/auth",
                        "token_endpoint": f"{base}/token",
                        "jwks_uri": f"{base}/jwks",
                        "registration_endpoint": f"{base}/register",
                        "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                            "product_family_code": "reviewing-platform",
                            "messages_supported": [
                                {"type": "LtiResourceLinkRequest"},
                                {"type": "LtiDeepLinkingRequest"},
                                {"type": REVIEW_MESSAGE},
                            ],
                        },
                    },
                )
            else:
                self._json(404, {})

        def do_PUT(self) -> None:
            platform.requests.append(("PUT", urlsplit(self.path).path))
            self._json(405, {})

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            platform.requests.append(("POST", path))
            raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
            try:
                if path == "/token":
                    form = {k: v[0] for k, v in parse_qs(raw).items()}
                    self._json(200, platform.config.get_access_token(form))
                elif path == "/register":
                    self._json(201, platform.registered(json.loads(raw)))
                elif path.endswith("/scores"):
                    token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    if not platform.config.validate_token(token, allowed_scopes=[SCORE_SCOPE]):
                        raise ValueError("a token without the score scope")
                    url = platform.base + path.removesuffix("/scores")
                    if url not in platform.lineitems:
                        self._json(404, {})
                        return
                    score = json.loads(raw)
                    with platform.lock:
                        platform.scores[(url, score["userId"])] = score
                    self._json(200, {})
                else:
                    self._json(404, {})
            except Exception as error:  # the platform's refusal, kept for the test to show
                platform.errors.append(f"{path}: {type(error).__name__}: {error}")
                self._json(400, {"error": str(error)})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def settings(make_settings: SettingsFactory) -> Settings:
    """The platform is on this machine (http://127.0.0.1), which a platform registering itself
    may name only with the development setting; 8.5 is checked as in a course (the launch)."""
    return make_settings(dev_prerequisite_done=False, dev_lti_loopback=True)


@pytest.fixture
def platform() -> Iterator[ReviewingPlatform]:
    private, public = pem_pair()
    registration = (
        PlatformRegistration().set_platform_private_key(private).set_platform_public_key(public)
    )
    served = ReviewingPlatform(
        config=PlatformConfig(registration=registration), registration=registration
    )
    server = _serve(served)
    served.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield served


def _registered_by_hand(app: Starlette, engine: Engine, platform: ReviewingPlatform) -> None:
    """The administrator's manual steps on both sides (the README's, for Moodle)."""
    issuer = "https://lms.example.edu"
    (
        platform.registration.set_iss(issuer)
        .set_client_id(CLIENT)
        .set_deployment_id(DEPLOYMENT)
        .set_oidc_login_url(f"{TOOL_ORIGIN}/lti/login")
        .set_launch_url(LAUNCH_URL)
        .set_deeplink_launch_url(LAUNCH_URL)
    )
    base = platform.base
    register(
        engine,
        validated(
            issuer=issuer,
            client_id=CLIENT,
            auth_login_url=f"{base}/auth",
            token_url=f"{base}/token",
            jwks_url=f"{base}/jwks",
            deployment_ids=(DEPLOYMENT,),
        ),
    )


def _registered_dynamically(app: Starlette, engine: Engine, platform: ReviewingPlatform) -> None:
    """The administrator pastes the URL `normdive lti invite` printed into the platform, which
    opens it with its OpenID configuration; the tool registers itself over HTTP."""
    platform.registration.set_iss(platform.base)
    invited = CliRunner().invoke(
        cli,
        ["lti", "invite", "--base-url", TOOL_ORIGIN],
        env={"NORMDIVE_SECRET_KEY": SECRET_KEY},
    )
    assert invited.exit_code == 0, invited.output
    query = {k: v[0] for k, v in parse_qs(urlsplit(invited.output.strip()).query).items()}
    query.update(
        openid_configuration=f"{platform.base}/.well-known/openid-configuration",
        registration_token="registration-token-1",
    )
    with browser(app) as client:
        answer = client.get("/lti/register", params=query)
    assert answer.status_code == 200, answer.text
    [registration] = all_registrations(engine)
    assert (registration.issuer, registration.client_id) == (platform.base, CLIENT)


SETUPS = {
    "registered by hand": _registered_by_hand,
    "dynamic registration": _registered_dynamically,
}


@pytest.fixture(params=list(SETUPS))
def course(
    request: pytest.FixtureRequest, app: Starlette, engine: Engine, platform: ReviewingPlatform
) -> ResourceLink:
    """The platform set up one way, its copy of the tool's key set taken from /lti/jwks (the
    tool is served in-process, which the platform's own fetch cannot reach), and D9 added to
    the course by deep linking."""
    SETUPS[request.param](app, engine, platform)
    with browser(app) as client:
        platform.registration.set_tool_key_set(client.get("/lti/jwks").json())
    return platform.add_by_deep_linking(app, "teacher-1")


def _learner_works(app: Starlette, platform: ReviewingPlatform, link: ResourceLink) -> str:
    """learner-7 opens the link and works: the opening prediction, the six numbers, a
    takeaway. Their learner id."""
    with PageClient(app, base_url=TOOL_ORIGIN, follow_redirects=False) as client:
        answer = platform.launch(client, "learner-7", "Ada Lovelace", link)
        assert answer.status_code == 303, answer.text
        for path, data in (
            ("/predict", {"choice": "residual"}),
            ("/numbers", RIGHT_NUMBERS),
            ("/takeaway", {"text": TAKEAWAY}),
        ):
            sent = client.post(path, data=data, headers={"Accept": "application/json"})
            assert sent.status_code == 200, (path, sent.text)
        return str(client.cookies.get(COOKIE_NAME)).split(".")[0]


def test_the_gradebook_opens_a_learners_work_on_the_deep_linked_column(
    app: Starlette,
    engine: Engine,
    settings: Settings,
    platform: ReviewingPlatform,
    course: ResourceLink,
) -> None:
    assert course.lineitem.submission_review is not None, "the deep link declared no review"
    _learner_works(app, platform, course)
    report = Sender(engine, LESSON, settings.recording_path).send_due()
    assert (report.sent, report.failed) == (1, 0), platform.errors
    score = platform.scores[(course.lineitem.url, "learner-7")]
    assert (score["scoreGiven"], score["scoreMaximum"]) == (6, 12)
    assert score["activityProgress"] == "InProgress"
    # The column the launch named is the platform's: the tool sent scores to it, never a PUT.
    assert not [request for request in platform.requests if request[0] == "PUT"]

    teacher, answer = platform.review(app, "teacher-1", [INSTRUCTOR_ROLE], course, "learner-7")
    with teacher:
        assert answer.status_code == 303, answer.text
        page = teacher.get(answer.headers["location"])
        assert page.status_code == 200
        text = BeautifulSoup(page.text, "html.parser").get_text(" ")
        assert "Viewing Ada Lovelace as they left it." in text
        assert TAKEAWAY in text
        assert "Checked the numbers (6 entries)" in text
        assert teacher.cookies.get(COOKIE_NAME) is None  # nobody signed in as the learner
    assert platform.errors == []


def test_a_learner_cannot_open_someone_elses_work_from_the_gradebook(
    app: Starlette,
    engine: Engine,
    settings: Settings,
    platform: ReviewingPlatform,
    course: ResourceLink,
) -> None:
    _learner_works(app, platform, course)
    Sender(engine, LESSON, settings.recording_path).send_due()
    with browser(app) as other:
        assert platform.launch(other, "learner-8", "Alan Turing", course).status_code == 303
    prying, answer = platform.review(app, "learner-8", [LEARNER_ROLE], course, "learner-7")
    with prying:
        assert answer.status_code == 403
        assert "review_not_allowed" in answer.text
        assert TAKEAWAY not in answer.text
        assert "location" not in answer.headers
