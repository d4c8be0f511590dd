"""A platform that follows Submission Review 1.0, for the tests: `lti1p3platform` (a platform
we did not write: independent_platform) does the login, signs id_tokens with its own key,
serves its key set and a token endpoint checking the tool's client assertion, and checks the
deep linking response; around it, served over real HTTP on 127.0.0.1, a gradebook that keeps
line items (made from a deep linking response, or through its line items container) and
scores, offers a review only where a line item declares one, and answers as Moodle 4.5 does
where Moodle is particular: a score for a user its launches did not make a learner is "400
Incorrect score received", and a link whose line item the tool made in the container is
launched with `"lineitem": ""`. Set up by hand (`normdive lti register`) or by dynamic
registration (the URL `normdive lti invite` prints)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from bs4 import BeautifulSoup
from lti1p3platform.registration import Registration as PlatformRegistration
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient
from typer.testing import CliRunner

from helpers import SECRET_KEY
from independent_platform import Login, MessageLaunch, PlatformConfig, pem_pair
from lti_platform import INSTRUCTOR_ROLE, LAUNCH_URL, LEARNER_ROLE, TOOL_ORIGIN, browser, serving
from normdive.cli import app as cli
from normdive.lti.passback import LINEITEM_SCOPE, SCORE_SCOPE
from normdive.lti.registrations import all_registrations, register, validated
from normdive.lti.roles import CourseRole, course_role

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
REVIEW_MESSAGE = "LtiSubmissionReviewRequest"
COURSE = "course-1"
DEPLOYMENT = "deployment-1"
CLIENT = "tool-client-9"


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
    title: str
    # The column the link was made with; None: an activity added without grades, whose column
    # the tool may make in the line items container.
    lineitem: LineItem | None


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
    # Each user's roles in their latest launch: only a learner's score is taken.
    roles: dict[str, list[str]] = field(default_factory=dict)
    # Scores refused, as (user, what the platform answered).
    refusals: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def link_lineitem(self, link: ResourceLink) -> LineItem | None:
        """The link's column: the one it was made with, or the one the tool made for it."""
        if link.lineitem is not None:
            return link.lineitem
        made = [item for item in self.lineitems.values() if item.resource_link_id == link.id]
        return made[0] if made else None

    def add_without_grades(self, title: str) -> ResourceLink:
        """An activity added from the activity chooser without "Accept grades": a resource link
        and no column."""
        return ResourceLink(
            id=f"link-{len(self.lineitems) + 100}", url=LAUNCH_URL, title=title, lineitem=None
        )

    def make_lineitem(self, body: dict[str, Any]) -> LineItem:
        """A column the tool asks the container for. Moodle 4.5 makes it a manual grade item and
        keeps no submissionReview."""
        with self.lock:
            url = f"{self.base}/lineitems/{len(self.lineitems) + 1}"
            item = LineItem(
                url=url,
                label=str(body.get("label", "")),
                score_maximum=float(body.get("scoreMaximum", 100)),
                resource_link_id=str(body.get("resourceLinkId", "")),
                submission_review=None,
            )
            self.lineitems[url] = item
        return item

    def ags_claim(self, link: ResourceLink) -> dict[str, Any]:
        """The grade service claim of a launch of the link, as Moodle writes it: its column,
        or "" once the tool made one in the container, or none before."""
        claim: dict[str, Any] = {
            "scope": [SCORE_SCOPE, LINEITEM_SCOPE],
            "lineitems": f"{self.base}/lineitems",
        }
        if link.lineitem is not None:
            claim["lineitem"] = link.lineitem.url
        elif self.link_lineitem(link) is not None:
            claim["lineitem"] = ""
        return {AGS_CLAIM: claim}

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
            preflight = oidc_login(client, self, teacher, hint="picker", deep_linking=True)
            launch = MessageLaunch(preflight, self.config)
            launch.set_user_data(teacher, [INSTRUCTOR_ROLE], full_name="Grace Hopper")
            launch.set_launch_context_claim(COURSE, context_title="Learn machine learning")
            launch.set_dl(
                deep_link_return_url=f"{self.base}/deep_links",
                title="Add an activity",
                accept_types={"ltiResourceLink"},
            )
            answer = post_launch(client, launch.lti_launch())
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
        return ResourceLink(
            id=link_id,
            url=str(item.get("url") or LAUNCH_URL),
            title=lineitem.label,
            lineitem=lineitem,
        )

    def launch(
        self,
        client: TestClient,
        user: str,
        name: str,
        link: ResourceLink,
        roles: list[str] | None = None,
    ) -> Any:
        """`user` opens the link (a learner unless `roles` say otherwise): a resource link
        launch with the grade service claim as Moodle sends it."""
        given = roles if roles is not None else [LEARNER_ROLE]
        with self.lock:
            self.roles[user] = given
        preflight = oidc_login(client, self, user, hint=link.id, launch_url=link.url)
        launch = MessageLaunch(preflight, self.config)
        launch.set_user_data(user, given, full_name=name)
        launch.set_launch_context_claim(COURSE, context_title="Learn machine learning")
        launch.set_resource_link_claim(link.id, title=link.title)
        launch.set_extra_claims(self.ags_claim(link))
        return post_launch(client, launch.lti_launch())

    def review_url(self, link: ResourceLink, user: str) -> str:
        """Where the gradebook sends the review of `user`'s work on the link's column, or
        NoReviewOffered (Submission Review 1.0: the line item's submissionReview, its url or
        else the link's; a tool that registered itself must have listed the message, and its
        message's target_link_uri is the default)."""
        lineitem = self.link_lineitem(link)
        if lineitem is None:
            raise NoReviewOffered(f"{link.title}: no column")
        review = lineitem.submission_review
        if review is None:
            raise NoReviewOffered(f"{lineitem.label}: the line item declares no review")
        score = self.scores.get((lineitem.url, user))
        if score is None:
            raise NoReviewOffered(f"{user} has no score on {lineitem.label}")
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
        self,
        app: Starlette,
        reviewer: str,
        roles: list[str],
        link: ResourceLink,
        user: str,
        for_user: dict[str, Any] | None = None,
    ) -> tuple[TestClient, Any]:
        """The gradebook's "open in the tool" for `user`'s work, by `reviewer`; `for_user` as
        the platform writes it (Moodle's names only the user_id)."""
        url = self.review_url(link, user)
        client = browser(app)
        preflight = oidc_login(client, self, reviewer, hint=link.id, launch_url=url)
        launch = MessageLaunch(preflight, self.config)
        launch.set_user_data(reviewer, roles, full_name="Reviewer")
        launch.set_launch_context_claim(COURSE, context_title="Learn machine learning")
        launch.set_resource_link_claim(link.id, title=link.title)
        lineitem = self.link_lineitem(link)
        assert lineitem is not None
        launch.set_extra_claims(
            {
                AGS_CLAIM: {
                    "scope": [SCORE_SCOPE, LINEITEM_SCOPE],
                    "lineitems": f"{self.base}/lineitems",
                    "lineitem": lineitem.url,
                },
                CLAIM + "message_type": REVIEW_MESSAGE,
                CLAIM + "for_user": for_user or {"user_id": user, "name": "Ada Lovelace"},
            }
        )
        return client, post_launch(client, launch.lti_launch())


