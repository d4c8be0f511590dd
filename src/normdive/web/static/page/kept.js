// What this tab keeps of what was typed and not yet the server's (sessionStorage): the six
// numbers not checked yet and the takeaway not saved yet. Written within the input event that
// typed it, so a reload or a phone's discarded tab a moment later finds it, whether or not the
// modules that use it (drafts.js, takeaway.js) have arrived. It also keeps which panels (a
// <details> with an id: the runs at other depths, the lab, a table) the learner left open, and
// opens them again after a reload. Small, and loaded with the page.

import { savedText, takeawayDirty, takeawayParts } from "./takeaway-saved.js";

export const DRAFT_PREFIX = "normdive:draft:";
export const TAKEAWAY_DRAFT = "normdive:takeaway-draft";
// The ids of the panels left open, as a JSON list.
export const OPEN_PANELS = "normdive:open-panels";

/** This tab's storage; null where storage is switched off.
 * @returns {Storage | null} */
export function draftStore() {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage switched off: a reload loses what was typed, as without JavaScript
  }
}

/** Whether this tab keeps a draft for this site (typed and not yet the server's). */
export function keptInThisTab() {
  const store = draftStore();
  for (let index = 0; index < (store?.length ?? 0); index += 1) {
    const key = store?.key(index) ?? "";
    if (key.startsWith(DRAFT_PREFIX) || key === TAKEAWAY_DRAFT) return true;
  }
  return false;
}

/** The ids of the panels this tab keeps open. @returns {Set<string>} */
function openPanels() {
  try {
    const kept = JSON.parse(draftStore()?.getItem(OPEN_PANELS) ?? "[]");
    return new Set(Array.isArray(kept) ? kept.filter((id) => typeof id === "string") : []);
  } catch {
    return new Set(); // not ours, or damaged: nothing kept
  }
}

/** Keeps whether `panel` is open, when it has an id to be found by after a reload.
 * @param {HTMLDetailsElement} panel */
export function keepPanel(panel) {
  if (!panel.id) return;
  const open = openPanels();
  if (panel.open) open.add(panel.id);
  else open.delete(panel.id);
  if (open.size > 0) draftStore()?.setItem(OPEN_PANELS, JSON.stringify([...open]));
  else draftStore()?.removeItem(OPEN_PANELS);
}

/** Opens again the panels this tab keeps open that are on the page; each one's toggle event
 * then does what opening it by hand does (loading the depths' or the lab's module). */
export function reopenPanels() {
  for (const id of openPanels()) {
    const panel = document.getElementById(id);
    if (panel instanceof HTMLDetailsElement && !panel.open) panel.open = true;
  }
}

/** @param {HTMLInputElement} input one of the six numbers, as typed */
export function keepDraft(input) {
  draftStore()?.setItem(DRAFT_PREFIX + input.name, input.value);
}

/** The takeaway as typed, kept with the saved text it was typed over; nothing kept once the
 * box says what was saved. */
export function keepTakeawayDraft() {
  const parts = takeawayParts();
  if (!parts) return;
  if (takeawayDirty()) {
    draftStore()?.setItem(TAKEAWAY_DRAFT, JSON.stringify({ over: savedText(), text: parts.text.value }));
  } else draftStore()?.removeItem(TAKEAWAY_DRAFT);
}

/** Whether a takeaway typed and not saved yet is kept in this tab. */
export function takeawayDraftKept() {
  return draftStore()?.getItem(TAKEAWAY_DRAFT) != null;
}
