// Swapping the regions an answer re-draws: the server answers a form posted with `Accept:
// application/json` with the regions to replace (rendering.FRAGMENT_IDS), drawn by the same
// templates as the full page. Focus stays on the control the learner used, or lands on the
// nearest thing drawn again, and the control stays where it was on screen.

import { forgetSettledDrafts } from "./drafts.js";
import { forgetTargets, repaint } from "./numbers.js";
import { followTakeawayDefault, takeawayDirty } from "./takeaway-saved.js";

// :disabled also matches a control inside a disabled fieldset (a locked reading's radios),
// which `disabled` does not say.
/** @param {HTMLElement | null} element @returns {element is HTMLElement} */
function isFocusable(element) {
  return Boolean(element) && !element?.matches(":disabled") && (element?.getClientRects().length ?? 0) > 0;
}

/** Replaces each region by id with the HTML given for it.
 * `checked`: the server took a check of the six numbers (not refused it), so what the fields
 * show now is its drawing of them, and no typed draft is still the learner's alone.
 * @param {Record<string, string>} fragments region id -> its HTML
 * @param {string | null | undefined} focusId the control the learner used
 * @param {boolean} checked */
export function swapFragments(fragments, focusId, checked = false) {
  const keepDefault = !takeawayDirty();
  const aroundIds = idsAround(focusId);
  const sweepPanel = /** @type {HTMLDetailsElement | null} */ (document.getElementById("sweep-panel"));
  const labPanel = /** @type {HTMLDetailsElement | null} */ (document.getElementById("lab-panel"));
  /** @type {HTMLElement | null} */
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
/** @param {string | null | undefined} id @returns {string[]} */
function idsAround(id) {
  const ids = [];
  const main = document.getElementById("main");
  for (let element = id ? document.getElementById(id)?.parentElement : null; element && element !== main && element !== document.body; element = element.parentElement) {
    if (element.id) ids.push(element.id);
  }
  return ids;
}

// Where the control pressed is on screen: it stays there while the regions around it are drawn
// again, however much taller they grow (feedback under the fields above the button, the
// outcome beside it), so nothing jumps under the finger. Returns what puts it back.
/** @param {string | null | undefined} id @returns {() => void} */
export function holdOnScreen(id) {
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
