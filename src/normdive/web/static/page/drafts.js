// Numbers typed and not checked yet, kept in this tab as they are typed (kept.js), are typed
// back in after a reload, until a check or a landing makes them the server's.

import { DRAFT_PREFIX, draftStore } from "./kept.js";

function numberInputs() {
  return /** @type {HTMLInputElement[]} */ ([...document.querySelectorAll("#numbers input[type=text]")]);
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
// anything else, as typed or as a draft typed back, the verdict is set aside and the field is
// described as not checked yet (a screen reader reads a description even when it is hidden),
// as the server does for an answer it echoes unchecked (fragments.html, `retyped`); typed
// again, the verdict comes back.
/** @param {HTMLInputElement} input */
export function showVerdictIfItApplies(input) {
  const graded = input.dataset.graded;
  if (graded === undefined) return;
  const applies = input.value.trim() === graded.trim();
  const feedback = document.getElementById(`${input.id}-feedback`);
  const unchecked = document.getElementById(`${input.id}-unchecked`);
  if (feedback) feedback.hidden = !applies;
  if (unchecked) unchecked.hidden = applies;
  const described = (input.getAttribute("aria-describedby") ?? "").split(/\s+/).filter(Boolean);
  const [now, before] = applies ? ["feedback", "unchecked"] : ["unchecked", "feedback"];
  input.setAttribute(
    "aria-describedby",
    described.map((id) => (id === `${input.id}-${before}` ? `${input.id}-${now}` : id)).join(" "),
  );
  if (applies && input.hasAttribute("data-graded-invalid")) input.setAttribute("aria-invalid", "true");
  else input.removeAttribute("aria-invalid");
}
