// The chart both training panels draw (lab-panel.js, rerun.js): held-out accuracy against the
// training step, one line per run, with uPlot (loaded only when a chart is first drawn).

import { measure } from "./lab-tools.js";
import { loadUPlot } from "./loaders.js";
import { pageWord } from "./page/announce.js";

/** @typedef {import("./lab-tools.js").Point} Point */

const CHART_HEIGHT_PX = 220;
const MIN_CHART_WIDTH_PX = 240;
const INK = { text: "#1f2328", grid: "#d0d7de" };
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
