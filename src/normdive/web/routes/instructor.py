"""The instructor view's routes: GET /instructor (the page, server-rendered, no script needed).

Access is web.infrastructure.instructor_access's: the instructor cookie names the pool shown; a
link's token (?access=) is exchanged for that cookie and a redirect to the bare path. Anything else
gets a readable 403. The page is the instructor's own: Cache-Control no-store.
"""

from __future__ import annotations

import hmac

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from normdive.lesson.translations import localized
from normdive.lti import grade_doctor, passback
from normdive.lti.roster import roster_of
from normdive.progress.report_export import aggregate
from normdive.web.infrastructure.errors import error_response
from normdive.web.infrastructure.identity import CACHE_CONTROL
from normdive.web.infrastructure.instructor_access import (
    ACCESS_PARAMETER,
    INSTRUCTOR_COOKIE,
    INSTRUCTOR_PATH,
    NO_ACCESS,
    AccessRefused,
    Pool,
    pool_from_cookie,
    pool_from_link,
    set_instructor_cookie,
)
from normdive.web.infrastructure.services import Services, services
from normdive.web.security import csrf
from normdive.web.security.framing import FRAME_COOKIE
from normdive.web.views.instructor_lab import lab_report
from normdive.web.views.instructor_report import (
    csv_chunks,
    instructor_charts,
    learner_summaries,
    pool_recording,
    pool_report,
)
from normdive.web.views.instructor_rerun import rerun_aggregate, rerun_report
from normdive.web.views.instructor_xapi import records_report
from normdive.web.views.lab_grid import LabGridView, grid_or_sentence

INSTRUCTOR_TEMPLATE = "instructor.html"
EXPORT_FILENAME = "normdive-learners.csv"
# Takeaways the page lists, newest first; every one is in the aggregate (aggregate.json and
# `normdive report`). A course of thousands would otherwise make a page of megabytes.
TAKEAWAYS_SHOWN = 100
# Roster members who have not opened D9 that the page names, by name; the CSV has them all.
NOT_OPENED_SHOWN = 200


def instructor_pool(svc: Services, request: Request) -> Pool | None:
    return pool_from_cookie(
        request.cookies.get(INSTRUCTOR_COOKIE),
        svc.settings.secret_key,
        svc.settings.instructor_access_ttl_s,
    )


def _lab_grid(svc: Services) -> LabGridView | None:
    """The lab grid the pool's runs are held to; None when it cannot be used."""
    found = grid_or_sentence(svc.settings.recording_path, svc.lesson)
    return found if isinstance(found, LabGridView) else None


def _refused(request: Request, message: str) -> Response:
    response = error_response(request, 403, message)
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


def _instructor_page(svc: Services, request: Request) -> Response:
    token = request.query_params.get(ACCESS_PARAMETER)
    if token is not None:
        try:
            linked = pool_from_link(
                token, svc.settings.secret_key, svc.settings.instructor_access_ttl_s
            )
        except AccessRefused as refusal:
            return _refused(request, refusal.message)
        redirect = RedirectResponse(INSTRUCTOR_PATH, status_code=303)
        set_instructor_cookie(
            redirect, svc.settings, linked, framed=FRAME_COOKIE in request.cookies
        )
        redirect.headers["Cache-Control"] = CACHE_CONTROL
        return redirect
    pool = instructor_pool(svc, request)
    if pool is None:
        return _refused(request, NO_ACCESS)
    report = pool_report(svc, pool)
    roster = roster_of(svc.engine, pool.context_key)
    lesson = localized(svc.lesson)  # its text in the instructor's language
    body = svc.renderer.env.get_template(INSTRUCTOR_TEMPLATE).render(
        lesson=lesson,
        pool=pool,
        report=report,
        charts=instructor_charts(lesson, report),
        takeaways=report.takeaways[:TAKEAWAYS_SHOWN],
        roster=roster,
        not_opened=roster.not_opened[:NOT_OPENED_SHOWN] if roster is not None else (),
        grades=(
            grade_doctor.course_grades(svc.engine, pool.context_key)
            if pool.context_key is not None
            else None
        ),
        resend_path=RESEND_PATH,
        resend_token=csrf.form_token(svc.settings.secret_key, _resend_subject(pool)),
        resent=_resent(svc, request, pool),
        lab=lab_report(svc.engine, svc.lesson, _lab_grid(svc), pool.context_key),
        rerun=rerun_report(svc.engine, lesson, pool_recording(svc), pool.context_key),
        records=records_report(svc.engine, lesson, pool.context_key),
    )
    response = HTMLResponse(body)
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


