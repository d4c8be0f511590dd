// What the two training panels share ("Train one yourself", lab-panel.js, and "Re-run the
// ablation on this device", rerun.js): loading the panel's fragment, its stylesheet, uPlot and
// the recorded lab grid, each once and only when a panel opens; posting a write with the
// form token; figures as the grid spells them; announcing.

import { pageWord } from "./page/announce.js";

export { announce } from "./page/announce.js";

export const PROBLEM = pageWord("The lab could not be reached just now. Try again.");
const STYLESHEET = new URL("./lab.css", import.meta.url).href;
// Relative difference under which two eps values name the same recorded cell (as
// normdive.recording.selection.EPS_MATCH).
const EPS_MATCH = 1e-9;

/** A figure as the grid spells it: a number, or "nan" / "inf" / "-inf".
 * @typedef {number | string} Figure */
/** A curve's point, as much of it as the charts read.
 * @typedef {{ step: number, heldout_accuracy: Figure }} Point */
/** A recorded cell (GET /lab/grid/<digest>.json, normdive.lab.grid.LabCell), as much as is read.
 * @typedef {{ depth: number, layernorm: boolean, residual: boolean, eps: number | null,
 *   init: string, seed: number, curve: Point[] }} GridCell */
/** @typedef {{ cells: GridCell[] }} LabGrid */
/** A configuration as a recorded cell names it: depth, layer norm, residual, eps, init, seed.
 * @typedef {[number, boolean, boolean, number | null, string, number]} CellKey */
/** A write's answer: the panel drawn again, and what to say.
 * @typedef {{ ok: boolean, message?: string, html?: string }} Answer */

// Named by a variable, so that the type check (tsconfig.json) takes uPlot's types from the
// pinned package instead of checking the vendored build itself.
const UPLOT_MODULE = "./vendor/uplot/uPlot.esm.js";
/** @type {Promise<typeof import("uplot")> | null} */
let uplotLoading = null;
/** @type {Promise<LabGrid> | null} */
let gridLoading = null;

export function loadStyles() {
  const links = /** @type {NodeListOf<HTMLLinkElement>} */ (document.querySelectorAll('link[rel="stylesheet"]'));
  if ([...links].some((l) => l.href.endsWith("/lab.css"))) {
    return Promise.resolve();
  }
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = STYLESHEET;
  const loaded = new Promise((resolve) => {
    link.addEventListener("load", resolve, { once: true });
    link.addEventListener("error", resolve, { once: true }); // the panel reads without it
  });
  document.head.append(link);
  return loaded;
}

export function loadUPlot() {
  if (!uplotLoading) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = new URL("./vendor/uplot/uPlot.min.css", import.meta.url).href;
    document.head.append(link);
    uplotLoading = import(UPLOT_MODULE).then((module) => module.default);
  }
  return uplotLoading;
}

/** @param {string} url @returns {Promise<LabGrid>} */
export function loadGrid(url) {
  if (!gridLoading) {
    gridLoading = fetch(url, { credentials: "same-origin" }).then((response) => {
      if (!response.ok) throw new Error(`status ${response.status}`);
      return response.json();
    });
    gridLoading.catch(() => {
      gridLoading = null; // asked again next time
    });
  }
  return gridLoading;
}

/** @param {string} className @param {string} text */
export function paragraph(className, text) {
  const element = document.createElement("p");
  element.className = className;
  element.textContent = text;
  return element;
}

/** @param {string} template @param {Record<string, string | number>} values */
export function fill(template, values) {
  return template.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

// A figure as the grid spells it: a number, or "nan" / "inf" / "-inf", or null.
/** @param {Figure | null} value */
export function measure(value) {
  if (typeof value === "number") return value;
  if (value === "inf") return Infinity;
  if (value === "-inf") return -Infinity;
  return NaN;
}

// A figure as the server keeps it: JSON has no NaN or Infinity, so a diverged run's are
// spelled as the recording format spells them.
/** @param {string} _key @param {unknown} value */
export function marked(_key, value) {
  if (typeof value !== "number" || Number.isFinite(value)) return value;
  if (Number.isNaN(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

/** @param {number} seconds */
export function duration(seconds) {
  if (!Number.isFinite(seconds)) return "–";
  const whole = Math.max(0, Math.round(seconds));
  return whole < 60 ? `${whole} s` : `${Math.floor(whole / 60)} min ${whole % 60} s`;
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
      headers: { Accept: "application/json", "X-CSRF-Token": csrfToken() },
    });
    return await response.json();
  } catch {
    return { ok: false, message: PROBLEM };
  }
}

/** @param {number | null} a @param {number | null} b */
export function sameEps(a, b) {
  if (a === null || b === null) return a === b;
  return Math.abs(a - b) <= EPS_MATCH * Math.max(Math.abs(a), Math.abs(b));
}

/** @param {string} url @param {CellKey} cell @returns {Promise<Point[] | null>} */
export async function recordedCurve(url, [depth, layernorm, residual, eps, init, seed]) {
  const grid = await loadGrid(url);
  const cell = grid.cells.find(
    (c) =>
      c.depth === depth &&
      c.layernorm === layernorm &&
      c.residual === residual &&
      sameEps(c.eps, eps) &&
      c.init === init &&
      c.seed === seed,
  );
  return cell ? cell.curve : null;
}
