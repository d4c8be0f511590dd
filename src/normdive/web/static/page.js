// The lesson page's behaviour on top of a page that already works without it. This module is
// the wiring: which event does what, and what runs once the page is loaded. The behaviours are
// in page/, one concept a module:
//
// - page/numbers.js: the epsilon switch repaints every computed number at once, in this browser;
// - page/own-row.js: "Try your own row" computes as the learner types;
// - page/forms.js, page/regions.js: forms marked data-enhance post with fetch and `Accept:
//   application/json`; the server answers with the regions to replace. Focus stays on the
//   control the learner used and the outcome is announced (page/announce.js);
// - page/takeaway.js, page/takeaway-saved.js: the takeaway saves itself a moment after typing
//   stops and warns before leaving unsaved text;
// - page/drafts.js: numbers typed and not checked yet are kept in this tab and typed back in
//   after a reload;
// - page/played-row.js: a played row's curves grow, then its figures show;
// - page/address.js: the URL follows the switch, the learner's own row and the row played.
// - The panel "Does it hold at other depths?" (once the gate has closed) costs nothing until
//   it opens: then sweep.js loads and fetches its figures; the lab panel likewise.
// - A table that fits its column is no Tab stop; one that scrolls sideways is (scroll-regions.js).
// - Hidden inputs carry the switch, the learner's own row and the row in the player in every
//   form, as the URL does, so a page without JavaScript keeps them across a POST.
//
// Loaded with the page: this module, the takeaway's saved text (page/takeaway-saved.js), which
// the warning before leaving needs at once, and what the tab keeps as it is typed (page/kept.js). Everything else loads once the page has
// loaded, while it is idle, so that the page's text and styles arrive first on a slow network
// and the first use waits for no download (bench/phone.py); or at once where the page needs it
// sooner (a switch the browser restored in the other position, drafts kept in this tab, a row
// in the player) or the learner acts before it has arrived.
//
// Elements are found through event delegation, so regions swapped in need no re-binding.

import { keepDraft, keepPanel, keepTakeawayDraft, keptInThisTab, reopenPanels, takeawayDraftKept } from "./page/kept.js";
import { rememberSaved, takeawayDirty, takeawayParts } from "./page/takeaway-saved.js";

// requestIdleCallback is missing from some browsers (Safari); a timer does the same there.
const whenIdle = window.requestIdleCallback ?? window.setTimeout;

/** A module loaded once: `get` loads it (on first use), `now` is it once it has arrived, so
 * that a handler that finds it here runs within the event, as the switch must (numbers.js).
 * @template T @param {() => Promise<T>} load */
function lazy(load) {
  /** @type {T | null} */
  let module = null;
  /** @type {Promise<T> | null} */
  let loading = null;
  return {
    get: () => {
      loading ??= load().then(
        (loaded) => (module = loaded),
        (problem) => {
          loading = null; // the next use tries again
          throw problem;
        },
      );
      return loading;
    },
    now: () => module,
  };
}

const numbers = lazy(() => import("./page/numbers.js"));
const drafts = lazy(() => import("./page/drafts.js"));
const forms = lazy(() => import("./page/forms.js"));
const takeaway = lazy(() => import("./page/takeaway.js"));
const ownRow = lazy(() => import("./page/own-row.js"));
const playedRow = lazy(() => import("./page/played-row.js"));
const announcer = lazy(() => import("./page/announce.js"));

// A module that could not be fetched leaves an action undone: said as a failed post is.
function sayUnreachable() {
  announcer.get().then(({ NETWORK_PROBLEM, announce }) => announce(NETWORK_PROBLEM));
}

/** @param {EventTarget | null} target @returns {target is HTMLInputElement} */
function isInput(target) {
  return target instanceof HTMLInputElement;
}

document.addEventListener("change", (event) => {
  if (!isInput(event.target) || event.target.id !== "eps-switch") return;
  const loaded = numbers.now();
  if (loaded) loaded.switchFlipped();
  else numbers.get().then(({ switchFlipped }) => switchFlipped());
});

// A form's refusal speaks of what was sent ("Pick one", "Nothing has changed"); once the learner
// changes an answer it no longer applies, so it goes. A refusal of the request itself (a stale
// session, data-refusal) still holds, and so does the takeaway's status line.
/** @param {HTMLFormElement} form */
function clearRefusals(form) {
  for (const note of form.querySelectorAll('.alert[role="alert"][id$="-alert"]')) note.remove();
  for (const outcome of form.querySelectorAll("[data-outcome]")) outcome.textContent = "";
}

