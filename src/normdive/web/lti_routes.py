"""The LTI 1.3 routes: the OIDC login a platform initiates (GET or POST /lti/login) and the
launch it posts back (POST /lti/launch). The work is normdive.lti's; this module speaks HTTP.

The login binds its state to this browser with a cookie named after the state (several
launches may be in flight in one browser: a course page can hold several activities). Inside
a platform's iframe that cookie is third-party, so it is SameSite=None, Secure and
Partitioned (CHIPS): a browser that blocks third-party cookies still keeps a partitioned one
for the same top-level site, which is where the launch lands. The launch signs the learner in
with the learner cookie, set with the same attributes, and sets the framing cookie that lets
the platform's origins frame the lesson (web.security.framing).

Every refusal is a page for the platform's administrator, with a 4xx and a log line; nothing
is stored.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from normdive.lti import launch as launches
from normdive.lti.learners import sign_in
from normdive.lti.login import LOGIN_TTL, begin_login
from normdive.lti.refusal import Refusal
from normdive.web.identity import (
    CACHE_CONTROL,
    COOKIE_MAX_AGE_S,
    COOKIE_NAME,
    cookie_value,
)
from normdive.web.security.framing import (
    FRAME_COOKIE,
    frame_cookie_value,
    frame_signer,
    set_framed_cookie,
)
from normdive.web.services import Services, services

logger = logging.getLogger(__name__)

router = APIRouter()

LOGIN_PATH = "/lti/login"
LAUNCH_PATH = "/lti/launch"
# The cookie that binds a login's state to the browser that started it, suffixed with the
# state (URL-safe base64: letters, digits, - and _, all allowed in a cookie name).
STATE_COOKIE_PREFIX = "normdive_lti_state_"
REFUSED_TITLE = "This LTI launch was refused"
# Form fields of the launch are short, but an id_token may be tens of KiB: read no more
# fields than a launch has.
MAX_FORM_FIELDS = 8


def own_origin(request: Request) -> str:
    """This tool's origin as the browser reached it (scheme, host and port; behind a trusted
    proxy, what it forwarded, as uvicorn's proxy headers middleware applied)."""
    return f"{request.url.scheme}://{request.url.netloc}"


def refused(svc: Services, step: str, refusal: Refusal) -> Response:
    logger.warning("LTI %s refused (%s): %s", step, refusal.code, refusal.message)
    body = svc.renderer.env.get_template("lti_refused.html").render(
        title=REFUSED_TITLE, message=refusal.message, code=refusal.code
    )
    response = HTMLResponse(body, refusal.status)
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


def _login(svc: Services, request: Request, params: dict[str, str]) -> Response:
    try:
        redirect = begin_login(
            svc.engine,
            params,
            own_origin=own_origin(request),
            launch_url=own_origin(request) + LAUNCH_PATH,
        )
    except Refusal as refusal:
        return refused(svc, "login", refusal)
    response = RedirectResponse(redirect.url, status_code=303)
    response.headers["Cache-Control"] = CACHE_CONTROL
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


@router.get(LOGIN_PATH)
async def login_get(request: Request) -> Response:
    """OIDC third-party login initiation, as a GET."""
    params = dict(request.query_params)
    return await run_in_threadpool(_login, services(request), request, params)


@router.post(LOGIN_PATH)
async def login_post(request: Request) -> Response:
    """OIDC third-party login initiation, as a form POST."""
    async with request.form(max_files=0, max_fields=MAX_FORM_FIELDS) as form:
        params = _text_fields(form)
    return await run_in_threadpool(_login, services(request), request, params)


def _launch(svc: Services, request: Request, fields: dict[str, str]) -> Response:
    state = fields.get("state", "")
    try:
        launch = launches.validate(
            svc.engine,
            id_token=fields.get("id_token", ""),
            state=state,
            browser_state=request.cookies.get(STATE_COOKIE_PREFIX + state) if state else None,
        )
        signed_in = sign_in(svc.engine, svc.store, launch)
    except Refusal as refusal:
        return refused(svc, "launch", refusal)
    logger.info(
        "LTI launch from %s (deployment %s): learner %s%s",
        launch.registration.issuer,
        launch.deployment_id,
        signed_in.learner_id,
        " (staff)" if signed_in.staff else "",
    )
    response = RedirectResponse("/", status_code=303)
    response.headers["Cache-Control"] = CACHE_CONTROL
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
    return response


@router.post(LAUNCH_PATH)
async def launch(request: Request) -> Response:
    """The resource link launch: the id_token (and state) the platform posts back."""
    async with request.form(max_files=0, max_fields=MAX_FORM_FIELDS) as form:
        fields = _text_fields(form)
    return await run_in_threadpool(_launch, services(request), request, fields)
