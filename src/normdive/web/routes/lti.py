"""The LTI 1.3 routes: the OIDC login a platform initiates (GET or POST /lti/login), the
launch it posts back (POST /lti/launch: a resource link launch signs the learner in; a deep
linking request shows the content picker's page; a submission review request signs nobody in
and opens GET /lti/review/{learner} with a review grant, lti.submission_review), and the
tool's key set (GET /lti/jwks).
The work is normdive.lti's; this module speaks HTTP.

The login binds its state to this browser, two ways:
- a cookie named after the state (several launches may be in flight in one browser: a course
  page can hold several activities). Inside a platform's iframe that cookie is third-party, so
  it is SameSite=None, Secure and Partitioned (CHIPS): a browser that blocks third-party
  cookies still keeps a partitioned one for the same top-level site, which is where the launch
  lands;
- when the platform offers its storage (`lti_storage_target`: LTI client-side postMessages,
  lti-cs-oidc, and the platform storage, lti-pm-s), a secret the login page puts there
  (static/lti-storage.js) before it goes on to the platform. A launch whose browser sent no
  cookie answers with a page that reads the secret back and posts the launch again with it,
  from this tool's own page (its Origin says so). Without either, the refusal says so and
  offers to open the lesson in a window of its own (where the tool's cookies are first-party).

The launch signs the learner in with the learner cookie, set with the same attributes, and
sets the framing cookie that lets the platform's origins frame the lesson
(web.security.framing). Every page these routes answer may be framed by the registered
platforms' origins (it is shown in their iframe), and by nobody when none is registered.

Every refusal is a page for the platform's administrator, with a 4xx and a log line; nothing
is stored. A refusal page may be framed by any https site: it holds a message and no form,
and the administrator of a platform not registered yet must be able to read it in the frame.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from normdive.config import origin_of
from normdive.i18n.catalogues import N_, activated, gettext
from normdive.i18n.locales import negotiate, supported
from normdive.lesson.translations import localized
from normdive.lti import (
    deep_linking,
    dynamic_registration,
    roster,
    submission_review,
    tool_config,
    tool_keys,
)
from normdive.lti import launch as launches
from normdive.lti.launch import (
    DEEP_LINKING_REQUEST,
    SUBMISSION_REVIEW_REQUEST,
    BrowserProof,
    Launch,
    NeedsPlatformStorage,
    PendingLogin,
)
from normdive.lti.learners import SignedIn, sign_in
from normdive.lti.login import LOGIN_TTL, begin_login, storage_key_name
from normdive.lti.refusal import Refusal
from normdive.lti.registrations import Registration, all_registrations, by_id
from normdive.lti.tool_config import JWKS_PATH, LAUNCH_PATH, LOGIN_PATH, canvas_configuration
from normdive.web.infrastructure.identity import (
    CACHE_CONTROL,
    COOKIE_MAX_AGE_S,
    COOKIE_NAME,
    cookie_value,
)
from normdive.web.infrastructure.instructor_access import (
    INSTRUCTOR_COOKIE,
    INSTRUCTOR_PATH,
    Pool,
    set_instructor_cookie,
)
from normdive.web.infrastructure.language import CHOICE_COOKIE, LAUNCH_COOKIE, keep_locale
from normdive.web.infrastructure.services import Services, services
from normdive.web.security.csrf import from_this_site
from normdive.web.security.framing import (
    FRAME_COOKIE,
    UNFRAMED_POLICY,
    frame_cookie_value,
    frame_signer,
    framed_policy,
    set_framed_cookie,
)
from normdive.web.security.proxy import client_address
from normdive.web.security.ratelimit import address_key

logger = logging.getLogger(__name__)


CANVAS_CONFIG_PATH = "/lti/canvas.json"
# Platforms may keep the tool's key set a few minutes (they fetch it again for a key id they
# do not know); the previous key stays published after a rotation (tool_keys).
JWKS_CACHE_CONTROL = "public, max-age=300"
# The cookie that binds a login's state to the browser that started it, suffixed with the
# state (URL-safe base64: letters, digits, - and _, all allowed in a cookie name).
STATE_COOKIE_PREFIX = "normdive_lti_state_"
REFUSED_TITLE = N_("This LTI launch was refused")
# Who may frame a refusal page: any site served over https.
REFUSAL_FRAME_ANCESTORS = "https:"
STORAGE_TEMPLATE = "lti_storage.html"
# A submission review: one learner's D9 as they left it, read-only (lti.submission_review).
REVIEW_TEMPLATE = "lti_review.html"
REVIEW_REFUSED_TITLE = N_("This review cannot be opened")
# The launch's form fields: the platform's id_token and state (and lti_storage_target), and
# the secret the tool's launch page read back from the platform's storage.
MAX_FORM_FIELDS = 8
# Where a platform's storage lives when the launch does not name its frame (lti-pm-s).
DEFAULT_STORAGE_TARGET = "_parent"


def own_origin(svc: Services, request: Request) -> str:
    """This tool's origin: NORMDIVE_PUBLIC_ORIGIN where the operator set it, otherwise as the
    browser reached it (scheme, host and port; behind a trusted proxy, what it forwarded, as
    uvicorn's proxy headers middleware applied)."""
    configured = svc.settings.public_origin
    return configured or f"{request.url.scheme}://{request.url.netloc}"


def _registered_origins(svc: Services) -> list[str]:
    origins: dict[str, None] = {}
    for registration in all_registrations(svc.engine):
        origins.update(dict.fromkeys(registration.framing_origins()))
    return list(origins)


def _framable(svc: Services, response: Response) -> Response:
    """The response, framable by the registered platforms (it is shown in their iframe)."""
    origins = _registered_origins(svc)
    response.headers["Content-Security-Policy"] = (
        framed_policy(origins) if origins else UNFRAMED_POLICY
    )
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


def _render(svc: Services, template: str, status: int = 200, **context: Any) -> Response:
    body = svc.renderer.env.get_template(template).render(**context)
    return _framable(svc, HTMLResponse(body, status))


def refused(svc: Services, step: str, refusal: Refusal, title: str = REFUSED_TITLE) -> Response:
    logger.warning("LTI %s refused (%s): %s", step, refusal.code, refusal.message)
    relaunch = f"{LOGIN_PATH}?{refusal.relaunch_query}" if refusal.relaunch_query else None
    response = _render(
        svc,
        "lti_refused.html",
        refusal.status,
        title=gettext(title),
        message=refusal.message,
        code=refusal.code,
        relaunch_url=relaunch,
    )
    # Shown in the frame of whichever platform sent it, registered or not (an administrator
    # trying a platform not registered yet must read why): it holds a message and no form.
    response.headers["Content-Security-Policy"] = framed_policy([REFUSAL_FRAME_ANCESTORS])
    if refusal.retry_after_s is not None:
        response.headers["Retry-After"] = str(refusal.retry_after_s)
    return response


def _login(svc: Services, request: Request, params: dict[str, str]) -> Response:
    try:
        redirect = begin_login(
            svc.engine,
            params,
            own_origin=own_origin(svc, request),
            launch_url=own_origin(svc, request) + LAUNCH_PATH,
            created_by=address_key(svc.settings.secret_key, client_address(request)),
            open_limit=svc.settings.open_lti_logins_per_address,
        )
    except Refusal as refusal:
        return refused(svc, "login", refusal)
    if redirect.storage is None:
        response: Response = _framable(svc, RedirectResponse(redirect.url, status_code=303))
    else:
        # A page that puts the secret in the platform's storage, then goes on to the platform.
        response = _render(
            svc,
            STORAGE_TEMPLATE,
            mode="put",
            storage_target=redirect.storage.target,
            storage_origin=redirect.storage.origin,
            storage_key=redirect.storage.key,
            storage_value=redirect.storage.secret,
            next_url=redirect.url,
        )
    set_framed_cookie(
        response,
        STATE_COOKIE_PREFIX + redirect.state,
        redirect.state,
        max_age=int(LOGIN_TTL.total_seconds()),
        path=LAUNCH_PATH,
    )
    return response


def _text_fields(form: FormData) -> dict[str, str]:
    return {key: value for key, value in form.items() if isinstance(value, str)}


def login_get(request: Request) -> Response:
    """OIDC third-party login initiation, as a GET."""
    return _login(services(request), request, dict(request.query_params))


async def login_post(request: Request) -> Response:
    """OIDC third-party login initiation, as a form POST."""
    async with request.form(max_files=0, max_fields=MAX_FORM_FIELDS) as form:
        params = _text_fields(form)
    return await run_in_threadpool(_login, services(request), request, params)


def _from_own_page(svc: Services, request: Request) -> bool:
    origin = request.headers.get("origin")
    return origin is not None and from_this_site(origin, request, svc.settings.public_origin)


def _read_platform_storage(svc: Services, login: PendingLogin, fields: dict[str, str]) -> Response:
    """The page that reads the login's secret back from the platform's storage and posts the
    launch again with it (static/lti-storage.js)."""
    registration = by_id(svc.engine, login.registration_id)
    origin = origin_of(registration.auth_login_url) if registration is not None else None
    relaunch = f"{LOGIN_PATH}?{login.relaunch_query}" if login.relaunch_query else None
    return _render(
        svc,
        STORAGE_TEMPLATE,
        mode="get",
        storage_target=fields.get("lti_storage_target") or DEFAULT_STORAGE_TARGET,
        storage_origin=origin or "",
        storage_key=storage_key_name(login.state),
        id_token=fields.get("id_token", ""),
        state=login.state,
        relaunch_url=relaunch,
    )


def _sign_in(svc: Services, launch: Launch) -> SignedIn:
    return sign_in(
        svc.engine,
        svc.store,
        launch,
        administrators_are_staff=svc.settings.lti_administrators_are_staff,
        keep_names=svc.settings.roster_keep_names,
    )


def _launch(svc: Services, request: Request, fields: dict[str, str]) -> Response:
    state = fields.get("state", "")
    proof = BrowserProof(
        cookie_state=request.cookies.get(STATE_COOKIE_PREFIX + state) if state else None,
        storage_secret=fields.get("storage_secret") or None,
        from_own_page=_from_own_page(svc, request),
    )
    try:
        launch = launches.validate(
            svc.engine, id_token=fields.get("id_token", ""), state=state, proof=proof
        )
        if launch.message_type == DEEP_LINKING_REQUEST:
            return _deep_linking(svc, request, launch, state)
        if launch.message_type == SUBMISSION_REVIEW_REQUEST:
            return _submission_review(svc, launch, state)
        signed_in = _sign_in(svc, launch)
    except NeedsPlatformStorage as needed:
        return _read_platform_storage(svc, needed.login, fields)
    except Refusal as refusal:
        return refused(svc, "launch", refusal)
    logger.info(
        "LTI launch from %s (deployment %s): learner %s%s",
        launch.registration.issuer,
        launch.deployment_id,
        signed_in.learner_id,
        " (staff)" if signed_in.staff else "",
    )
    # Staff of a course land on its instructor view (which links to the lesson); everyone
    # else on the lesson, with any instructor access this browser held before dropped.
    teaching = signed_in.staff and signed_in.context_key is not None
    response = _framable(svc, RedirectResponse(INSTRUCTOR_PATH if teaching else "/", 303))
    if teaching:
        set_instructor_cookie(response, svc.settings, Pool(signed_in.context_key), framed=True)
    else:
        set_framed_cookie(response, INSTRUCTOR_COOKIE, "", max_age=0, path=INSTRUCTOR_PATH)
    set_framed_cookie(
        response,
        COOKIE_NAME,
        cookie_value(signed_in.learner_id, svc.signer),
        max_age=COOKIE_MAX_AGE_S,
        path="/",
    )
    set_framed_cookie(
        response,
        FRAME_COOKIE,
        frame_cookie_value(
            launch.registration.framing_origins(), frame_signer(svc.settings.secret_key)
        ),
        max_age=COOKIE_MAX_AGE_S,
        path="/",
    )
    set_framed_cookie(response, STATE_COOKIE_PREFIX + state, "", max_age=0, path=LAUNCH_PATH)
    # The platform's language for this user, below a choice made on the page (a launch
    # without one forgets an earlier launch's).
    keep_locale(response, LAUNCH_COOKIE, supported(launch.locale), svc.settings, framed=True)
    _refresh_roster(svc, launch, signed_in.staff)
    return response


def _refresh_roster(svc: Services, launch: Launch, staff: bool) -> None:
    """Keep the course's roster service when the launch names one; on a staff launch, ask for
    the roster, fetched on a roster thread (web.infrastructure.roster_refreshes: neither the
    launch nor any other request waits for the platform), at most once per
    NORMDIVE_ROSTER_REFRESH_S and within roster.ROSTER_DEADLINE_S."""
    course = roster.remember_service(svc.engine, launch)
    if course is None or not staff:
        return
    svc.rosters.ask(course)


def _launch_locale(request: Request, launch: Launch) -> str:
    """The language of a page drawn in answer to `launch`: the learner's choice, the
    launch's locale, the browser's, then English (i18n.locales.negotiate)."""
    return negotiate(
        chosen=request.cookies.get(CHOICE_COOKIE),
        launched=launch.locale,
        accept_language=request.headers.get("accept-language"),
    )


def _deep_linking(svc: Services, request: Request, launch: Launch, state: str) -> Response:
    """The content picker's page: the lesson, and a button that posts the signed response
    back to the platform. Refusals raise before the login is consumed."""
    answer = deep_linking.respond(
        svc.engine,
        launch,
        svc.lesson,
        own_origin(svc, request) + LAUNCH_PATH,
        administrators_are_staff=svc.settings.lti_administrators_are_staff,
    )
    with svc.engine.begin() as connection:
        launches.consume(connection, launch.login)
    # Drawn in answer to the launch itself, so in the launch's language (below a choice made
    # on the page), not only from the next request on.
    with activated(_launch_locale(request, launch)):
        response = _render(svc, "lti_deep_link.html", answer=answer, lesson=localized(svc.lesson))
    # The page's one form posts to the platform: its origin joins form-action.
    origin = origin_of(answer.return_url) or "'none'"
    policy = response.headers["Content-Security-Policy"]
    response.headers["Content-Security-Policy"] = policy.replace(
        "form-action 'self'", f"form-action 'self' {origin}"
    )
    set_framed_cookie(response, STATE_COOKIE_PREFIX + state, "", max_age=0, path=LAUNCH_PATH)
    return response


def _submission_review(svc: Services, launch: Launch, state: str) -> Response:
    """A gradebook's submission review request: the review page, through a review grant
    (lti.submission_review); nobody is signed in. Refusals raise before the login is
    consumed."""
    review = submission_review.open_review(
        svc.engine, launch, administrators_are_staff=svc.settings.lti_administrators_are_staff
    )
    logger.info(
        "LTI submission review from %s (deployment %s): learner %s%s",
        launch.registration.issuer,
        launch.deployment_id,
        review.learner_id or "(never opened D9 from the course)",
        " (their own)" if review.own else "",
    )
    if review.learner_id is None:
        response = _render(
            svc,
            REVIEW_TEMPLATE,
            lesson=localized(svc.lesson),
            label=review.label,
            own=review.own,
            state=None,
            timeline=(),
        )
    else:
        token = submission_review.grant_token(review, svc.settings.secret_key)
        response = _with_review_grant(
            svc, review.learner_id, token, "", submission_review.REVIEW_GRANT_TTL_S
        )
    set_framed_cookie(response, STATE_COOKIE_PREFIX + state, "", max_age=0, path=LAUNCH_PATH)
    return response


def _with_review_grant(
    svc: Services, learner_id: str, token: str, query: str, max_age: int
) -> Response:
    """A redirect to the learner's review page at a clean address (`query` without the grant),
    the grant in the cookie scoped to that page, for as long as the grant holds."""
    path = submission_review.review_path(learner_id)
    response = _framable(svc, RedirectResponse(f"{path}?{query}" if query else path, 303))
    set_framed_cookie(
        response,
        submission_review.REVIEW_COOKIE,
        token,
        max_age=max_age,
        path=path,
    )
    return response


def _review_page(svc: Services, request: Request, learner_id: str) -> Response:
    """One learner's D9 as they left it, read-only, for the holder of a review grant: in the
    page's cookie, or in a link's query, which is exchanged for the cookie at once."""
    in_query = request.query_params.get(submission_review.GRANT_PARAMETER)
    token = (
        in_query if in_query is not None else request.cookies.get(submission_review.REVIEW_COOKIE)
    )
    try:
        grant = submission_review.grant_from(token, learner_id, svc.settings.secret_key)
    except Refusal as refusal:
        return refused(svc, "submission review", refusal, REVIEW_REFUSED_TITLE)
    if in_query is not None:
        rest = [
            (name, value)
            for name, value in request.query_params.multi_items()
            if name != submission_review.GRANT_PARAMETER
        ]
        left = max(1, math.ceil(grant.expires_at - time.time()))
        return _with_review_grant(svc, learner_id, in_query, urlencode(rest), left)
    state = svc.state_of(grant.learner_id)
    lesson = localized(svc.lesson)  # its text in the reviewer's language
    return _render(
        svc,
        REVIEW_TEMPLATE,
        lesson=lesson,
        label=grant.label,
        own=grant.own,
        state=state,
        prediction=next(
            (c.label for c in lesson.predict.choices if c.id == state.prediction), None
        ),
        reading=next(
            (c.label for c in lesson.reading.choices if c.id == state.reading.locked_choice),
            None,
        ),
        timeline=submission_review.timeline(svc.store.events_for(grant.learner_id), lesson),
    )


def review_page(request: Request) -> Response:
    """A submission review: the learner's work as they left it (lti.submission_review)."""
    return _review_page(services(request), request, request.path_params["learner_id"])


def tool_key_set(request: Request) -> Response:
    """The tool's public keys (JWKS), which a platform registers to verify the tool's signed
    client assertions (grade passback)."""
    key_set = tool_keys.public_key_set(services(request).engine)
    return JSONResponse(dict(key_set), headers={"Cache-Control": JWKS_CACHE_CONTROL})


def _registered(svc: Services, registration: Registration) -> Response:
    logger.info(
        "LTI platform %s registered itself (client id %s)",
        registration.issuer,
        registration.client_id,
    )
    return _render(
        svc,
        "lti_registered.html",
        title=tool_config.title(svc.lesson),
        registration=registration,
    )


async def dynamic_register(request: Request) -> Response:
    """LTI Dynamic Registration: the platform opens this URL (the operator's invitation) with
    its OpenID configuration's URL and a registration token. The exchange with the platform
    runs on the event loop, holding no thread while it waits (dynamic_registration); the
    database's steps and the page run on worker threads."""
    svc = services(request)
    params = dict(request.query_params)
    try:
        invite = await run_in_threadpool(
            dynamic_registration.check_invite,
            svc.engine,
            params.get(dynamic_registration.INVITE_PARAMETER, ""),
            svc.settings.secret_key,
        )
        registration = await dynamic_registration.register_dynamically(
            svc.engine,
            configuration_url=params.get("openid_configuration", ""),
            registration_token=params.get("registration_token") or None,
            origin=own_origin(svc, request),
            lesson=svc.lesson,
            invite=invite,
            this_machine_allowed=svc.settings.dev_lti_loopback,
        )
    except Refusal as refusal:
        return await run_in_threadpool(refused, svc, "registration", refusal)
    return await run_in_threadpool(_registered, svc, registration)


async def canvas_config(request: Request) -> Response:
    """The JSON configuration a Canvas administrator pastes (or points) a developer key at."""
    svc = services(request)
    return JSONResponse(canvas_configuration(own_origin(svc, request), svc.lesson))


async def launch(request: Request) -> Response:
    """The resource link launch: the id_token (and state) the platform posts back."""
    async with request.form(max_files=0, max_fields=MAX_FORM_FIELDS) as form:
        fields = _text_fields(form)
    return await run_in_threadpool(_launch, services(request), request, fields)


routes = [
    Route(LOGIN_PATH, login_get, methods=["GET"]),
    Route(LOGIN_PATH, login_post, methods=["POST"]),
    Route(submission_review.REVIEW_PATH + "/{learner_id}", review_page, methods=["GET"]),
    Route(JWKS_PATH, tool_key_set, methods=["GET"]),
    Route(dynamic_registration.REGISTER_PATH, dynamic_register, methods=["GET"]),
    Route(CANVAS_CONFIG_PATH, canvas_config, methods=["GET"]),
    Route(LAUNCH_PATH, launch, methods=["POST"]),
]
