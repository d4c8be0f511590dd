// What the two training panels share ("Train one yourself", lab-panel.js, and "Re-run the
// ablation on this device", rerun.js): loading the panel's fragment, its stylesheet, uPlot and
// the recorded lab grid, each once and only when a panel opens; posting a write with the
// form token; figures as the grid spells them; announcing.

import { loadStylesheet, loadUPlot, paragraph } from "./loaders.js";
import { announce, pageWord } from "./page/announce.js";

export { announce } from "./page/announce.js";
export { loadUPlot, paragraph } from "./loaders.js";

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

/** @type {Promise<LabGrid> | null} */
let gridLoading = null;

/** The lab's stylesheet, which the re-run's panel uses too. */
export function loadStyles() {
  return loadStylesheet(STYLESHEET);
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

/** The grid's cell of exactly this configuration and seed (eps within EPS_MATCH), if any.
 * @param {LabGrid} grid @param {CellKey} key @returns {GridCell | undefined} */
export function findCell(grid, [depth, layernorm, residual, eps, init, seed]) {
  return grid.cells.find(
    (c) =>
      c.depth === depth &&
      c.layernorm === layernorm &&
      c.residual === residual &&
      sameEps(c.eps, eps) &&
      c.init === init &&
      c.seed === seed,
  );
}

/** The recorded curve of the cell `key` in the grid at `url`, or null without one.
 * @param {string} url @param {CellKey} key @returns {Promise<Point[] | null>} */
export async function recordedCurve(url, key) {
  return findCell(await loadGrid(url), key)?.curve ?? null;
}

// ---- panels and charts ---------------------------------------------------------------------

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
      headers: { Accept: "text/html" },
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

const CHART_HEIGHT_PX = 220;
const MIN_CHART_WIDTH_PX = 240;
export const INK = { text: "#1f2328", grid: "#d0d7de" };
const AXIS_WORDS = { step: pageWord("Training step"), accuracy: pageWord("Held-out accuracy") };

/** The curves' held-out accuracy on every step any of them evaluated (null where one did not,
 * or where its figure is not a number).
 * @param {(Point[] | null)[]} curves @returns {import("uplot").AlignedData} */
export function accuracyData(curves) {
  const xs = [...new Set(curves.flatMap((c) => (c || []).map((p) => p.step)))].sort((a, b) => a - b);
  return [
    xs,
    ...curves.map((points) => {
      const byStep = new Map((points || []).map((p) => [p.step, measure(p.heldout_accuracy)]));
      return xs.map((x) => {
        const y = byStep.get(x);
        return y !== undefined && Number.isFinite(y) ? y : null;
      });
    }),
  ];
}

/** A chart of held-out accuracy (0 to 100 %) against the training step (0 to `steps`), one
 * line per series, drawn into `element` and kept to its width.
 * @param {HTMLElement} element @param {number} steps @param {import("uplot").Series[]} series
 * @param {(Point[] | null)[]} curves */
export async function accuracyChart(element, steps, series, curves) {
  const UPlot = await loadUPlot();
  const axis = { stroke: INK.text, grid: { stroke: INK.grid, width: 1 }, ticks: { stroke: INK.grid } };
  const percent = (/** @type {unknown} */ _chart, /** @type {number[]} */ ticks) => ticks.map((v) => `${Math.round(v * 100)} %`);
  const width = () => Math.max(MIN_CHART_WIDTH_PX, element.clientWidth);
  /** @type {import("uplot").Options} */
  const options = {
    width: width(),
    height: CHART_HEIGHT_PX,
    legend: { show: false }, // the figure's caption says which line is which
    cursor: { show: false },
    scales: { x: { time: false, range: [0, steps] }, y: { range: [0, 1] } },
    axes: [
      { ...axis, label: AXIS_WORDS.step },
      { ...axis, label: AXIS_WORDS.accuracy, size: 56, values: percent },
    ],
    series: [{}, ...series],
  };
  element.replaceChildren();
  const plot = new UPlot(options, accuracyData(curves), element);
  window.addEventListener("resize", () => plot.setSize({ width: width(), height: CHART_HEIGHT_PX }));
  return plot;
}

/** Post a finished run's figures (the worker's "done": its curve and final figures) to `url`
 * as the form field `result`, JSON with the recording format's spelling of non-finite ones.
 * @param {string} url @param {{ curve: object[], final: object }} done */
export function postResult(url, done) {
  const data = new FormData();
  data.append("result", JSON.stringify({ final: done.final, curve: done.curve }, marked));
  return post(url, data);
}

/** `work`, run once: when the page is next idle, or when first asked before then (what a
 * panel draws before its Start, so that training begins without that work on the main thread).
 * @param {() => Promise<void>} work @returns {() => Promise<void>} */
export function onceWhenIdle(work) {
  /** @type {Promise<void> | null} */
  let started = null;
  const run = () => (started ??= work());
  (window.requestIdleCallback ?? window.setTimeout)(() => void run());
  return run;
}

// ---- one training run in a Worker ------------------------------------------------------------

/** What the worker posts (lab/worker.js), as much as the panels read.
 * @typedef {{ type: "progress", step: number, steps: number, train_loss: number,
 *   steps_per_second: number, kernels: "wasm" | "js" }
 *   | { type: "eval", step: number, heldout_loss: number, heldout_accuracy: number }
 *   | { type: "done", curve: object[], final: object, steps_per_second: number,
 *       kernels: "wasm" | "js", fallback: string }
 *   | { type: "stopped", step: number }
 *   | { type: "error", message: string }} WorkerMessage */
/** What a panel hands its trainer: its Stop and Resume buttons, the line that says how the
 * run goes, that line's words while the tab is hidden and once the learner stopped it, what
 * to do with each of the worker's messages, and what to do when the mode changes.
 * @typedef {{ stop: HTMLButtonElement, resume: HTMLButtonElement, status: HTMLElement,
 *   hiddenText: string, stoppedText: () => string, onMessage: (message: WorkerMessage) => void,
 *   onMode?: (mode: string) => void }} TrainerParts */

/** A training panel's controls, as the server draws them inside `root`: #<prefix>-start,
 * -stop, -resume, -progress (the bar), -progress-text (the line beside it), -chart.
 * @param {HTMLElement} root @param {string} prefix */
export function trainingControls(root, prefix) {
  const part = (/** @type {string} */ name) => /** @type {HTMLElement} */ (root.querySelector(`#${prefix}-${name}`));
  return {
    start: /** @type {HTMLButtonElement} */ (part("start")),
    stop: /** @type {HTMLButtonElement} */ (part("stop")),
    resume: /** @type {HTMLButtonElement} */ (part("resume")),
    bar: /** @type {HTMLProgressElement} */ (part("progress")),
    status: part("progress-text"),
    chartElement: part("chart"),
  };
}

/** One run at a time in a module Worker (lab/worker.js), with the panel's Stop and Resume:
 * Stop pauses it and Resume goes on (the focus moving between the two); a hidden tab pauses
 * it and showing the tab again goes on (Page Visibility). Modes: idle, running, stopped (by
 * the learner), hidden, done. */
export class WorkerTrainer {
  /** @param {TrainerParts} parts */
  constructor(parts) {
    this.parts = parts;
    this.mode = "idle";
    /** @type {Worker | null} */
    this.worker = null;
    document.addEventListener("visibilitychange", () => this.onVisibility());
    parts.stop.addEventListener("click", () => {
      if (this.mode !== "running") return;
      this.worker?.postMessage({ type: "pause" });
      this.setMode("stopped");
      parts.status.textContent = parts.stoppedText();
      announce(parts.status.textContent);
      parts.resume.focus();
    });
    parts.resume.addEventListener("click", () => {
      if (this.mode !== "stopped") return;
      this.worker?.postMessage({ type: "resume" });
      this.setMode("running");
      parts.stop.focus();
    });
  }

  /** @param {string} next */
  setMode(next) {
    this.mode = next;
    this.parts.stop.disabled = next !== "running";
    this.parts.resume.disabled = next !== "stopped";
    this.parts.onMode?.(next);
  }

  /** Train `config` from `seed` in a new worker; paused at once while the tab is hidden.
   * @param {object} config @param {number} seed */
  start(config, seed) {
    const worker = new Worker(new URL("./lab/worker.js", import.meta.url), { type: "module" });
    this.worker = worker;
    worker.addEventListener("message", (event) => this.receive(event.data));
    worker.addEventListener("error", () => this.receive({ type: "error", message: PROBLEM }));
    worker.postMessage({ type: "start", config, seed });
    if (document.hidden) worker.postMessage({ type: "pause" });
    this.setMode(document.hidden ? "hidden" : "running");
  }

  /** @param {WorkerMessage} message */
  receive(message) {
    if (message.type === "done" || message.type === "error") this.end();
    else if (message.type === "stopped") this.setMode("stopped");
    this.parts.onMessage(message);
  }

  /** The worker is done with (it finished, failed, or the panel moves on). */
  end() {
    this.worker?.terminate();
    this.worker = null;
    this.setMode("done");
  }

  onVisibility() {
    if (!this.worker) return;
    if (document.hidden && this.mode === "running") {
      this.worker.postMessage({ type: "pause" });
      this.setMode("hidden");
      this.parts.status.textContent = this.parts.hiddenText;
    } else if (!document.hidden && this.mode === "hidden") {
      this.worker.postMessage({ type: "resume" });
      this.setMode("running");
    }
  }
}
