// The takeaway saves itself a moment after typing stops, and says whether it is saved.
//
// What was typed and not saved yet is kept for the tab (sessionStorage, as the numbers' drafts
// are), with the saved text it was typed over: a reload or a phone's discarded tab within the
// autosave's moment brings it back, unless the takeaway was saved since (in another tab), when
// the draft is no longer the latest word.
//
// A save refused because another tab or device saved a newer takeaway quotes the newer words
// (#takeaway-newer, above the box). They stay there, and nothing saves by itself, until the
// learner presses Save: an autosave of a half-merged text would replace words not yet read.

import { NETWORK_PROBLEM, announce } from "./announce.js";
import { TAKEAWAY_DRAFT, draftStore, keepTakeawayDraft } from "./kept.js";
import { post } from "./forms.js";
import { swapFragments } from "./regions.js";
import { rememberSaved, takeawayDirty, takeawayParts } from "./takeaway-saved.js";

/** @typedef {import("./takeaway-saved.js").TakeawayParts} TakeawayParts */

const AUTOSAVE_DELAY_MS = 1500; // "a moment after typing stops"

let timer = 0;
// A form whose save travels: one save at a time (the next waits for it).
/** @type {WeakSet<HTMLFormElement>} */
const busy = new WeakSet();

/** @param {string} text @param {boolean} isAlert */
function setTakeawayStatus(text, isAlert) {
  const status = takeawayParts()?.status();
  if (!status) return;
  status.textContent = text;
  status.classList.toggle("alert", Boolean(isAlert));
  if (isAlert) status.setAttribute("role", "alert");
  else status.removeAttribute("role");
}

/** The server's message for a text over the limit; null within it.
 * @param {TakeawayParts} parts @returns {string | null} */
function tooLong(parts) {
  const max = Number(parts.text.dataset.maxChars);
  const length = Array.from(parts.text.value).length;
  // Counts written as the server's message writes them (progress.actions.too_long_message).
  const count = (/** @type {number} */ n) => n.toLocaleString("en-US");
  const message = parts.form.dataset.textTooLong ?? "";
  return length > max ? message.replace("{max}", count(max)).replace("{length}", count(length)) : null;
}

/** The next save's base: the saved takeaway as the answer's status line draws it (data-base),
 * so this tab's saves build on its own last save, and after a refusal on the newer text it
 * was shown. The form's own field changes only here: a status line drawn again by another
 * action (a row played) does not move it past text this box never showed.
 * @param {HTMLFormElement} form @param {unknown} html the answer's takeaway-status fragment */
function takeBase(form, html) {
  if (typeof html !== "string") return;
  const holder = document.createElement("template");
  holder.innerHTML = html;
  const base = holder.content.firstElementChild?.getAttribute("data-base");
  const field = form.elements.namedItem("base");
  if (typeof base === "string" && field instanceof HTMLInputElement) field.value = base;
}

/** The refusal's newer takeaway above the box, while it is shown. @returns {HTMLElement | null} */
function newerShown() {
  const note = document.getElementById("takeaway-newer");
  return note && !note.hidden ? note : null;
}

/** Quotes a refusal's newer takeaway above the box (said at once: role="alert"), or takes it
 * away (`message` null).
 * @param {string | null} message */
function showNewer(message) {
  const note = document.getElementById("takeaway-newer");
  if (!note) return;
  note.textContent = message ?? "";
  note.hidden = message === null;
}

/** Types back a draft kept in this tab, over the text it was typed over. */
export function restoreTakeawayDraft() {
  const parts = takeawayParts();
  const store = draftStore();
  const kept = store?.getItem(TAKEAWAY_DRAFT);
  if (!parts || !store || kept === null || kept === undefined) return;
  store.removeItem(TAKEAWAY_DRAFT);
  let draft;
  try {
    draft = JSON.parse(kept);
  } catch {
    return;
  }
  if (draft?.over !== parts.text.value || typeof draft.text !== "string" || draft.text === parts.text.value) return;
  parts.text.value = draft.text;
  keepTakeawayDraft(); // kept again until it is saved
  onTakeawayInput(); // not saved yet: says so, and saves it a moment later
}

/** What typing in the box does once this module is here (the draft is kept already, within
 * the input event: page.js). */
export function onTakeawayInput() {
  const parts = takeawayParts();
  if (!parts) return;
  const length = Array.from(parts.text.value).length;
  parts.count.textContent = String(length);
  window.clearTimeout(timer);
  if (!takeawayDirty()) return;
  const problem = tooLong(parts);
  if (problem) {
    setTakeawayStatus(problem, true);
    return;
  }
  if (newerShown()) {
    setTakeawayStatus(parts.form.dataset.textMerging ?? "", false);
    return;
  }
  setTakeawayStatus(parts.form.dataset.textUnsaved ?? "", false);
  timer = window.setTimeout(() => saveTakeaway(false), AUTOSAVE_DELAY_MS);
}

/** @param {boolean} byButton the learner pressed Save (the outcome is said, not only shown) */
export async function saveTakeaway(byButton) {
  const parts = takeawayParts();
  window.clearTimeout(timer);
  if (!parts) return;
  if (busy.has(parts.form)) {
    timer = window.setTimeout(() => saveTakeaway(byButton), AUTOSAVE_DELAY_MS);
    return;
  }
  // Nothing saves by itself over newer words on show (the button's save is the learner's).
  if (!byButton && newerShown()) return;
  const sent = parts.text.value;
  const base = parts.form.elements.namedItem("base");
  const baseBefore = base instanceof HTMLInputElement ? base.value : null;
  busy.add(parts.form);
  setTakeawayStatus(parts.form.dataset.textSaving ?? "", false);
  try {
    const { answer } = await post(parts.form);
    takeBase(parts.form, answer.fragments?.["takeaway-status"]);
    if (!answer.ok && base instanceof HTMLInputElement && base.value !== baseBefore) {
      // Refused for a newer takeaway saved elsewhere: its words stay above the box.
      showNewer(answer.message);
      setTakeawayStatus(parts.form.dataset.textMerging ?? "", false);
      return;
    }
    if (answer.ok && byButton) showNewer(null);
    if (answer.ok) rememberSaved(sent);
    if (answer.ok && parts.text.value === sent) draftStore()?.removeItem(TAKEAWAY_DRAFT);
    if (answer.ok && parts.text.value !== sent) {
      // More was typed while this save travelled: that text still needs its own save.
      setTakeawayStatus(parts.form.dataset.textUnsaved ?? "", false);
      timer = window.setTimeout(() => saveTakeaway(false), AUTOSAVE_DELAY_MS);
    } else {
      swapFragments(answer.fragments || {}, null);
    }
    if (!answer.ok && !answer.fragments) setTakeawayStatus(answer.message, true);
    if (byButton && answer.ok) announce(answer.message);
  } catch {
    setTakeawayStatus(NETWORK_PROBLEM, true);
  } finally {
    busy.delete(parts.form);
  }
}
