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
from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from normdive.lesson.content import Lesson
from normdive.lti.platform_json import NotPlatformJson, parsed
from normdive.progress.actions import (
    Action,
    ActionRefused,
    Conflict,
    Invalid,
    check_numbers,
    close_gate,
    commit_prediction,
    lock_reading,
    open_hint,
    play_row,
    predict_row,
    rung_number,
    save_takeaway,
    unknown_row_message,
)
from normdive.progress.events import Event, EventKind
from normdive.progress.history import History
from normdive.progress.state import LessonState
from normdive.recording.reader import RecordingSnapshot
from normdive.store.event_store import storable
from normdive.store.prerequisite import PrerequisiteSource, record_prerequisite_done
from normdive.web.infrastructure.admission import admit_learner
from normdive.web.infrastructure.errors import error_response, wants_json
from normdive.web.infrastructure.flash import flash_value, is_navigation, set_flash
from normdive.web.infrastructure.forms import NOT_A_FORM, form_fields
from normdive.web.infrastructure.identity import (
    COOKIE_NAME,
    attach_cookie,
    is_learner_id,
    learner_from_cookie,
    resolve_learner,
)
from normdive.web.infrastructure.services import Services, services
from normdive.web.security import csrf
from normdive.web.security.ratelimit import throttled
from normdive.web.views.page import Refusal, carry_from
from normdive.web.views.rendering import AGGREGATE_FRAGMENT

# The event to append; None: nothing to append, and the action still succeeded (a hint that
# is already open).
Outcome = Action | None
# The form value naming the row or rung a per-row form's URL names (set by the route, never
# read from the body).
TARGET = "target"
# The refusals of what the learner sent, which a browser without JavaScript is redirected
# past (web.infrastructure.flash), landing at the page's summary of what was refused (page.html).
REDIRECTED_REFUSALS = (409, 422)
SUMMARY_ANCHOR = "error-summary"


@dataclass(frozen=True)
class FormAction:
    """One form of the page: what it does and what it re-renders."""

    name: str  # the form's name in PageView.refusal
    anchor: str  # where a no-JavaScript success lands ("{target}": the row or rung)
    fragments: tuple[str, ...]  # regions the page script swaps after this action
    act: Callable[[LessonState, Lesson, dict[str, str]], Outcome]
    announce: Callable[[LessonState, Lesson, Mapping[str, Any]], str]
    plays: bool = False  # the target row goes into the player
    # Where the form itself is, when a success lands elsewhere (a refusal links back to it).
    form_anchor: str | None = None


def _predict_announcement(state: LessonState, lesson: Lesson, _: Mapping[str, Any]) -> str:
    chosen = next((c.label for c in lesson.predict.choices if c.id == state.prediction), "")
    return f"{lesson.predict.committed_text} {chosen}"


