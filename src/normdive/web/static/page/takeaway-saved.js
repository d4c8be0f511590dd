// The takeaway as last saved: what leaving the page may lose, and the pre-filled line it shows
// while nothing is saved. Small, and loaded with the page: the warning before leaving needs it
// at once; typing and saving (takeaway.js) load on first use.

/** @typedef {{ form: HTMLFormElement, text: HTMLTextAreaElement, count: HTMLElement,
 *   status: () => HTMLElement | null }} TakeawayParts */

/** @type {string | null} the text as last saved (or as first shown): leaving it unsaved is no loss */
let baseline = null;

/** The takeaway's form and the elements in it; null on a page without it.
 * @returns {TakeawayParts | null} */
export function takeawayParts() {
  const form = /** @type {HTMLFormElement | null} */ (document.getElementById("takeaway"));
  if (!form) return null;
  return {
    form,
    text: /** @type {HTMLTextAreaElement} */ (document.getElementById("takeaway-text")),
    count: /** @type {HTMLElement} */ (form.querySelector("[data-count]")),
    status: () => document.getElementById("takeaway-status"),
  };
}

/** @param {string | null} text the takeaway's text as saved */
export function rememberSaved(text) {
  baseline = text;
}

/** @returns {string | null} */
export function savedText() {
  return baseline;
}

/** Whether the takeaway holds text not saved. */
export function takeawayDirty() {
  const parts = takeawayParts();
  return Boolean(parts) && parts?.text.value !== baseline;
}

// While nothing is saved, the pre-filled line follows what the recording has shown (the server
// composes it once the answer is revealed), unless the learner has started editing it.
export function followTakeawayDefault() {
  const parts = takeawayParts();
  const line = parts?.status()?.dataset.defaultLine;
  if (!parts || line === undefined || parts.text.value === line) return;
  parts.text.value = line;
  parts.count.textContent = String(Array.from(line).length);
  baseline = line;
}
