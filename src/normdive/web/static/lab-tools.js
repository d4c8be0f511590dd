// What the two training panels share ("Train one yourself", lab-panel.js, and "Re-run the
// ablation on this device", rerun.js): loading the panel's fragment and its stylesheet, once
// and only when a panel opens; posting a write with the form token; figures as the recording
// format spells them. Their chart is accuracy-chart.js, their runs training-panel.js.

import { loadStylesheet, paragraph } from "./loaders.js";
import { pageWord } from "./page/announce.js";
import { withPageLocale } from "./page/language.js";

export const PROBLEM = pageWord("The lab could not be reached just now. Try again.");
const STYLESHEET = new URL("./lab.css", import.meta.url).href;
// Relative difference under which two eps values name the same recorded cell (as
// normdive.recording.selection.EPS_MATCH).
const EPS_MATCH = 1e-9;

/** A write's answer: the panel drawn again, and what to say.
 * `unreached`: the request never had the server's answer (the network, or no JSON came back).
 * @typedef {{ ok: boolean, message?: string, html?: string, unreached?: boolean }} Answer */

/** The lab's stylesheet, which the re-run's panel uses too. */
export function loadStyles() {
  return loadStylesheet(STYLESHEET);
}

/** @param {string} template @param {Record<string, string | number>} values */
export function fill(template, values) {
  return template.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

// A figure as the server keeps it: JSON has no NaN or Infinity, so a diverged run's are
// spelled as the recording format spells them.
/** @param {string} _key @param {unknown} value */
export function marked(_key, value) {
  if (typeof value !== "number" || Number.isFinite(value)) return value;
  if (Number.isNaN(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

/** A time in the page's language, its units short ("1 min 5 s", "1 Min. 5 Sek.", Arabic
 * "١ د ٥ ث"), with the browser's own unit names (Intl.NumberFormat); "–" for no time.
 * @param {number} seconds */
export function duration(seconds) {
  if (!Number.isFinite(seconds)) return "–";
  const whole = Math.max(0, Math.round(seconds));
  const unit = (/** @type {string} */ name, /** @type {number} */ value) =>
    new Intl.NumberFormat(document.documentElement.lang || "en", {
      style: "unit",
      unit: name,
      unitDisplay: "short",
    }).format(value);
  return whole < 60 ? unit("second", whole) : `${unit("minute", Math.floor(whole / 60))} ${unit("second", whole % 60)}`;
}

function csrfToken() {
  return /** @type {HTMLMetaElement | null} */ (document.querySelector('meta[name="csrf-token"]'))?.content ?? "";
}

/** @param {string} url @param {FormData} data @returns {Promise<Answer>} */
export async function post(url, data) {
  try {
    const response = await fetch(url, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: withPageLocale({ Accept: "application/json", "X-CSRF-Token": csrfToken() }),
    });
    return await response.json();
  } catch {
    return { ok: false, message: PROBLEM, unreached: true };
  }
}

/** @param {number | null} a @param {number | null} b */
export function sameEps(a, b) {
  if (a === null || b === null) return a === b;
  return Math.abs(a - b) <= EPS_MATCH * Math.max(Math.abs(a), Math.abs(b));
}

// ---- panels ----------------------------------------------------------------------------------

/** Fetch a panel's contents, which the server draws at body.dataset.src, into `body` the
 * first time it opens, with the lab's stylesheet, then `wire` them. A failure says so and
 * keeps what the page drew; the panel is tried again when it next opens.
 * @param {HTMLElement | null} body @param {(body: HTMLElement) => void} wire */
export async function loadPanel(body, wire) {
  if (!body || body.dataset.loaded) return;
  body.dataset.loaded = "true";
  body.setAttribute("aria-busy", "true");
  const fallback = [...body.childNodes];
  body.replaceChildren(paragraph("note", body.dataset.loading || ""));
  try {
    const fetched = fetch(/** @type {string} */ (body.dataset.src), {
      headers: withPageLocale({ Accept: "text/html" }),
      credentials: "same-origin",
    });
    const [response] = await Promise.all([fetched, loadStyles()]);
    // Every answer, a refusal included, is a readable fragment drawn by the server.
    body.innerHTML = await response.text();
    wire(body);
  } catch {
    body.replaceChildren(paragraph("note", PROBLEM), ...fallback);
    delete body.dataset.loaded;
  } finally {
    body.removeAttribute("aria-busy");
  }
}
