// "Try your own row": the steps of the row the learner types, computed as they type, drawn
// from the page's template of a row's steps (#row-steps-template) and painted like the
// page's own rows. Loaded on the first key typed there (page.js).

import { formatInputNumber, parseRow } from "../layernorm.js";
import { rememberInUrl } from "./address.js";
import { announce, pageWords } from "./announce.js";
import { epsState, forgetTargets, paintRow, rowTexts, shownNumber } from "./numbers.js";

const OWN_ROW_PROBLEM_DELAY_MS = 600; // a pause in typing, before a typed row's problem is said

let ownRowProblemTimer = 0;

/** Draws (or clears) the steps of the row typed in #own-row-input. */
export function showOwnRow() {
  const input = /** @type {HTMLInputElement | null} */ (document.getElementById("own-row-input"));
  const message = document.getElementById("own-row-message");
  const target = document.getElementById("own-row-steps");
  const template = /** @type {HTMLTemplateElement | null} */ (document.getElementById("row-steps-template"));
  if (!input || !message || !target || !template) return;
  forgetTargets(); // the row's steps below are replaced
  const text = input.value;
  rememberInUrl("row", text.trim() ? text : null);
  for (const field of /** @type {NodeListOf<HTMLInputElement>} */ (document.querySelectorAll("[data-row-field]"))) {
    field.value = text.trim() ? text : "";
  }
  window.clearTimeout(ownRowProblemTimer);
  if (!text.trim()) {
    message.textContent = "";
    input.removeAttribute("aria-invalid");
    target.replaceChildren();
    return;
  }
  // The page's decimal symbol decides how the row is read: "1,5; 2" where it is a comma.
  const decimalComma = document.documentElement.dataset.decimal === ",";
  const parsed = parseRow(text, { decimalComma, words: pageWords() });
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
  const steps = /** @type {HTMLElement} */ (template.content.firstElementChild?.cloneNode(true));
  steps.dataset.row = JSON.stringify(parsed);
  // Named in the page's writing, as typed: "[1,5; 2]" on a German page (views/page.py).
  const separator = document.documentElement.dataset.listSeparator ?? ", ";
  /** @type {HTMLElement} */ (steps.querySelector('[data-ln="input"]')).textContent =
    `[${parsed.map((x) => shownNumber(formatInputNumber(x))).join(separator)}]`;
  const eps = epsState();
  paintRow(steps, eps);
  // The variance does not depend on the switch, so neither does this note.
  /** @type {HTMLElement} */ (steps.querySelector("[data-variance-hidden]")).hidden = !rowTexts(steps.dataset.row, eps).varianceHidden;
  target.replaceChildren(steps);
  // A valid row is said, as a problem is, once typing pauses (not at every key).
  ownRowProblemTimer = window.setTimeout(() => announce(spokenSteps(steps)), OWN_ROW_PROBLEM_DELAY_MS);
}

// A row's steps as sentences, in the order shown ("Row [1, 2, 3]. Mean: 2. ..."); what is
// hidden stays unsaid.
/** @param {HTMLElement} steps @returns {string} */
function spokenSteps(steps) {
  const lines = steps.innerText.split("\n").map((line) => line.replace(/\s+/g, " ").trim());
  return lines.filter(Boolean).map((line) => (/[.!?:]$/.test(line) ? line : `${line}.`)).join(" ");
}
