// Forms marked data-enhance post with fetch and `Accept: application/json`; the server answers
// with the regions to replace (regions.js), and the outcome is announced in the polite live
// region. One tap sends one request.

import { NETWORK_PROBLEM, announce } from "./announce.js";
import { withPageLocale } from "./language.js";
import { gateClosed, showPlayedRow } from "./played-row.js";
import { holdOnScreen, swapFragments } from "./regions.js";

/** @typedef {{ ok: boolean, message: string, fragments?: Record<string, string> }} Answer */

// A phone's double tap is two taps within about 300 ms; a fast server answers the first before
// the second lands. A form's second submission this soon after its answer is the same tap.
const DOUBLE_TAP_MS = 500;

// The learner's form token (the server refuses a post without it: web/security/csrf.py). Every
// form carries it as a hidden field too; the header also covers a form swapped in without one.
function csrfToken() {
  return /** @type {HTMLMetaElement | null} */ (document.querySelector('meta[name="csrf-token"]'))?.content ?? "";
}

/** Posts a form as the server's JSON answer asks.
 * @param {HTMLFormElement} form @returns {Promise<{ status: number, answer: Answer }>} */
export async function post(form) {
  const response = await fetch(form.action, {
    method: "POST",
    body: new URLSearchParams(/** @type {any} */ (new FormData(form))),
    headers: withPageLocale({ Accept: "application/json", "X-CSRF-Token": csrfToken() }),
    credentials: "same-origin",
  });
  return { status: response.status, answer: await response.json() };
}

// One tap, one request. A form is known by its address across redraws (its answer replaces the
// element): while its request travels, and for DOUBLE_TAP_MS after the answer when what the
// learner entered is unchanged, a submission of it sends nothing (a second check, a second
// play counted). The hidden fields (the token, what the URL carries) are not the learner's.
/** @type {Set<string>} form.action */
const sending = new Set();
/** @type {Map<string, { at: number, entered: string }>} form.action -> when answered, what was sent */
const answered = new Map();

/** @param {HTMLFormElement} form */
function entered(form) {
  const hidden = new Set([...form.querySelectorAll("input[type=hidden]")].map((input) => /** @type {HTMLInputElement} */ (input).name));
  return JSON.stringify([...new FormData(form)].filter(([name]) => !hidden.has(name)));
}

/** @param {HTMLFormElement} form */
function isSecondTap(form) {
  if (sending.has(form.action)) return true;
  const last = answered.get(form.action);
  return last !== undefined && performance.now() - last.at < DOUBLE_TAP_MS && last.entered === entered(form);
}

// A refusal that re-draws no region (403: another origin or a stale session; 413) is shown as
// text at the end of its form; role="alert" has it read out as well.
/** @param {HTMLFormElement} form @param {string} message */
function showRefusal(form, message) {
  let note = /** @type {HTMLElement | null} */ (form.querySelector("[data-refusal]"));
  if (!note) {
    note = document.createElement("p");
    note.className = "alert";
    note.setAttribute("role", "alert");
    note.dataset.refusal = "";
    form.append(note);
  }
  note.textContent = message;
}

/** Posts a form marked data-enhance and swaps in the regions its answer re-draws.
 * @param {HTMLFormElement} form
 * @param {string | undefined} focusId the control to keep the focus on
 * @param {Element | null} submitter the button pressed (or the form's first) */
export async function submitEnhanced(form, focusId, submitter) {
  if (isSecondTap(form)) return;
  const key = form.action;
  const sent = entered(form);
  sending.add(key);
  form.setAttribute("aria-busy", "true");
  // In flight: the button looks and says it is busy (not `disabled`, which would drop focus).
  submitter?.setAttribute("aria-disabled", "true");
  const played = form.dataset.play;
  const gateWasClosed = gateClosed();
  try {
    const { answer } = await post(form);
    // A learner who moved on while the answer travelled (to the takeaway, say) stays there:
    // neither focus nor scroll is taken back to the form.
    const active = document.activeElement;
    const stillHere = !active || active === document.body || form.contains(active);
    const keepId = stillHere ? focusId : null;
    const putBack = holdOnScreen(keepId);
    swapFragments(answer.fragments || {}, keepId, answer.ok && form.id === "numbers");
    // A refusal arrives as a role="alert" message beside the form; success is announced here,
    // and shown beside the button of a form that has room for it (data-outcome).
    if (answer.ok) {
      announce(answer.message);
      const outcome = form.id ? document.getElementById(form.id)?.querySelector("[data-outcome]") : null;
      if (outcome) outcome.textContent = answer.message;
    }
    else if (!answer.fragments) showRefusal(form, answer.message);
    putBack();
    // The gate closing is in the server's message; a played row's figures, said once its curves
    // are drawn, take the live region over, so they say it again after themselves.
    const closing = !gateWasClosed && gateClosed() ? document.getElementById("gate-verdict")?.textContent?.trim() : "";
    if (answer.ok && played) showPlayedRow(played, true, closing);
  } catch {
    announce(NETWORK_PROBLEM);
  } finally {
    sending.delete(key);
    answered.set(key, { at: performance.now(), entered: sent });
    form.removeAttribute("aria-busy");
    submitter?.removeAttribute("aria-disabled");
  }
}
