"""Routes that write: the page's forms (the opening prediction, the six numbers, the reading,
the takeaway, and the ablation's row predictions, plays and hints) and the host platform's
prerequisite report.

One flow for every form, with or without JavaScript. The progress layer decides (returning
the event to append, or raising Conflict / Invalid); this module only translates:
- without JavaScript, success is a 303 back to the section, keeping what the URL held (the
  switch, the learner's own row, the row in the player: view.Carry, carried by every form),
  and a refusal the browser itself submitted (Fetch Metadata says `navigate`) is a 303 to the
  page too, the refusal carried in a signed, short-lived cookie and drawn there once
  (web.infrastructure.flash: the message beside the form and what the learner typed), so that Back
  and reload never post again; any other client gets the page re-rendered with the refusal's own
  status (409 / 422), as does a refusal too large for the cookie;
- with JavaScript (`Accept: application/json`), the same statuses with
  {"ok", "message", "fragments"}: the page's regions re-rendered by the same macros.
A row or hint the URL names that the lesson does not have is a 404 with a message.

Before any of that, a body that is not a form is a 415, and every form post passes
web.security: a foreign Origin or a missing or wrong form token is a 403 (nothing read,
nothing written); a learner's first write the lesson accepts stores them (a refused one stores
nothing), unless their address started too many learners lately (429 with Retry-After); and a
learner past the writes a minute allows gets a 429 with Retry-After, shown beside the form like
any other refusal.
"""

from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.progress.actions import (
    Action,
    Invalid,
    check_numbers,
    commit_prediction,
    lock_reading,
    open_hint,
    play_row,
    predict_row,
    rung_number,
    save_takeaway,
    unknown_row_message,
)
from normdive.progress.state import LessonState
from normdive.store.prerequisite import PrerequisiteSource, record_prerequisite_done
from normdive.web.infrastructure.admission import vouched_learner
from normdive.web.infrastructure.errors import error_response, wants_json
from normdive.web.infrastructure.flash import flash_value, is_navigation, set_flash
from normdive.web.infrastructure.forms import vouched_form
from normdive.web.infrastructure.identity import (
    Learner,
    attach_cookie,
    is_learner_id,
)
from normdive.web.infrastructure.learners import Refused, Written, refusal_status, retry_headers
from normdive.web.infrastructure.services import Services, services
from normdive.web.security.proxy import client_address
from normdive.web.security.ratelimit import TooManyLearners
from normdive.web.views.page import Carry, Refusal, carry_from
from normdive.web.views.rendering import AGGREGATE_FRAGMENT, FRAGMENT_IDS

# The event to append; None: nothing to append, and the action still succeeded (a hint that
# is already open).
Outcome = Action | None
# The value a refusal of a per-row or per-rung form carries naming its row or rung, beside what
# the learner sent (PageView.row_refusal draws it by that row; the flash cookie carries it).
# Only the URL names the row or rung: a body field of this name is dropped.
TARGET_VALUE = "target"
# The region that lists the lab's runs once the gate has closed: an answer that re-renders
# none of it does not read them.
LAB_FRAGMENT = "gate"
# The refusals of what the learner sent, which a browser without JavaScript is redirected
# past (web.infrastructure.flash), landing at the page's summary of what was refused (page.html).
REDIRECTED_REFUSALS = (409, 422)
SUMMARY_ANCHOR = "error-summary"


@dataclass(frozen=True)
class Target:
    """What a per-row or per-rung form's URL names (set by the route, never read from the
    body): a row the lesson has, or a hint rung from 1; neither for the page's other forms."""

    row: str = ""
    rung: int = 0

    @property
    def anchor(self) -> str:
        """The row key or rung number as the page's ids hold it ("row-{target}")."""
        return self.row or (str(self.rung) if self.rung else "")


NO_TARGET = Target()


@dataclass(frozen=True)
class FormAction:
    """One form of the page: what it does and what it re-renders."""

    name: str  # the form's name in PageView.refusal
    anchor: str  # where a no-JavaScript success lands ("{target}": the row or rung)
    fragments: tuple[str, ...]  # regions the page script swaps after this action
    act: Callable[[LessonState, Lesson, Mapping[str, str], Target], Outcome]
    # What a success announces, from the state after it, the target and the event's payload.
    announce: Callable[[LessonState, Lesson, Target, Mapping[str, Any]], str]
    plays: bool = False  # the target row goes into the player
    # Where the form itself is, when a success lands elsewhere (a refusal links back to it).
    form_anchor: str | None = None


def _predict_announcement(
    state: LessonState, lesson: Lesson, _t: Target, _p: Mapping[str, Any]
) -> str:
    chosen = next((c.label for c in lesson.predict.choices if c.id == state.prediction), "")
    return f"{lesson.predict.committed_text} {chosen}"


