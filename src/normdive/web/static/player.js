// The ablation player's charts: a played row's held-out accuracy and loss against step, drawn
// with uPlot (vendored, see vendor/uplot/README.md).
//
// Nothing here loads with the page: page.js imports this module only when the player shows a
// row, and this module fetches uPlot and the row's curves (GET /recording/rows/{key}.json)
// only then. The row's curve at the page seed is drawn in full colour; the other seeds of the
// same row are a faint band (their lowest to highest value at each step) with faint lines.
// Points that are not a finite number are marked with a cross on the chart's edge; the
// server-rendered table beside the chart spells them in words. Every word on the chart comes
// from the page's HTML (data attributes), none from this file.

import { loadUPlot } from "./loaders.js";
import { withPageLocale } from "./page/language.js";

const ANIMATION_MS = 3000; // "over a few seconds"
const CHART_HEIGHT_PX = 200;
const MIN_CHART_WIDTH_PX = 240;
const COLOURS = {
  played: "#0b5cad", // the page's accent, 6.6:1 on white
  others: "rgba(11, 92, 173, 0.35)",
  band: "rgba(11, 92, 173, 0.14)",
  edges: "#57606a",
  marks: "#a40e26",
  ink: "#1f2328",
  grid: "#d0d7de",
};
const CROSS_PX = 5;

/** A recorded figure: a number, or the recording's marker for one that is not finite ("nan",
 * "inf", "-inf"). @typedef {number | string} Recorded */
/** One seed's curves, the page seed's first: GET /recording/rows/{key}.json's `series`.
 * @typedef {{ seed: number, page: boolean, step: number[], accuracy: Recorded[],
 *   loss: Recorded[] }} RowSeries */
/** @typedef {{ steps: number, learns_min: number, chance_max: number,
 *   series: RowSeries[] }} RowData */
/** A chart's curve, as its element's data-series names it.
 * @typedef {"accuracy" | "loss"} Curve */
/** One chart's columns: null where a line has no finite value; `marks` holds the played row's
 * values that are not finite, null elsewhere.
 * @typedef {{ steps: number[], low: (number | null)[], high: (number | null)[],
 *   others: (number | null)[][], played: (number | null)[], marks: (number | null)[] }} Columns */
/** A chart and the steps it shows (`shown`); `plot` is null only while makeChart draws it.
 * @typedef {{ cols: Columns, shown: number, edges: number[],
 *   plot: import("uplot") | null }} Chart */
/** @typedef {Chart & { plot: import("uplot") }} DrawnChart */

/** @type {Map<string, Promise<RowData>>} url -> Promise of the row's curves */
const rowData = new Map();
/** @type {{ token: number, charts: DrawnChart[] }} */
let current = { token: 0, charts: [] };

/** @param {string} url @returns {Promise<RowData>} */
function fetchRow(url) {
  if (!rowData.has(url)) {
    const loading = fetch(url, { headers: withPageLocale({ Accept: "application/json" }), credentials: "same-origin" })
      .then(async (response) => {
        const body = await response.json();
        if (!response.ok) throw new Error(body.message || `status ${response.status}`);
        return body;
      })
      .catch((error) => {
        rowData.delete(url); // a later play tries again
        throw error;
      });
    rowData.set(url, loading);
  }
  return /** @type {Promise<RowData>} */ (rowData.get(url)); // set just above
}

// A recorded value as a number: the file spells non-finite values "nan", "inf", "-inf".
/** @param {Recorded} value */
function measure(value) {
  if (typeof value === "number") return value;
  if (value === "inf") return Infinity;
  if (value === "-inf") return -Infinity;
  return NaN;
}

