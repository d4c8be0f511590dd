// Numbers typed and not checked yet are kept in this tab (sessionStorage) and typed back in
// after a reload, until a check or a landing makes them the server's. The takeaway's draft is
// kept in the same storage (takeaway.js).

const DRAFT_PREFIX = "normdive:draft:";
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

/** Whether a takeaway typed and not saved yet is kept in this tab. */
export function takeawayDraftKept() {
  return draftStore()?.getItem(TAKEAWAY_DRAFT) != null;
}

function numberInputs() {
  return /** @type {HTMLInputElement[]} */ ([...document.querySelectorAll("#numbers input[type=text]")]);
}

/** @param {HTMLInputElement} input one of the six numbers, as typed */
export function keepDraft(input) {
  draftStore()?.setItem(DRAFT_PREFIX + input.name, input.value);
}

// A draft its field can no longer take (landed, or locked) is no longer the learner's: forget
// it. `all`: after a check the server took, which sent every field, none is.
export function forgetSettledDrafts(all = false) {
  const store = draftStore();
  if (!store) return;
  for (const input of numberInputs()) {
    if (all || input.readOnly || input.disabled) store.removeItem(DRAFT_PREFIX + input.name);
  }
}

// On a page the server has just drawn, a draft that says what the field already holds is
// nothing to type back; any other is.
export function restoreDrafts() {
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
/** @param {HTMLInputElement} input */
export function showVerdictIfItApplies(input) {
  const graded = input.dataset.graded;
  if (graded === undefined) return;
  const applies = input.value.trim() === graded.trim();
  const feedback = document.getElementById(`${input.id}-feedback`);
  if (feedback) feedback.hidden = !applies;
  if (applies && input.hasAttribute("data-graded-invalid")) input.setAttribute("aria-invalid", "true");
  else input.removeAttribute("aria-invalid");
}