def _as_sentence(text: str) -> str:
    """`text` ending as a sentence does, so that the next one read after it is heard apart
    ("Mean of [1, 2, 3]: Landed. Variance of ...")."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", ":")) else f"{text}."


def _numbers_announcement(
    state: LessonState, lesson: Lesson, _t: Target, payload: Mapping[str, Any]
) -> str:
    parts = []
    for answer in payload.get("answers", []):
        number_field = lesson.field(str(answer.get("field")))
        field_state = state.fields.get(str(answer.get("field")))
        if number_field is None or field_state is None:
            continue
        said = lesson.numbers.landed_text if field_state.landed else (field_state.message or "")
        if not field_state.landed and field_state.last_verdict == "format_error":
            said = f"{lesson.numbers.not_checked_text} {said}"
        parts.append(_as_sentence(f"{number_field.label}: {said}"))
    if parts and state.gate.numbers_landed == state.gate.numbers_total:
        parts.append(lesson.numbers.all_landed_text)  # this check landed the last of them
    return " ".join(parts)


def _reading_announcement(
    state: LessonState, lesson: Lesson, _t: Target, _p: Mapping[str, Any]
) -> str:
    feedback = state.reading.feedback or ""
    return feedback if state.reading.right else f"{lesson.reading.wrong_opening} {feedback}"


def _takeaway_announcement(
    state: LessonState, lesson: Lesson, _t: Target, _p: Mapping[str, Any]
) -> str:
    text = lesson.takeaway
    return text.cleared_text if state.takeaway == "" else text.saved_text


def _row_predict_announcement(
    state: LessonState, lesson: Lesson, target: Target, _p: Mapping[str, Any]
) -> str:
    row = state.ablation.row(target.row)
    if row is None or row.prediction_label is None:
        return ""
    return f"{row.label}: {lesson.ablation.committed_text} {row.prediction_label}"


def _row_play_announcement(
    state: LessonState, lesson: Lesson, target: Target, _p: Mapping[str, Any]
) -> str:
    row = state.ablation.row(target.row)
    return lesson.ablation.playing_text.format(row=row.label) if row is not None else ""


def _hint_announcement(
    state: LessonState, _lesson: Lesson, target: Target, _p: Mapping[str, Any]
) -> str:
    rung = state.hints.rung(target.rung)
    return f"{rung.label}: {rung.text}" if rung is not None and rung.text else ""


PREDICT = FormAction(
    name="predict",
    anchor="try",
    form_anchor="predict",
    # The opening prediction unlocks the rest of the lesson: every region redraws but the
    # ones that only playing a row or saving the takeaway changes.
    fragments=tuple(f for f in FRAGMENT_IDS if f not in ("player", "gradients", "takeaway-status")),
    act=lambda state, lesson, form, _: commit_prediction(state, lesson, form.get("choice", "")),
    announce=_predict_announcement,
)
NUMBERS = FormAction(
    name="numbers",
    anchor="numbers-section",
    # The refusal sits beside the check button, under the six fields.
    form_anchor="numbers-alert",
    fragments=("numbers", "hints-body", "gate"),
    act=lambda state, lesson, form, _: check_numbers(
        state, lesson, {k: v for k, v in form.items() if k in state.fields}
    ),
    announce=_numbers_announcement,
)
READING = FormAction(
    name="reading",
    anchor="reading-section",
    fragments=("reading", "hints-body", "gate", "compare-body"),
    act=lambda state, lesson, form, _: lock_reading(state, lesson, form.get("choice", "")),
    announce=_reading_announcement,
)
TAKEAWAY = FormAction(
    name="takeaway",
    anchor="takeaway-section",
    fragments=("takeaway-status",),
    act=lambda state, lesson, form, _: save_takeaway(
        state, lesson, form.get("text"), form.get("base")
    ),
    announce=_takeaway_announcement,
)


ROW_PREDICT = FormAction(
    name="row-predict",
    anchor="row-{target}",
    fragments=("ablation-rows", "hints-body", "gate", "compare-body"),
    act=lambda state, lesson, form, target: predict_row(
        state, lesson, target.row, form.get("outcome", "")
    ),
    announce=_row_predict_announcement,
)
ROW_PLAY = FormAction(
    name="row-play",
    anchor="player",
    form_anchor="row-{target}",
    fragments=(
        "ablation-rows",
        "player",
        "gradients",
        "hints-body",
        "gate",
        "compare-body",
        "takeaway-status",
    ),
    act=lambda state, lesson, _form, target: play_row(state, lesson, target.row),
    announce=_row_play_announcement,
    plays=True,
)
HINT = FormAction(
    name="hint",
    anchor="hint-{target}",
    fragments=("hints-body",),
    act=lambda state, lesson, _form, target: open_hint(state, lesson, target.rung),
    announce=_hint_announcement,
)


@dataclass(frozen=True)
class _Post:
    """One form post: its fields (the form token taken out) and what its URL names."""

    fields: dict[str, str]
    target: Target


def _write(
    svc: Services, request: Request, action: FormAction, post: _Post, learner_id: str
) -> Response:
    """The whole write, in one worker thread: one service call (Services.write: admitted,
    throttled, decided and appended), then the answer. What it refuses or says is in the
    request's language (the lesson's text in it)."""
    lesson = localized(svc.lesson)
    written = svc.write(
        learner_id,
        lambda state: action.act(state, lesson, post.fields, post.target),
        address=client_address(request),
    )
    if isinstance(written.refused, TooManyLearners):
        headers = retry_headers(written.refused)
        return error_response(request, 429, written.refused.message, headers)
    learner = vouched_learner(request, learner_id)
    response = _answer(svc, request, action, post, learner, written)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


def _answer(
    svc: Services,
    request: Request,
    action: FormAction,
    post: _Post,
    learner: Learner,
    written: Written,
) -> Response:
    """Without JavaScript, a success is a 303 back to the section; a refusal the browser
    itself submitted, a 303 to the page's summary with the refusal in a flash cookie. Any
    other answer is rendered (_rendered)."""
    carry = carry_from(post.fields, svc.lesson)
    refusal = _refusal(action, post, written.refused)
    if refusal is None and not wants_json(request):
        anchor = action.anchor.format(target=post.target.anchor)
        played = post.target.row if action.plays else carry.play
        location = dataclasses.replace(carry, play=played).location(anchor)
        return RedirectResponse(location, status_code=303)
    # A browser's own refused submission lands on a page Back and reload can return to: the
    # refusal rides to it in a flash cookie (web.infrastructure.flash). A refusal of the
    # request itself (429) keeps its status and Retry-After.
    flash = (
        flash_value(refusal, learner.id, svc.settings.secret_key)
        if refusal is not None
        and written.refused is not None
        and refusal_status(written.refused) in REDIRECTED_REFUSALS
        and not wants_json(request)
        and is_navigation(request)
        else None
    )
    if flash is None:
        as_json = wants_json(request)
        return _rendered(svc, learner.id, as_json, action, post, written, refusal, carry)
    response = RedirectResponse(carry.location(SUMMARY_ANCHOR), status_code=303)
    set_flash(response, flash, learner, svc.settings)
    return response


def _refusal(action: FormAction, post: _Post, refused: Refused | None) -> Refusal | None:
    """The refusal as the page shows it beside the form, with what the learner sent."""
    if refused is None:
        return None
    target = post.target.anchor
    form_anchor = (action.form_anchor or action.anchor).format(target=target)
    values = {**post.fields, TARGET_VALUE: target} if target else post.fields
    return Refusal(action.name, refused.message, values, form_anchor)


def _rendered(
    svc: Services,
    learner_id: str,
    as_json: bool,
    action: FormAction,
    post: _Post,
    written: Written,
    refusal: Refusal | None,
    carry: Carry,
) -> Response:
    """The answer drawn from the state after the write: the action's regions as JSON (the
    page script), else the page (or, while 8.5 is not done, the page saying so)."""
    state = written.state
    view = svc.page_view(
        learner_id,
        state,
        written.status,
        eps_on=not carry.eps_off,
        own_row_text=carry.row or None,
        player_row=post.target.row if action.plays and refusal is None else carry.play,
        refusal=refusal,
        # JSON answers carry only the action's regions: what none of them shows is not read.
        aggregate=not as_json or AGGREGATE_FRAGMENT in action.fragments,
        lab=not as_json or LAB_FRAGMENT in action.fragments,
    )
    message = refusal.message if refusal is not None else _announced(svc, action, post, written)
    status = refusal_status(written.refused) if written.refused is not None else 200
    headers = retry_headers(written.refused)
    if as_json:
        fragments = svc.renderer.fragments(action.fragments, view)
        body = {"ok": refusal is None, "message": message, "fragments": fragments}
        return JSONResponse(body, status, headers=headers)
    if state.prerequisite_done:
        return HTMLResponse(svc.renderer.page(view), status, headers=headers)
    return HTMLResponse(svc.renderer.locked(view, message), status, headers=headers)


def _announced(svc: Services, action: FormAction, post: _Post, written: Written) -> str:
    """What a success says: the action's announcement, and the gate's when it closed it."""
    payload = written.outcome[1] if written.outcome is not None else {}
    lesson = localized(svc.lesson)  # the request's language
    message = action.announce(written.state, lesson, post.target, payload)
    if written.closed_gate:
        message = f"{_as_sentence(message)} {lesson.gate.met}".strip()
    return message


async def _run(request: Request, action: FormAction, target: Target = NO_TARGET) -> Response:
    """Every form's checks before its write: a form body (415), the origin and the form
    token (403); then the write, in a worker thread."""
    svc = services(request)
    checked = await vouched_form(request, svc.signer, svc.settings)
    if isinstance(checked, Response):
        return checked
    form = checked.fields
    form.pop(TARGET_VALUE, None)
    post = _Post(form, target)
    return await run_in_threadpool(_write, svc, request, action, post, checked.learner_id)


def _unknown_row(request: Request, key: str) -> Response | None:
    if services(request).lesson.row(key) is not None:
        return None
    return error_response(request, 404, unknown_row_message(key))


async def predict(request: Request) -> Response:
    """Commit the opening prediction (once; it never changes)."""
    return await _run(request, PREDICT)


async def numbers(request: Request) -> Response:
    """Check the six numbers (fields named by the lesson's field ids)."""
    return await _run(request, NUMBERS)


async def reading(request: Request) -> Response:
    """Lock a reading of the epsilon."""
    return await _run(request, READING)


async def takeaway(request: Request) -> Response:
    """Save the takeaway (button or autosave)."""
    return await _run(request, TAKEAWAY)


async def row_predict(request: Request) -> Response:
    """Commit one row's predicted outcome (form field `outcome`); once, never changed."""
    key = request.path_params["key"]
    return _unknown_row(request, key) or await _run(request, ROW_PREDICT, Target(row=key))


async def row_play(request: Request) -> Response:
    """Play (or replay) a row, once every row has its prediction. Each play is recorded."""
    key = request.path_params["key"]
    return _unknown_row(request, key) or await _run(request, ROW_PLAY, Target(row=key))


async def hint(request: Request) -> Response:
    """Open a hint rung (in order, once the evaluated runs reach its threshold)."""
    rung = request.path_params["rung"]
    try:
        number = rung_number(rung, len(services(request).lesson.hints.rungs))
    except Invalid as unknown:
        return error_response(request, 404, unknown.message)
    return await _run(request, HINT, Target(rung=number))


# --- the host platform reports that lesson 8.5 is done ---------------------------------------


def _json_message(ok: bool, message: str, status: int, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"ok": ok, "message": message, **extra}, status, headers=headers)


