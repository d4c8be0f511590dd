// The panel "Train one yourself": nothing here loads with the lesson page. page.js imports
// this module when the panel first opens; it fetches the panel (HTML drawn by the server,
// GET /lab/panel) with its stylesheet (lab.css) and wires it:
// - the commit form posts the learner's configuration and prediction (POST /lab/runs), and the
//   server answers with the panel drawn again, Train in it;
// - Train starts the trainer in a module Worker (lab/worker.js, docs/lab.md), so the page
//   stays responsive; its held-out accuracy is drawn as it comes over the recorded run of the
//   same configuration and seed, which the server drew (accuracy-chart.js); a <progress> shows
//   the step, steps a second and time left, and 25, 50, 75 and 100 % are announced;
// - Stop pauses the worker and Resume goes on; a hidden tab pauses it too (Page Visibility);
// - the finished run's figures are posted (POST /lab/runs/<n>/result): the server keeps them
//   and answers with the result in words (the outcome against the prediction, the recording
//   against this device), which is shown and announced.

import { growingCurve } from "./accuracy-chart.js";
import { PROBLEM, duration, fill, loadPanel, post, sameEps } from "./lab-tools.js";
import { paragraph } from "./loaders.js";
import { announce } from "./page/announce.js";
import { WorkerTrainer, postResult, trainingControls } from "./training-panel.js";
import { shownNumber } from "./page/numbers.js";

const MILESTONES = [25, 50, 75];
// The run's curve on the panel's chart (web.routes.lab.LIVE_LINE).
const LIVE_LINE = "run";

/** @typedef {import("./lab/trainer.js").LabConfig} LabConfig */
/** @typedef {import("./lab-tools.js").Answer} Answer */
/** A recorded cell as the commit form lists it (data-cells): depth, row, eps, init, seed.
 * @typedef {[number, string, number | null, string, number]} OfferedCell */
/** The open run as the server draws it into data-run.
 * @typedef {{ run: number, config: LabConfig, seed: number, name: string }} PendingRun */
/** #lab-train as the server draws it (templates/lab_fragments.html), with its data attributes.
 * @typedef {HTMLElement & { dataset: { run: string, progressText: string,
 *   milestone: string, hiddenText: string, stoppedText: string } }} TrainElement */
/** The commit form's choices of a configuration, each a <select>.
 * @typedef {"depth" | "row" | "eps" | "init" | "seed"} Choice */
/** #lab-commit as the server draws it.
 * @typedef {HTMLFormElement & { dataset: { noCell: string },
 *   elements: Record<Choice, HTMLSelectElement> }} CommitForm */
/** Which kernels the trainer runs on (lab/kernels.js): "wasm" or "js".
 * @typedef {"wasm" | "js"} KernelPath */
/** The worker's "done": the finished run's curve and final figures, the kernels it ran on and
 * why not WebAssembly ("" when it was) (lab/worker.js).
 * @typedef {{ type: "done", curve: object[], final: object, steps_per_second: number,
 *   kernels: KernelPath, fallback: string }} DoneMessage */
/** @typedef {import("./training-panel.js").WorkerMessage} WorkerMessage */
/** @param {HTMLElement} details */
export async function openPanel(details) {
  await loadPanel(/** @type {HTMLElement | null} */ (details.querySelector("#lab-body")), (body) => {
    // The panel lists the learner's runs itself: the list the page drew beside the closed
    // panel goes, so that the page has one #lab-runs.
    if (body.querySelector("#lab-runs")) details.parentElement?.querySelector(":scope > #lab-runs")?.remove();
    wire(body);
  });
}

// Swap in the panel the server drew with a write's answer, and put the focus at `focusId`
// (or the alert, or the panel).
/** @param {HTMLElement} body @param {Answer} answer @param {string} focusId
 * @param {Element | null} [keep] */
function swap(body, answer, focusId, keep = null) {
  if (answer.html) body.innerHTML = answer.html;
  else body.prepend(paragraph("alert", answer.message || PROBLEM));
  if (keep) body.querySelector("#lab-result")?.after(keep);
  wire(body);
  announce(answer.message);
  const target = (answer.ok && document.getElementById(focusId)) ||
    /** @type {HTMLElement | null} */ (body.querySelector("#lab-alert")) || body;
  target.focus();
}