def _as_sentence(text: str) -> str:
    """`text` ending as a sentence does, so that the next one read after it is heard apart
    ("Mean of [1, 2, 3]: Landed. Variance of ...")."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", ":")) else f"{text}."


def _numbers_announcement(state: LessonState, lesson: Lesson, payload: Mapping[str, Any]) -> str:
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


def _reading_announcement(state: LessonState, lesson: Lesson, _p: Mapping[str, Any]) -> str:
    feedback = state.reading.feedback or ""
    return feedback if state.reading.right else f"{lesson.reading.wrong_opening} {feedback}"


def _takeaway_announcement(state: LessonState, lesson: Lesson, _p: Mapping[str, Any]) -> str:
    text = lesson.takeaway
    return text.cleared_text if state.takeaway == "" else text.saved_text


def _row_predict_announcement(state: LessonState, lesson: Lesson, form: Mapping[str, Any]) -> str:
    row = state.ablation.row(str(form.get(TARGET)))
    if row is None or row.prediction_label is None:
        return ""
    return f"{row.label}: {lesson.ablation.committed_text} {row.prediction_label}"


def _row_play_announcement(state: LessonState, _lesson: Lesson, form: Mapping[str, Any]) -> str:
    row = state.ablation.row(str(form.get(TARGET)))
    return f"Playing the {row.label} row." if row is not None else ""


def _hint_announcement(state: LessonState, _lesson: Lesson, form: Mapping[str, Any]) -> str:
    rung = state.hints.rung(int(str(form.get(TARGET))))
    return f"{rung.label}: {rung.text}" if rung is not None and rung.text else ""


PREDICT = FormAction(
    name="predict",
    anchor="try",
    form_anchor="predict",
    fragments=(
        "predict-body",
        "try-lock",
        "eps-control",
        "own-row",
        "numbers",
        "reading",
        "hints-body",
        "gate",
        "ablation-rows",
        "compare-body",
    ),
    act=lambda state, lesson, form: commit_prediction(state, lesson, form.get("choice", "")),
    announce=_predict_announcement,
)
NUMBERS = FormAction(
    name="numbers",
    anchor="numbers-section",
    # The refusal sits beside the check button, under the six fields.
    form_anchor="numbers-alert",
    fragments=("numbers", "hints-body", "gate"),
    act=lambda state, lesson, form: check_numbers(
        state, lesson, {k: v for k, v in form.items() if k in state.fields}
    ),
    announce=_numbers_announcement,
)
READING = FormAction(
    name="reading",
    anchor="reading-section",
    fragments=("reading", "hints-body", "gate", "compare-body"),
    act=lambda state, lesson, form: lock_reading(state, lesson, form.get("choice", "")),
    announce=_reading_announcement,
)
TAKEAWAY = FormAction(
    name="takeaway",
    anchor="takeaway-section",
    fragments=("takeaway-status",),
    act=lambda state, lesson, form: save_takeaway(state, lesson, form.get("text")),
    announce=_takeaway_announcement,
)


ROW_PREDICT = FormAction(
    name="row-predict",
    anchor="row-{target}",
    fragments=("ablation-rows", "hints-body", "gate", "compare-body"),
    act=lambda state, lesson, form: predict_row(
        state, lesson, form[TARGET], form.get("outcome", "")
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
    act=lambda state, lesson, form: play_row(state, lesson, form[TARGET]),
    announce=_row_play_announcement,
    plays=True,
)
HINT = FormAction(
    name="hint",
    anchor="hint-{target}",
    fragments=("hints-body",),
    act=lambda state, lesson, form: open_hint(state, lesson, form[TARGET]),
    announce=_hint_announcement,
)


class _Decider:
    """Decides one form's write from a learner's history, remembering the state before and
    after its last decision (Store.append_decided may call it again after losing a race)."""

    def __init__(
        self,
        svc: Services,
        learner_id: str,
        action: FormAction,
        form: dict[str, str],
        snapshot: RecordingSnapshot,
    ) -> None:
        self.svc, self.learner_id, self.action = svc, learner_id, action
        self.form, self.snapshot = form, snapshot
        self.state: LessonState | None = None
        self.after: LessonState | None = None
        self.outcome: Outcome = None

    def __call__(self, history: History) -> list[Action]:
        """The events to append: the action's, and gate_closed when this write closes the
        gate. Raises Conflict / Invalid (nothing is appended)."""
        svc, recording = self.svc, self.snapshot.status
        self.outcome, self.after = None, None
        self.state = svc.kept_state(self.learner_id, history, recording)
        self.outcome = self.action.act(self.state, svc.lesson, self.form)
        if self.outcome is None:
            self.after = self.state
        else:
            provisional = history.extended([_provisional(self.outcome)], history.last_event_id)
            self.after = svc.state_from(provisional, recording)
        closing = close_gate(self.after, self.snapshot.digest, svc.settings.recording_path.name)
        decided = [self.outcome] if self.outcome is not None else []
        return [*decided, closing] if closing is not None else decided

    def state_after(self, history: History, appended: list[Event]) -> LessonState:
        """The state after the append: the one derived while deciding, unless a gate_closed
        event went with it (then derived again, once per learner)."""
        if self.after is not None and all(e.kind is not EventKind.GATE_CLOSED for e in appended):
            return self.after
        return self.svc.state_from(history, self.snapshot.status)


def _closes_gate(before: LessonState | None, after: LessonState) -> bool:
    """Whether this write met the gate's last condition (said with the write's own words)."""
    return before is not None and not before.gate.closed and after.gate.closed


def _provisional(action: Action) -> Event:
    """An event as it will be stored, to derive the state after it: its payload as the store
    keeps it (event_store.storable), because the fold reads the kind, the payload and the
    order, never the id or the time."""
    kind, payload = action
    return Event(0, "", kind, storable(payload), datetime.now(UTC))


def _perform(
    svc: Services, request: Request, action: FormAction, form: dict[str, str], learner_id: str
) -> Response:
    """The whole write, in one worker thread: for a learner with no events yet, decide first
    and admit them only if the write is accepted; then check the attempts limit, decide and
    append, and render the answer."""
    history = svc.history(learner_id)
    snapshot = svc.recording_snapshot()
    decider = _Decider(svc, learner_id, action, form, snapshot)
    first_refused: ActionRefused | None = None
    if history.last_event_id == 0:  # no event yet: maybe not stored yet either
        # A write refused on an empty history stores nothing, not even the learner (nor takes
        # one of their address's new-learner places): decided here first, then admitted.
        try:
            decider(history)
        except ActionRefused as exc:
            first_refused = exc
        else:
            refused = admit_learner(svc, request, learner_id)
            if refused is not None:
                return refused
    learner = resolve_learner(request, svc.signer)
    recording = snapshot.status
    carry = carry_from(form, svc.lesson)
    # Where a no-JavaScript success lands, and where the form is (a refusal links to it).
    anchor = action.anchor.format(target=form.get(TARGET, ""))
    form_anchor = (action.form_anchor or action.anchor).format(target=form.get(TARGET, ""))
    refusal: Refusal | None = None
    status = 200
    outcome: Outcome = None
    headers: dict[str, str] = {}
    limit = svc.settings.attempts_per_minute
    # Fewer writes than the limit in all, so fewer within any minute: no need to count.
    limited = throttled(svc.engine, learner.id, limit) if history.learner_writes >= limit else None
    if limited is not None:
        state = svc.kept_state(learner.id, history, recording)
        status, refusal = 429, Refusal(action.name, limited.message, form, form_anchor)
        headers["Retry-After"] = str(limited.retry_after_s)
    else:
        # Read, decide and append as one compare-and-append (Store.append_decided): a
        # once-only fact is stored once however many requests race, and the answer is
        # derived from the history the winning append extended.
        try:
            if first_refused is not None:
                raise first_refused
            decided_on, appended = svc.store.append_decided(
                learner.id, decider, history, just_read=True
            )
            history = decided_on.extended(appended, appended[-1].id if appended else 0)
            if appended:
                svc.appended(learner.id, decided_on, history)
            else:
                svc.histories.keep(learner.id, history)
            state = decider.state_after(history, appended)
            # Kept with the History it belongs to: the learner's next request on this worker
            # derives nothing when nothing was appended in between.
            svc.histories.remember(learner.id, history, recording, state)
            outcome = decider.outcome
        except Conflict as exc:
            status, refusal = 409, Refusal(action.name, exc.message, form, form_anchor)
        except Invalid as exc:
            status, refusal = 422, Refusal(action.name, exc.message, form, form_anchor)
        if refusal is not None:
            assert decider.state is not None  # a refusal comes from deciding
            state = decider.state
    # What the announcement reads: the form (its target) and the event's payload (answers).
    said: Mapping[str, Any] = {**form, **(outcome[1] if outcome is not None else {})}
    player_row = form[TARGET] if action.plays and refusal is None else carry.play

    response: Response
    # A browser's own refused submission lands on a page Back and reload can return to: the
    # refusal rides to it in a flash cookie (web.infrastructure.flash). A refusal of the request
    # itself (429) keeps its status and Retry-After.
    flash = (
        flash_value(refusal, learner.id, svc.settings.secret_key)
        if refusal is not None
        and status in REDIRECTED_REFUSALS
        and not wants_json(request)
        and is_navigation(request)
        else None
    )
    if refusal is None and not wants_json(request):
        location = dataclasses.replace(carry, play=player_row).location(anchor)
        response = RedirectResponse(location, status_code=303)
    elif flash is not None:
        response = RedirectResponse(carry.location(SUMMARY_ANCHOR), status_code=303)
        set_flash(response, flash, learner, svc.settings)
    else:
        view = svc.page_view(
            learner.id,
            state,
            recording,
            eps_on=not carry.eps_off,
            own_row_text=carry.row or None,
            player_row=player_row,
            refusal=refusal,
            # JSON answers carry only the action's regions; one of them may show the aggregate.
            aggregate=not wants_json(request) or AGGREGATE_FRAGMENT in action.fragments,
        )
        message = refusal.message if refusal else action.announce(state, svc.lesson, said)
        if refusal is None and _closes_gate(decider.state, state):
            message = f"{_as_sentence(message)} {svc.lesson.gate.met}".strip()
        if wants_json(request):
            fragments = svc.renderer.fragments(action.fragments, view)
            body = {"ok": refusal is None, "message": message, "fragments": fragments}
            response = JSONResponse(body, status, headers=headers)
        elif state.prerequisite_done:
            response = HTMLResponse(svc.renderer.page(view), status, headers=headers)
        else:
            response = HTMLResponse(svc.renderer.locked(view, message), status, headers=headers)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


async def _run(request: Request, action: FormAction, target: str | None = None) -> Response:
    svc = services(request)
    form = await form_fields(request)
    if form is None:
        return error_response(request, 415, NOT_A_FORM)
    vouched = learner_from_cookie(request.cookies.get(COOKIE_NAME), svc.signer)
    forged = csrf.refusal(request, form, vouched, svc.settings)
    if forged is not None or vouched is None:
        return error_response(request, 403, forged or csrf.NO_LEARNER)
    form.pop(csrf.FIELD, None)
    form.pop(TARGET, None)  # only the URL names the row or rung
    if target is not None:
        form[TARGET] = target
    return await run_in_threadpool(_perform, svc, request, action, form, vouched)


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
    return _unknown_row(request, key) or await _run(request, ROW_PREDICT, key)


async def row_play(request: Request) -> Response:
    """Play (or replay) a row, once every row has its prediction. Each play is recorded."""
    key = request.path_params["key"]
    return _unknown_row(request, key) or await _run(request, ROW_PLAY, key)


async def hint(request: Request) -> Response:
    """Open a hint rung (in order, once the evaluated runs reach its threshold)."""
    rung = request.path_params["rung"]
    try:
        number = rung_number(rung, len(services(request).lesson.hints.rungs))
    except Invalid as unknown:
        return error_response(request, 404, unknown.message)
    return await _run(request, HINT, str(number))


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
