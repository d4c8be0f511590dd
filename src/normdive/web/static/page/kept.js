// What this tab keeps of what was typed and not yet the server's (sessionStorage): the six
// numbers not checked yet and the takeaway not saved yet. Written within the input event that
// typed it, so a reload or a phone's discarded tab a moment later finds it, whether or not the
// modules that use it (drafts.js, takeaway.js) have arrived. Small, and loaded with the page.

import { savedText, takeawayDirty, takeawayParts } from "./takeaway-saved.js";

export const DRAFT_PREFIX = "normdive:draft:";
export const TAKEAWAY_DRAFT = "normdive:takeaway-draft";

/** This tab's storage; null where storage is switched off.
 * @returns {Storage | null} */
export function draftStore() {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage switched off: a reload loses what was typed, as without JavaScript
  }
}

/** Whether this tab keeps anything for this site (drafts are all it keeps). */
export function keptInThisTab() {
  return (draftStore()?.length ?? 0) > 0;
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