// One chart's columns: steps, the others' band (low, high), each other seed, the played row,
// plus where the played row is not finite.
/** @param {RowData} data @param {Curve} name @returns {Columns} */
function columns(data, name) {
  const [played, ...others] = data.series;
  const steps = played.step;
  const values = played[name].map(measure);
  const otherAt = others.map((series) => {
    const byStep = new Map(series.step.map((step, i) => [step, measure(series[name][i])]));
    return steps.map((step) => {
      const value = byStep.get(step);
      return Number.isFinite(value) ? /** @type {number} */ (value) : null;
    });
  });
  const low = steps.map((_, i) => {
    const here = otherAt.map((line) => line[i]).filter((v) => v !== null);
    return here.length ? Math.min(...here) : null;
  });
  const high = steps.map((_, i) => {
    const here = otherAt.map((line) => line[i]).filter((v) => v !== null);
    return here.length ? Math.max(...here) : null;
  });
  return {
    steps,
    low,
    high,
    others: otherAt,
    played: values.map((v) => (Number.isFinite(v) ? v : null)),
    marks: values.map((v) => (Number.isFinite(v) ? null : v)),
  };
}

// Multiples of a power of ten a loss axis may end on: the top of the axis is a round figure,
// so it carries a tick label above the highest curve instead of ending unlabelled.
const ROUND_TOPS = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];

/** The smallest round figure (ROUND_TOPS times a power of ten) at or above `value` (> 0).
 * @param {number} value */
function roundUp(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  const step = ROUND_TOPS.find((multiple) => multiple * power >= value * (1 - 1e-12)) ?? 10;
  return step * power;
}

/** @param {Curve} name @param {Columns} cols @returns {[number, number]} */
function yRange(name, cols) {
  if (name === "accuracy") return [0, 1];
  const finite = [...cols.played, ...cols.high, ...cols.others.flat()].filter((v) => v !== null);
  const top = finite.length ? Math.max(...finite) : 1;
  return [0, top > 0 && Number.isFinite(top) ? roundUp(top * 1.05) : 1];
}

/** @param {Columns} cols @param {number} count @returns {import("uplot").AlignedData} */
function slice(cols, count) {
  return [
    cols.steps.slice(0, count),
    cols.low.slice(0, count),
    cols.high.slice(0, count),
    ...cols.others.map((line) => line.slice(0, count)),
    cols.played.slice(0, count),
  ];
}

/** @param {import("uplot")} u @param {Chart} chart */
function drawExtras(u, chart) {
  const ctx = u.ctx;
  const ratio = window.devicePixelRatio || 1;
  const { left, top, width, height } = u.bbox;
  ctx.save();
  // The bands' edges, dashed, on the accuracy chart: where "learns" starts and "chance" ends.
  ctx.strokeStyle = COLOURS.edges;
  ctx.lineWidth = ratio;
  ctx.setLineDash([6 * ratio, 4 * ratio]);
  for (const value of chart.edges) {
    const y = u.valToPos(value, "y", true);
    ctx.beginPath();
    ctx.moveTo(left, y);
    ctx.lineTo(left + width, y);
    ctx.stroke();
  }
  // Crosses where the played row is not finite (NaN and +inf at the top, -inf at the bottom).
  ctx.setLineDash([]);
  ctx.strokeStyle = COLOURS.marks;
  ctx.lineWidth = 2 * ratio;
  const size = CROSS_PX * ratio;
  for (let i = 0; i < chart.shown; i += 1) {
    const mark = chart.cols.marks[i];
    if (mark === null) continue;
    const x = u.valToPos(chart.cols.steps[i], "x", true);
    const y = mark === -Infinity ? top + height - size : top + size;
    ctx.beginPath();
    ctx.moveTo(x - size, y - size);
    ctx.lineTo(x + size, y + size);
    ctx.moveTo(x + size, y - size);
    ctx.lineTo(x - size, y + size);
    ctx.stroke();
  }
  ctx.restore();
}

/** @param {typeof import("uplot")} UPlot @param {HTMLElement} element @param {RowData} data
 * @param {Curve} name @returns {DrawnChart} */