document.addEventListener("input", (event) => {
  const target = /** @type {HTMLElement} */ (event.target);
  if (target.id === "own-row-input") ownRow.get().then(({ showOwnRow }) => showOwnRow());
  else if (target.id === "takeaway-text") {
    keepTakeawayDraft(); // now, not once takeaway.js has arrived: a reload may come first
    takeaway.get().then(({ onTakeawayInput }) => onTakeawayInput());
  } else if (isInput(target) && target.closest?.("#numbers") && target.type === "text") {
    keepDraft(target);
    drafts.get().then(({ showVerdictIfItApplies }) => showVerdictIfItApplies(target));
  }
  const form = /** @type {HTMLFormElement | null} */ (target.closest?.("form[data-enhance]"));
  if (form) clearRefusals(form);
});

document.addEventListener("submit", (event) => {
  const form = /** @type {HTMLFormElement} */ (event.target);
  if (form.id === "eps-control" || form.id === "own-row") {
    event.preventDefault(); // both already update as they change
    return;
  }
  if (!form.hasAttribute("data-enhance")) return;
  event.preventDefault();
  if (form.id === "takeaway") {
    takeaway.get().then(({ saveTakeaway }) => saveTakeaway(true), sayUnreachable);
    return;
  }
  const active = document.activeElement;
  const focusId = active && form.contains(active) && active.id ? active.id : event.submitter?.id;
  const submitter = event.submitter ?? form.querySelector("button[type=submit]");
  forms.get().then(({ submitEnhanced }) => submitEnhanced(form, focusId, submitter), sayUnreachable);
});

window.addEventListener("beforeunload", (event) => {
  if (takeawayDirty()) {
    event.preventDefault();
    event.returnValue = ""; // older browsers need it set to show the prompt
  }
});

// ---- the runs at other depths ----------------------------------------------------------------

// `toggle` does not bubble: listened for on the way down.
document.addEventListener(
  "toggle",
  (event) => {
    const panel = event.target;
    if (!(panel instanceof HTMLDetailsElement)) return;
    keepPanel(panel);
    if (!panel.open) return;
    if (panel.id === "sweep-panel") import("./sweep.js").then(({ openPanel }) => openPanel(panel));
    // "Train one yourself": its module, the trainer and the grid load only now.
    if (panel.id === "lab-panel") import("./lab-panel.js").then(({ openPanel }) => openPanel(panel));
    // "Re-run the ablation on this device": likewise, with the same trainer.
    if (panel.id === "rerun-panel") import("./rerun.js").then(({ openPanel }) => openPanel(panel));
  },
  true,
);

// ---- once the page is here -------------------------------------------------------------------

// The numbers as the switch says (a reload may restore it in the other position than the
// server drew), and the other epsilon's computed before the learner flips it.
function paintNumbers() {
  numbers.get().then(({ prepareOtherEps, repaint }) => {
    repaint();
    whenIdle(prepareOtherEps);
  });
}

document.documentElement.classList.add("js");
// Words true only while this script runs (the numbers are worked out here, not by the server).
for (const element of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("[data-js-text]"))) {
  element.textContent = element.dataset.jsText ?? "";
}
rememberSaved(takeawayParts()?.text.value ?? null);
if (keptInThisTab()) {
  drafts.get().then(({ restoreDrafts }) => {
    restoreDrafts();
    if (takeawayDraftKept()) takeaway.get().then(({ restoreTakeawayDraft }) => restoreTakeawayDraft());
  });
}
reopenPanels();
const control = document.getElementById("eps-switch");
if (isInput(control) && control.checked !== control.defaultChecked) paintNumbers();
const shownRow = document.getElementById("player")?.dataset.playerRow;
if (shownRow) playedRow.get().then(({ showPlayedRow }) => showPlayedRow(shownRow, false));

function whenLoaded() {
  whenIdle(paintNumbers);
  whenIdle(() => {
    for (const module of [forms, takeaway, ownRow, drafts]) module.get().catch(() => {});
  });
  // Tables that fit their column leave the Tab order (scroll-regions.js).
  whenIdle(() => import("./scroll-regions.js").then(({ fitScrollRegions }) => fitScrollRegions()));
}
if (document.readyState === "complete") whenLoaded();
else window.addEventListener("load", whenLoaded, { once: true });