def _bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _record_prerequisite(svc: Services, learner_id: str) -> JSONResponse:
    # The id was checked above; a learner not stored yet (a locked page takes no write) is
    # stored by the report.
    already_done = record_prerequisite_done(svc.store, learner_id, PrerequisiteSource.HOST)
    prerequisite = svc.lesson.prerequisite
    if already_done:
        message = f"{prerequisite.id} was already recorded as done for {learner_id}."
        return _json_message(True, message, 200, already_done=True)
    message = f"Recorded: {prerequisite.id} is done for {learner_id}."
    return _json_message(True, message, 200, already_done=False)


async def prerequisite_done(request: Request) -> Response:
    """The host platform says a learner finished 8.5: JSON {"learner_id": "..."} with
    `Authorization: Bearer <host token>`."""
    svc = services(request)
    expected = svc.settings.host_token
    if expected is None:
        return _json_message(
            False, "This server accepts no prerequisite reports: it has no host token set.", 503
        )
    given = _bearer_token(request)
    if given is None:
        return _json_message(False, "Send the host token as Authorization: Bearer <token>.", 401)
    if not hmac.compare_digest(given.encode(), expected.get_secret_value().encode()):
        return _json_message(False, "That host token is not the one this server expects.", 401)
    try:
        # The parser every JSON from outside goes through: whatever the body holds (nesting
        # thousands deep, a number of more digits than Python converts, bytes not UTF-8), it
        # is NotPlatformJson, so the report is refused below like any other malformed body.
        body = parsed(await request.body())
    except NotPlatformJson:
        body = None
    learner_id = body.get("learner_id") if isinstance(body, dict) else None
    if not isinstance(learner_id, str) or not is_learner_id(learner_id):
        return _json_message(
            False,
            'Send a JSON object {"learner_id": "..."} with a 32-character hex learner id.',
            422,
        )
    return await run_in_threadpool(_record_prerequisite, svc, learner_id)


routes = [
    Route("/predict", predict, methods=["POST"]),
    Route("/numbers", numbers, methods=["POST"]),
    Route("/reading", reading, methods=["POST"]),
    Route("/takeaway", takeaway, methods=["POST"]),
    Route("/rows/{key}/predict", row_predict, methods=["POST"]),
    Route("/rows/{key}/play", row_play, methods=["POST"]),
    Route("/hints/{rung}", hint, methods=["POST"]),
    Route("/api/prerequisite", prerequisite_done, methods=["POST"]),
]