/** @param {HTMLElement} body */
function wire(body) {
  const form = /** @type {CommitForm | null} */ (body.querySelector("#lab-commit"));
  if (form) wireForm(body, form);
  const train = /** @type {TrainElement | null} */ (body.querySelector("#lab-train"));
  if (train) wireTrainer(body, train);
}

// ---- committing ------------------------------------------------------------------------------

const LAYER_NORM_ROWS = new Set(["both", "layernorm_only"]);

/** @param {HTMLElement} body @param {CommitForm} form */
function wireForm(body, form) {
  const cells = /** @type {OfferedCell[]} */ (JSON.parse(form.dataset.cells || "[]"));
  const note = /** @type {HTMLElement} */ (form.querySelector("#lab-cell-note"));
  const eps = /** @type {HTMLSelectElement} */ (form.querySelector("#lab-eps"));
  const value = (/** @type {Choice} */ name) => form.elements[name].value;
  const update = () => {
    const layernorm = LAYER_NORM_ROWS.has(value("row"));
    eps.disabled = !layernorm; // not sent, and not asked, without layer norm
    const wantedEps = layernorm ? Number(value("eps")) : null;
    const recorded = cells.some(
      ([depth, row, cellEps, init, seed]) =>
        depth === Number(value("depth")) &&
        row === value("row") &&
        init === value("init") &&
        seed === Number(value("seed")) &&
        sameEps(cellEps, wantedEps),
    );
    note.textContent = recorded ? "" : form.dataset.noCell;
  };
  form.addEventListener("change", update);
  update();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = /** @type {HTMLButtonElement} */ (form.querySelector("#lab-commit-button"));
    if (button.disabled) return;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    const answer = await post(form.action, new FormData(form));
    button.disabled = false;
    button.removeAttribute("aria-busy");
    swap(body, answer, "lab-start");
  });
}

// ---- training --------------------------------------------------------------------------------

/** @param {HTMLElement} body @param {TrainElement} train */
function wireTrainer(body, train) {
  const run = /** @type {PendingRun} */ (JSON.parse(train.dataset.run));
  const steps = run.config.steps;
  const controls = trainingControls(train, "lab");
  const { start, stop, bar, status, chartElement } = controls;
  const figure = /** @type {HTMLElement} */ (train.querySelector("#lab-figure"));
  const curve = growingCurve(chartElement, LIVE_LINE);
  /** @type {Set<number>} */
  const said = new Set();
  const trainer = new WorkerTrainer(train, controls, {
    stoppedText: (step) => fill(train.dataset.stoppedText, { step }),
    onMessage: (message) => onMessage(message),
  });

  /** @param {DoneMessage} message */
  const finish = async (message) => {
    bar.value = 100;
    const answer = await postResult(`/lab/runs/${run.run}/result`, message);
    const kept = answer.ok ? figure : null; // the curve stays beside the result
    if (kept) {
      kept.removeAttribute("id");
      chartElement.removeAttribute("id");
    }
    const milestone = fill(train.dataset.milestone, { percent: 100 });
    swap(body, { ...answer, message: `${milestone} ${answer.message || ""}`.trim() }, "lab-result", kept);
  };

  /** @param {WorkerMessage} message */
  const onMessage = (message) => {
    if (message.type === "progress") {
      bar.value = Math.min(100, (100 * message.step) / steps);
      const rate = message.steps_per_second;
      if (!trainer.paused) {
        status.textContent = fill(train.dataset.progressText, {
          step: message.step,
          steps,
          rate: Number.isFinite(rate) ? shownNumber(rate.toFixed(1)) : "–",
          left: duration((steps - message.step) / rate),
        });
      }
      for (const percent of MILESTONES) {
        if (!said.has(percent) && (100 * message.step) / steps >= percent) {
          said.add(percent);
          announce(fill(train.dataset.milestone, { percent }));
        }
      }
    } else if (message.type === "eval") {
      curve.add(message.step, message.heldout_accuracy);
    } else if (message.type === "done") {
      finish(message);
    }
  };

  start.addEventListener("click", () => {
    if (trainer.mode !== "idle") return;
    start.disabled = true;
    status.textContent = fill(train.dataset.progressText, { step: 0, steps, rate: "–", left: "–" });
    trainer.start(run.config, run.seed);
    stop.focus();
  });
}