function makeChart(UPlot, element, data, name) {
  const cols = columns(data, name);
  /** @type {Chart} */
  const chart = {
    cols,
    shown: cols.steps.length,
    edges: name === "accuracy" ? [data.learns_min, data.chance_max] : [],
    plot: null,
  };
  const percent = (/** @type {unknown} */ _chart, /** @type {number[]} */ ticks) => ticks.map((v) => `${Math.round(v * 100)} %`);
  const axis = { stroke: COLOURS.ink, grid: { stroke: COLOURS.grid, width: 1 }, ticks: { stroke: COLOURS.grid } };
  const faint = { stroke: COLOURS.others, width: 1, points: { show: false }, spanGaps: true };
  const hidden = { stroke: "transparent", width: 0, points: { show: false }, spanGaps: true };
  const otherCount = cols.others.length;
  /** @type {import("uplot").Options} */
  const options = {
    width: Math.max(MIN_CHART_WIDTH_PX, element.clientWidth),
    height: CHART_HEIGHT_PX,
    legend: { show: false },
    cursor: { show: false },
    scales: { x: { time: false, range: [0, data.steps] }, y: { range: yRange(name, cols) } },
    axes: [
      { ...axis, label: element.dataset.xLabel },
      { ...axis, label: element.dataset.yLabel, size: 56, ...(name === "accuracy" ? { values: percent } : {}) },
    ],
    series: [
      {},
      hidden,
      hidden,
      ...cols.others.map(() => faint),
      { stroke: COLOURS.played, width: 2.5, points: { show: false }, spanGaps: false },
    ],
    bands: otherCount > 1 ? [{ series: [2, 1], fill: COLOURS.band }] : [],
    hooks: { draw: [(u) => drawExtras(u, chart)] },
  };
  element.replaceChildren();
  chart.plot = new UPlot(options, slice(cols, cols.steps.length), element);
  return /** @type {DrawnChart} */ (chart);
}

/** @param {DrawnChart} chart @param {number} count */
function show(chart, count) {
  chart.shown = count;
  chart.plot.setData(slice(chart.cols, count));
}

function reducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

function resize() {
  for (const chart of current.charts) {
    const element = /** @type {HTMLElement} */ (chart.plot.root.parentElement); // the .chart
    chart.plot.setSize({ width: Math.max(MIN_CHART_WIDTH_PX, element.clientWidth), height: CHART_HEIGHT_PX });
  }
}

window.addEventListener("resize", resize);

// Draw the row in #player. With `animate`, the curves grow over ANIMATION_MS (at once under
// prefers-reduced-motion) and the promise resolves when they are complete. `onCharts` is
// called as soon as the charts and the sentences about them are on the page.
/** @param {HTMLElement} player has data-src, the row's curves' address
 * @param {{ animate: boolean, onCharts?: () => void }} how
 * @returns {Promise<{ drawn: boolean }>} */
export async function showPlayer(player, { animate, onCharts = () => {} }) {
  const token = current.token + 1;
  current = { token, charts: [] };
  const [UPlot, data] = await Promise.all([
    loadUPlot(),
    fetchRow(/** @type {string} */ (player.dataset.src)), // callers pass a player with data-src
  ]);
  if (current.token !== token || !player.isConnected) return { drawn: false };
  const charts = [
    .../** @type {NodeListOf<HTMLElement>} */ (player.querySelectorAll(".chart[data-series]")),
  ].map((element) =>
    makeChart(UPlot, element, data, /** @type {Curve} */ (element.dataset.series)),
  );
  current.charts = charts;
  // The sentences about what the charts show are hidden until there are charts to show it.
  const notes = /** @type {NodeListOf<HTMLElement>} */ (player.querySelectorAll("[data-chart-note]"));
  for (const note of notes) note.hidden = false;
  onCharts();
  if (!animate || reducedMotion() || !charts.length) return { drawn: true };
  const total = charts[0].cols.steps;
  const last = total[total.length - 1] || 1;
  for (const chart of charts) show(chart, 1);
  return new Promise((resolve) => {
    const start = performance.now();
    const frame = (/** @type {number} */ now) => {
      if (current.token !== token || !player.isConnected) {
        resolve({ drawn: false });
        return;
      }
      const progress = Math.min(1, (now - start) / ANIMATION_MS);
      const reached = progress * last;
      const count = Math.max(1, total.filter((step) => step <= reached).length);
      for (const chart of charts) if (chart.shown !== count) show(chart, count);
      if (progress < 1) window.requestAnimationFrame(frame);
      else resolve({ drawn: true });
    };
    window.requestAnimationFrame(frame);
  });
}