def oidc_login(
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


def post_launch(client: TestClient, data: dict[str, Any]) -> Any:
    path = urlsplit(data["launch_url"]).path
    return client.post(path, data={"id_token": data["id_token"], "state": data["state"]})


def serve(platform: ReviewingPlatform) -> ThreadingHTTPServer:
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
            elif path == "/lineitems":
                link = parse_qs(urlsplit(self.path).query).get("resource_link_id", [None])[0]
                listed = [
                    _lineitem_json(item)
                    for item in platform.lineitems.values()
                    if link is None or item.resource_link_id == link
                ]
                self._json(200, listed)
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
                elif path == "/lineitems":
                    token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    if not platform.config.validate_token(token, allowed_scopes=[LINEITEM_SCOPE]):
                        raise ValueError("a token without the line item scope")
                    self._json(201, _lineitem_json(platform.make_lineitem(json.loads(raw))))
                elif path.endswith("/scores"):
                    token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    if not platform.config.validate_token(token, allowed_scopes=[SCORE_SCOPE]):
                        raise ValueError("a token without the score scope")
                    url = platform.base + path.removesuffix("/scores")
                    if url not in platform.lineitems:
                        self._json(404, {})
                        return
                    score = json.loads(raw)
                    roles = tuple(platform.roles.get(score["userId"], ()))
                    if course_role(roles) is not CourseRole.LEARNER:
                        # Moodle's answer for a user it cannot grade in the course.
                        platform.refusals.append((score["userId"], "Incorrect score received"))
                        self._json(400, {"error": "Incorrect score received", "score": score})
                        return
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


def _lineitem_json(item: LineItem) -> dict[str, Any]:
    return {
        "id": item.url,
        "label": item.label,
        "scoreMaximum": item.score_maximum,
        "resourceLinkId": item.resource_link_id,
    }


@contextmanager
def served_platform() -> Iterator[ReviewingPlatform]:
    """A new platform with its own key pair, served until the block ends."""
    private, public = pem_pair()
    registration = (
        PlatformRegistration().set_platform_private_key(private).set_platform_public_key(public)
    )
    served = ReviewingPlatform(
        config=PlatformConfig(registration=registration), registration=registration
    )
    server = serve(served)
    served.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield served


def registered_by_hand(app: Starlette, engine: Engine, platform: ReviewingPlatform) -> None:
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


def registered_dynamically(app: Starlette, engine: Engine, platform: ReviewingPlatform) -> None:
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
    "registered by hand": registered_by_hand,
    "dynamic registration": registered_dynamically,
}
