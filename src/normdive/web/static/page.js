// The lesson page's behaviour on top of a page that already works without it.
//
// - The epsilon switch repaints every computed number at once, in this browser (layernorm.js is
//   the twin of the server's numeric code, so the numbers are the same ones the server shows).
// - "Try your own row" computes as the learner types.
// - Forms marked data-enhance post with fetch and `Accept: application/json`; the server answers
//   with the regions to replace, drawn by the same templates as the full page. Focus stays on the
//   control the learner used and the outcome is announced in a polite live region.
// - The takeaway saves itself a moment after typing stops and warns before leaving unsaved text.
// - Numbers typed and not checked yet are kept in this tab (sessionStorage) and typed back in
//   after a reload, until a check or a landing makes them the server's.
// - Playing a row posts like any form, then player.js (loaded only now) draws the row's curves,
//   growing over a few seconds (at once under prefers-reduced-motion); the row's final figures
//   show when the curves are complete. A reload shows the same row again, without animation.
// - The panel "Does it hold at other depths?" (once the gate has closed) costs nothing until
//   it opens: then sweep.js loads and fetches its figures.
// - A table that fits its column is no Tab stop; one that scrolls sideways is (scroll-regions.js).
// - Hidden inputs carry the switch, the learner's own row and the row in the player in every
//   form, as the URL does, so a page without JavaScript keeps them across a POST.
//
// Elements are found through event delegation, so regions swapped in need no re-binding.

import {
  formatInputRow, formatNumber, formatRow, layerNormSteps, parseRow, varianceTooSmallToShow,
} from "./layernorm.js";

const AUTOSAVE_DELAY_MS = 1500; // "a moment after typing stops"
const OWN_ROW_PROBLEM_DELAY_MS = 600; // a pause in typing, before a typed row's problem is said
// A phone's double tap is two taps within about 300 ms; a fast server answers the first before
// the second lands. A form's second submission this soon after its answer is the same tap.
const DOUBLE_TAP_MS = 500;
const NETWORK_PROBLEM = "The server could not be reached, so nothing was saved. Try again.";
const CURVES_PROBLEM = "The recorded curves could not be loaded just now; the table holds the same figures.";

// ---- live numbers ----------------------------------------------------------------------------

function epsSwitch() {
  return document.getElementById("eps-switch");
}

// The lesson's epsilon, as the server writes it on <main data-eps> (content/d9.toml).
function lessonEps() {
  return document.getElementById("main").dataset.eps;
}

function epsState() {
  const control = epsSwitch();
  const on = control ? control.checked : true;
  const onText = lessonEps();
  return { on, value: on ? Number(onText) : 0, text: on ? onText : "0" };
}

// The switch must repaint within a frame on a slow phone (bench/phone.py), so the work per
// flip is kept to writing what differs:
// - each row's texts are computed once per eps (rowTexts), and the other eps's are computed
//   while the page is idle after loading, before the learner can reach the switch;
// - the elements to write are found once (paintTargets) and again only after a region of the
//   page was replaced (forgetTargets);
// - a text is written only when it changes: most read the same with eps on and off (the mean
//   and the variance always do), and every write costs a layout of its line.
const MAX_CACHED_TEXTS = 200; // rows typed by the learner come and go; the page's stay few
const textsByRow = new Map();
let targets = null;

function otherEps(eps) {
  const onText = lessonEps();
  return eps.on ? { on: false, value: 0, text: "0" } : { on: true, value: Number(onText), text: onText };
}