def _export(svc: Services, request: Request) -> Response:
    pool = instructor_pool(svc, request)
    if pool is None:
        return _refused(request, NO_ACCESS)
    recording = pool_recording(svc)
    summaries = learner_summaries(svc.snapshots, recording, pool.context_key)
    roster = roster_of(svc.engine, pool.context_key)
    # Starlette iterates a plain generator in its thread pool, one chunk at a time: the
    # pool's rows are read in batches as the response is sent, never all at once.
    return StreamingResponse(
        csv_chunks(summaries, svc.lesson, roster=roster),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{EXPORT_FILENAME}"',
            "Cache-Control": CACHE_CONTROL,
        },
    )


def _aggregate(svc: Services, request: Request) -> Response:
    pool = instructor_pool(svc, request)
    if pool is None:
        return _refused(request, NO_ACCESS)
    rerun = rerun_report(svc.engine, svc.lesson, pool_recording(svc), pool.context_key)
    response = JSONResponse(aggregate(pool_report(svc, pool), {"rerun": rerun_aggregate(rerun)}))
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


# Resend changed grades: the staff action's path, and what its answer's redirect carries back
# to the page (the counts of passback.ResendReport).
RESEND_PATH = INSTRUCTOR_PATH + "/resend"
RESENT_PARAMETERS = ("resent", "current", "nowhere")
# The counts' signature: a link made elsewhere cannot show made-up counts.
RESENT_SIGNATURE = "sig"
RESEND_FORM_FIELDS = 2


def _resend_subject(pool: Pool) -> str:
    """What the resend form's token is bound to: this course's instructor view."""
    return f"instructor-resend:{pool.context_key}"


def _resent_signature(svc: Services, pool: Pool, counts: tuple[int, int, int]) -> str:
    return csrf.form_token(svc.settings.secret_key, f"resent:{pool.context_key}:{counts}")


def _resent(svc: Services, request: Request, pool: Pool) -> tuple[int, int, int] | None:
    """The counts a resend's redirect carried for this course, when all three are there as
    small numbers signed by this server."""
    said = [request.query_params.get(name, "") for name in RESENT_PARAMETERS]
    if not all(value.isascii() and value.isdigit() and len(value) <= 9 for value in said):
        return None
    resent, current, nowhere = (int(value) for value in said)
    counts = (resent, current, nowhere)
    signature = request.query_params.get(RESENT_SIGNATURE, "")
    expected = _resent_signature(svc, pool, counts)
    if not (signature.isascii() and hmac.compare_digest(signature, expected)):
        return None
    return counts


def _resend(svc: Services, request: Request, form: dict[str, str]) -> Response:
    """Queue again the grades of this course whose platform copy may be stale (never those
    up to date), then back to the page with the counts."""
    pool = instructor_pool(svc, request)
    if pool is None:
        return _refused(request, NO_ACCESS)
    if pool.context_key is None:
        return _refused(
            request,
            "Grades go back only to an LMS course; the learners who came outside any LMS have "
            "none to resend.",
        )
    forged = csrf.refusal(request, form, _resend_subject(pool), svc.settings)
    if forged is not None:
        return _refused(request, forged)
    done = passback.resend_changed(
        svc.engine, pool.context_key, svc.lesson, svc.settings.recording_path
    )
    counts = (done.queued, done.up_to_date, done.unsendable)
    query = "&".join(
        f"{name}={count}" for name, count in zip(RESENT_PARAMETERS, counts, strict=True)
    )
    query += f"&{RESENT_SIGNATURE}={_resent_signature(svc, pool, counts)}"
    redirect = RedirectResponse(f"{INSTRUCTOR_PATH}?{query}#grades-title", status_code=303)
    redirect.headers["Cache-Control"] = CACHE_CONTROL
    return redirect


async def resend(request: Request) -> Response:
    """Resend changed grades (the instructor view's button), for the instructor's course."""
    async with request.form(max_files=0, max_fields=RESEND_FORM_FIELDS) as form:
        fields = {key: value for key, value in form.items() if isinstance(value, str)}
    return await run_in_threadpool(_resend, services(request), request, fields)


def export_csv(request: Request) -> Response:
    """One row per learner of the pool (columns: docs/instructor.md), streamed."""
    return _export(services(request), request)


def aggregate_json(request: Request) -> Response:
    """The pool's figures, as the page shows them, in JSON."""
    return _aggregate(services(request), request)


def instructor_page(request: Request) -> Response:
    """Where one course's learners (or the anonymous pool's) stumble in the lesson."""
    return _instructor_page(services(request), request)


routes = [
    Route(RESEND_PATH, resend, methods=["POST"]),
    Route(INSTRUCTOR_PATH + "/export.csv", export_csv, methods=["GET"]),
    Route(INSTRUCTOR_PATH + "/aggregate.json", aggregate_json, methods=["GET"]),
    Route(INSTRUCTOR_PATH, instructor_page, methods=["GET"]),
]