function rowTexts(rowData, eps) {
  const key = `${eps.text}|${rowData}`;
  let texts = textsByRow.get(key);
  if (texts === undefined) {
    if (textsByRow.size >= MAX_CACHED_TEXTS) textsByRow.clear();
    const steps = layerNormSteps(JSON.parse(rowData), eps.text); // exact: the decimals' text
    texts = {
      mean: formatNumber(steps.mean),
      variance: formatNumber(steps.variance),
      denominator: formatNumber(steps.denominator),
      normalised: formatRow(steps.normalised),
      eps: eps.text,
      varianceHidden: varianceTooSmallToShow(steps), // no slot: the note under the steps
    };
    textsByRow.set(key, texts);
  }
  return texts;
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function paintTargets() {
  if (targets === null) {
    const rows = [...document.querySelectorAll("[data-row]")].filter((element) => !element.closest("template"));
    targets = {
      eps: [...document.querySelectorAll('[data-ln="eps"]')],
      rows: rows.map((element) => ({ element, slots: [...element.querySelectorAll("[data-ln]")] })),
      sentences: [...document.querySelectorAll("[data-eps-sentence]")],
      fields: [...document.querySelectorAll("[data-eps-field]")],
    };
  }
  return targets;
}

function forgetTargets() {
  targets = null;
}

function paintRow(element, eps, slots = element.querySelectorAll("[data-ln]")) {
  const texts = rowTexts(element.dataset.row, eps);
  for (const slot of slots) {
    const text = texts[slot.dataset.ln];
    if (text !== undefined) setText(slot, text);
  }
}

function repaint() {
  const eps = epsState();
  const found = paintTargets();
  for (const slot of found.eps) setText(slot, eps.text);
  for (const { element, slots } of found.rows) paintRow(element, eps, slots);
  for (const sentence of found.sentences) {
    setText(sentence, eps.on ? sentence.dataset.on : sentence.dataset.off);
  }
  for (const field of found.fields) field.value = eps.on ? "on" : "off";
}

function prepareOtherEps() {
  const other = otherEps(epsState());
  for (const { element } of paintTargets().rows) rowTexts(element.dataset.row, other);
}

// history.replaceState is a synchronous round trip to the browser process, several
// milliseconds on a phone (bench/RESULTS.md, "A fast page on a slow phone"): the URL follows
// once the page has painted what changed, and the changes of one frame make one call.
const urlChanges = new Map();

function rememberInUrl(name, value) {
  if (urlChanges.size === 0) window.requestAnimationFrame(() => window.setTimeout(writeUrl, 0));
  urlChanges.set(name, value);
}

function writeUrl() {
  const url = new URL(window.location.href);
  for (const [name, value] of urlChanges) {
    if (value === null) url.searchParams.delete(name);
    else url.searchParams.set(name, value);
  }
  urlChanges.clear();
  window.history.replaceState(window.history.state, "", url);
}

let ownRowProblemTimer = 0;

function showOwnRow() {
  const input = document.getElementById("own-row-input");
  const message = document.getElementById("own-row-message");
  const target = document.getElementById("own-row-steps");
  const template = document.getElementById("row-steps-template");
  if (!input || !message || !target || !template) return;
  forgetTargets(); // the row's steps below are replaced
  const text = input.value;
  rememberInUrl("row", text.trim() ? text : null);
  for (const field of document.querySelectorAll("[data-row-field]")) field.value = text.trim() ? text : "";
  window.clearTimeout(ownRowProblemTimer);
  if (!text.trim()) {
    message.textContent = "";
    input.removeAttribute("aria-invalid");
    target.replaceChildren();
    return;
  }
  const parsed = parseRow(text);
  if (!Array.isArray(parsed)) {
    target.replaceChildren();
    message.textContent = "";
    input.removeAttribute("aria-invalid");
    // Half-typed ("1e", "0.") is not wrong yet: the problem is said once typing pauses, so
    // that it does not flash, and is not read out, at every key.
    ownRowProblemTimer = window.setTimeout(() => {
      message.textContent = parsed.message;
      input.setAttribute("aria-invalid", "true");
    }, OWN_ROW_PROBLEM_DELAY_MS);
    return;
  }
  message.textContent = "";
  input.removeAttribute("aria-invalid");
  const steps = template.content.firstElementChild.cloneNode(true);
  steps.dataset.row = JSON.stringify(parsed);
  steps.querySelector('[data-ln="input"]').textContent = formatInputRow(parsed);
  const eps = epsState();
  paintRow(steps, eps);
  // The variance does not depend on the switch, so neither does this note.
  steps.querySelector("[data-variance-hidden]").hidden = !rowTexts(steps.dataset.row, eps).varianceHidden;
  target.replaceChildren(steps);
  // A valid row is said, as a problem is, once typing pauses (not at every key).
  ownRowProblemTimer = window.setTimeout(() => announce(spokenSteps(steps)), OWN_ROW_PROBLEM_DELAY_MS);
}

// A row's steps as sentences, in the order shown ("Row [1, 2, 3]. Mean: 2. ..."); what is
// hidden stays unsaid.
function spokenSteps(steps) {
  const lines = steps.innerText.split("\n").map((line) => line.replace(/\s+/g, " ").trim());
  return lines.filter(Boolean).map((line) => (/[.!?:]$/.test(line) ? line : `${line}.`)).join(" ");
}

// ---- announcing and swapping -----------------------------------------------------------------

function announce(text) {
  const region = document.getElementById("announcer");
  if (!region || !text) return;
  region.textContent = "";
  // A fresh text node a moment later is announced even when it repeats the last message.
  window.setTimeout(() => {
    region.textContent = text;
  }, 50);
}

// :disabled also matches a control inside a disabled fieldset (a locked reading's radios),
// which `disabled` does not say.
function isFocusable(element) {
  return element && !element.matches(":disabled") && element.getClientRects().length > 0;
}

// `checked`: the server took a check of the six numbers (not refused it), so what the fields
// show now is its drawing of them, and no typed draft is still the learner's alone.
function swapFragments(fragments, focusId, checked = false) {
  const keepDefault = !takeawayDirty();
  const aroundIds = idsAround(focusId);
  const sweepPanel = document.getElementById("sweep-panel");
  const labPanel = document.getElementById("lab-panel");
  let firstRegion = null;
  for (const [id, html] of Object.entries(fragments)) {
    const current = document.getElementById(id);
    if (!current) continue;
    current.outerHTML = html;
    firstRegion = firstRegion || document.getElementById(id);
  }
  // An open panel of the runs at other depths stays open, its figures loaded, when the gate
  // around it is drawn again (a replayed row).
  const drawnAgain = document.getElementById("sweep-panel");
  if (sweepPanel?.open && drawnAgain && drawnAgain !== sweepPanel) drawnAgain.replaceWith(sweepPanel);
  // So does the lab, whose run may be training.
  const labAgain = document.getElementById("lab-panel");
  if (labPanel?.open && labAgain && labAgain !== labPanel) labAgain.replaceWith(labPanel);
  forgetTargets();
  forgetSettledDrafts(checked);
  repaint();
  if (keepDefault) followTakeawayDefault();
  const target = focusId ? document.getElementById(focusId) : null;
  if (isFocusable(target)) target.focus({ preventScroll: true }); // kept on screen: holdOnScreen
  // Focus that did not land (the control gone, hidden or disabled) goes to the nearest
  // element around it that is drawn again (a row whose prediction form gave way to the
  // prediction), else to the first region drawn again: never to the page's body.
  if (focusId && document.activeElement !== target) {
    const around = aroundIds.map((id) => document.getElementById(id)).find((e) => e?.getClientRects().length);
    const next = around || firstRegion;
    if (next) {
      if (!next.hasAttribute("tabindex")) next.setAttribute("tabindex", "-1");
      next.focus();
    }
  }
}

// The ids of the elements around `id`'s, nearest first, inside the page's main content (which
// itself would be too broad a place for the focus: the first region drawn again is nearer).
function idsAround(id) {
  const ids = [];
  const main = document.getElementById("main");
  for (let element = id ? document.getElementById(id)?.parentElement : null; element && element !== main && element !== document.body; element = element.parentElement) {
    if (element.id) ids.push(element.id);
  }
  return ids;
}

// The learner's form token (the server refuses a post without it: web/security/csrf.py). Every
// form carries it as a hidden field too; the header also covers a form swapped in without one.
function csrfToken() {
  return document.querySelector('meta[name="csrf-token"]')?.content ?? "";
}

async function post(form) {
  const response = await fetch(form.action, {
    method: "POST",
    body: new URLSearchParams(new FormData(form)),
    headers: { Accept: "application/json", "X-CSRF-Token": csrfToken() },
    credentials: "same-origin",
  });
  return { status: response.status, answer: await response.json() };
}

const busy = new WeakSet();

// One tap, one request. A form is known by its address across redraws (its answer replaces the
// element): while its request travels, and for DOUBLE_TAP_MS after the answer when what the
// learner entered is unchanged, a submission of it sends nothing (a second check, a second
// play counted). The hidden fields (the token, what the URL carries) are not the learner's.
const sending = new Set(); // form.action
const answered = new Map(); // form.action -> { at: performance.now(), entered }

function entered(form) {
  const hidden = new Set([...form.querySelectorAll("input[type=hidden]")].map((input) => input.name));
  return JSON.stringify([...new FormData(form)].filter(([name]) => !hidden.has(name)));
}

function isSecondTap(form) {
  if (sending.has(form.action)) return true;
  const last = answered.get(form.action);
  return last !== undefined && performance.now() - last.at < DOUBLE_TAP_MS && last.entered === entered(form);
}

// A refusal that re-draws no region (403: another origin or a stale session; 413) is shown as
// text at the end of its form; role="alert" has it read out as well.
function showRefusal(form, message) {
  let note = form.querySelector("[data-refusal]");
  if (!note) {
    note = document.createElement("p");
    note.className = "alert";
    note.setAttribute("role", "alert");
    note.dataset.refusal = "";
    form.append(note);
  }
  note.textContent = message;
}

// Where the control pressed is on screen: it stays there while the regions around it are drawn
// again, however much taller they grow (feedback under the fields above the button, the
// outcome beside it), so nothing jumps under the finger. Returns what puts it back.
function holdOnScreen(id) {
  const top = id ? document.getElementById(id)?.getBoundingClientRect().top : undefined;
  return () => {
    const now = id ? document.getElementById(id) : null;
    // A region that took the focus instead has scrolled itself into view as it took it.
    if (!now || document.activeElement !== now) return;
    if (top === undefined) now.scrollIntoView({ block: "nearest", behavior: "instant" });
    else {
      const moved = now.getBoundingClientRect().top - top;
      if (Math.abs(moved) >= 1) window.scrollBy({ top: moved, behavior: "instant" });
    }
  };
}

async function submitEnhanced(form, focusId, submitter) {
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
    const closing = !gateWasClosed && gateClosed() ? document.getElementById("gate-verdict")?.textContent.trim() : "";
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

// ---- the player --------------------------------------------------------------------------------

function reducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

function finalFiguresText(player) {
  const figures = player.querySelector(".final-figures");
  if (!figures) return "";
  const parts = [...figures.querySelectorAll("dt")].map((term) => `${term.textContent}: ${term.nextElementSibling?.textContent ?? ""}`);
  const heading = figures.querySelector("h6")?.textContent ?? "";
  return `${heading}. ${parts.join("; ")}.`;
}

// Draw the row in #player (player.js and uPlot load now, not with the page). `animate`: a row
// just played grows its curves and keeps its results hidden until they are complete.
function gateClosed() {
  return Boolean(document.getElementById("gate")?.classList.contains("closed"));
}

async function showPlayedRow(key, animate, closing = "") {
  const player = document.getElementById("player");
  if (!player || !player.dataset.src) return;
  rememberInUrl("play", key);
  for (const field of document.querySelectorAll("[data-play-field]")) field.value = key;
  const held = animate && !reducedMotion() ? [...document.querySelectorAll(`[data-result-for="${key}"]`)] : [];
  for (const element of held) element.hidden = true;
  // A row just played grows in the player, which on a phone is below the button pressed: bring
  // its top on screen so that the growing curves are seen. Focus goes with it, or the next Tab
  // would jump back to the button, now off screen; where the player was already in view, focus
  // stays on the button, ready for the next row.
  if (animate && player.getBoundingClientRect().top > window.innerHeight / 3) {
    player.focus({ preventScroll: true });
    player.scrollIntoView({ block: "start", behavior: reducedMotion() ? "auto" : "smooth" });
  }
  try {
    const { showPlayer } = await import("./player.js");
    const result = await showPlayer(player, { animate });
    if (animate && result.drawn) announce([finalFiguresText(player), closing].filter(Boolean).join(" "));
  } catch {
    const note = document.createElement("p");
    note.className = "alert";
    note.setAttribute("role", "alert");
    note.textContent = CURVES_PROBLEM;
    player.querySelector(".charts")?.replaceChildren(note);
  } finally {
    for (const element of held) element.hidden = false;
  }
}

// ---- the takeaway ----------------------------------------------------------------------------

const takeaway = {
  baseline: null, // the text as last saved (or as first shown): leaving it unsaved is no loss
  timer: 0,
};

function takeawayParts() {
  const form = document.getElementById("takeaway");
  if (!form) return null;
  return {
    form,
    text: document.getElementById("takeaway-text"),
    count: form.querySelector("[data-count]"),
    status: () => document.getElementById("takeaway-status"),
  };
}

function takeawayDirty() {
  const parts = takeawayParts();
  return Boolean(parts) && parts.text.value !== takeaway.baseline;
}

// While nothing is saved, the pre-filled line follows what the recording has shown (the server
// composes it once the answer is revealed), unless the learner has started editing it.
function followTakeawayDefault() {
  const parts = takeawayParts();
  const line = parts?.status()?.dataset.defaultLine;
  if (!parts || line === undefined || parts.text.value === line) return;
  parts.text.value = line;
  parts.count.textContent = String(Array.from(line).length);
  takeaway.baseline = line;
}

function setTakeawayStatus(text, isAlert) {
  const status = takeawayParts()?.status();
  if (!status) return;
  status.textContent = text;
  status.classList.toggle("alert", Boolean(isAlert));
  if (isAlert) status.setAttribute("role", "alert");
  else status.removeAttribute("role");
}

function tooLong(parts) {
  const max = Number(parts.text.dataset.maxChars);
  const length = Array.from(parts.text.value).length;
  // Counts written as the server's message writes them (progress.actions.too_long_message).
  const count = (n) => n.toLocaleString("en-US");
  return length > max ? parts.form.dataset.textTooLong.replace("{max}", count(max)).replace("{length}", count(length)) : null;
}

// What was typed and not saved yet is kept for the tab (sessionStorage, as the numbers' drafts
// are), with the saved text it was typed over: a reload or a phone's discarded tab within the
// autosave's moment brings it back, unless the takeaway was saved since (in another tab), when
// the draft is no longer the latest word.
const TAKEAWAY_DRAFT = "normdive:takeaway-draft";

function restoreTakeawayDraft() {
  const parts = takeawayParts();
  const store = draftStore();
  const kept = store?.getItem(TAKEAWAY_DRAFT);
  if (!parts || kept === null || kept === undefined) return;
  store.removeItem(TAKEAWAY_DRAFT);
  let draft;
  try {
    draft = JSON.parse(kept);
  } catch {
    return;
  }
  if (draft?.over !== parts.text.value || typeof draft.text !== "string" || draft.text === parts.text.value) return;
  parts.text.value = draft.text;
  onTakeawayInput(); // not saved yet: says so, keeps the draft, and saves it a moment later
}

function onTakeawayInput() {
  const parts = takeawayParts();
  if (takeawayDirty()) {
    draftStore()?.setItem(TAKEAWAY_DRAFT, JSON.stringify({ over: takeaway.baseline, text: parts.text.value }));
  } else draftStore()?.removeItem(TAKEAWAY_DRAFT);
  const length = Array.from(parts.text.value).length;
  parts.count.textContent = String(length);
  window.clearTimeout(takeaway.timer);
  if (!takeawayDirty()) return;
  const problem = tooLong(parts);
  if (problem) {
    setTakeawayStatus(problem, true);
    return;
  }
  setTakeawayStatus(parts.form.dataset.textUnsaved, false);
  takeaway.timer = window.setTimeout(() => saveTakeaway(false), AUTOSAVE_DELAY_MS);
}

async function saveTakeaway(byButton) {
  const parts = takeawayParts();
  window.clearTimeout(takeaway.timer);
  if (busy.has(parts.form)) {
    takeaway.timer = window.setTimeout(() => saveTakeaway(byButton), AUTOSAVE_DELAY_MS);
    return;
  }
  const sent = parts.text.value;
  busy.add(parts.form);
  setTakeawayStatus(parts.form.dataset.textSaving, false);
  try {
    const { answer } = await post(parts.form);
    if (answer.ok) takeaway.baseline = sent;
    if (answer.ok && parts.text.value === sent) draftStore()?.removeItem(TAKEAWAY_DRAFT);
    if (answer.ok && parts.text.value !== sent) {
      // More was typed while this save travelled: that text still needs its own save.
      setTakeawayStatus(parts.form.dataset.textUnsaved, false);
      takeaway.timer = window.setTimeout(() => saveTakeaway(false), AUTOSAVE_DELAY_MS);
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

// ---- numbers typed, not checked yet ------------------------------------------------------------

const DRAFT_PREFIX = "normdive:draft:";

function draftStore() {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage switched off: a reload loses what was typed, as without JavaScript
  }
}

function numberInputs() {
  return [...document.querySelectorAll("#numbers input[type=text]")];
}

function keepDraft(input) {
  draftStore()?.setItem(DRAFT_PREFIX + input.name, input.value);
}

// A draft its field can no longer take (landed, or locked) is no longer the learner's: forget
// it. `all`: after a check the server took, which sent every field, none is.
function forgetSettledDrafts(all = false) {
  const store = draftStore();
  if (!store) return;
  for (const input of numberInputs()) {
    if (all || input.readOnly || input.disabled) store.removeItem(DRAFT_PREFIX + input.name);
  }
}

// On a page the server has just drawn, a draft that says what the field already holds is
// nothing to type back; any other is.
function restoreDrafts() {
  const store = draftStore();
  if (!store) return;
  forgetSettledDrafts();
  for (const input of numberInputs()) {
    const draft = store.getItem(DRAFT_PREFIX + input.name);
    if (draft === null) continue;
    if (draft === input.value) {
      store.removeItem(DRAFT_PREFIX + input.name);
      continue;
    }
    input.value = draft;
    showVerdictIfItApplies(input);
  }
}

// A field's verdict speaks of the answer it was given for (data-graded). While the field holds
// anything else, as typed or as a draft typed back, the verdict is set aside, as the server does
// for an answer it echoes unchecked (fragments.html, `retyped`); typed again, it comes back.
function showVerdictIfItApplies(input) {
  const graded = input.dataset.graded;
  if (graded === undefined) return;
  const applies = input.value.trim() === graded.trim();
  const feedback = document.getElementById(`${input.id}-feedback`);
  if (feedback) feedback.hidden = !applies;
  if (applies && input.hasAttribute("data-graded-invalid")) input.setAttribute("aria-invalid", "true");
  else input.removeAttribute("aria-invalid");
}

// ---- wiring ----------------------------------------------------------------------------------

document.addEventListener("change", (event) => {
  if (event.target.id === "eps-switch") {
    repaint(); // the learner's own row too: its steps carry data-row like the others
    rememberInUrl("eps", event.target.checked ? null : "off");
    // What the flip did to the constant row, said as well as shown ("... not a number ...").
    announce(document.getElementById("edge-now")?.textContent.replace(/\s+/g, " ").trim());
  }
});

// A form's refusal speaks of what was sent ("Pick one", "Nothing has changed"); once the learner
// changes an answer it no longer applies, so it goes. A refusal of the request itself (a stale
// session, data-refusal) still holds, and so does the takeaway's status line.
function clearRefusals(form) {
  for (const note of form.querySelectorAll('.alert[role="alert"][id$="-alert"]')) note.remove();
  for (const outcome of form.querySelectorAll("[data-outcome]")) outcome.textContent = "";
}

document.addEventListener("input", (event) => {
  if (event.target.id === "own-row-input") showOwnRow();
  else if (event.target.id === "takeaway-text") onTakeawayInput();
  else if (event.target.closest?.("#numbers") && event.target.type === "text") {
    keepDraft(event.target);
    showVerdictIfItApplies(event.target);
  }
  const form = event.target.closest?.("form[data-enhance]");
  if (form) clearRefusals(form);
});

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.id === "eps-control" || form.id === "own-row") {
    event.preventDefault(); // both already update as they change
    return;
  }
  if (!form.hasAttribute("data-enhance")) return;
  event.preventDefault();
  if (form.id === "takeaway") {
    saveTakeaway(true);
    return;
  }
  const active = document.activeElement;
  const focusId = active && form.contains(active) && active.id ? active.id : event.submitter?.id;
  submitEnhanced(form, focusId, event.submitter ?? form.querySelector("button[type=submit]"));
});

window.addEventListener("beforeunload", (event) => {
  if (takeawayDirty()) {
    event.preventDefault();
    event.returnValue = ""; // older browsers need it set to show the prompt
  }
});

document.documentElement.classList.add("js");
// Words true only while this script runs (the numbers are worked out here, not by the server).
for (const element of document.querySelectorAll("[data-js-text]")) {
  element.textContent = element.dataset.jsText;
}
restoreDrafts();
takeaway.baseline = takeawayParts()?.text.value ?? null;
restoreTakeawayDraft();
repaint();
// requestIdleCallback is missing from some browsers (Safari); a timer does the same there.
(window.requestIdleCallback ?? window.setTimeout)(prepareOtherEps);
// Tables that fit their column leave the Tab order (scroll-regions.js), once the page is idle.
(window.requestIdleCallback ?? window.setTimeout)(() =>
  import("./scroll-regions.js").then(({ fitScrollRegions }) => fitScrollRegions()),
);
// ---- the runs at other depths ----------------------------------------------------------------

// `toggle` does not bubble: listened for on the way down.
document.addEventListener(
  "toggle",
  (event) => {
    const panel = event.target;
    if (!(panel instanceof HTMLDetailsElement) || !panel.open) return;
    if (panel.id === "sweep-panel") import("./sweep.js").then(({ openPanel }) => openPanel(panel));
    // "Train one yourself": its module, the trainer and the grid load only now.
    if (panel.id === "lab-panel") import("./lab-panel.js").then(({ openPanel }) => openPanel(panel));
  },
  true,
);

const shownRow = document.getElementById("player")?.dataset.playerRow;
if (shownRow) showPlayedRow(shownRow, false);
