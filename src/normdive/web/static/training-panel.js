// What both training panels (lab-panel.js, rerun.js) do with a run: find their controls, train
// in a module Worker with Stop, Resume and a hidden tab's pause, and post the finished run's
// figures.

import { PROBLEM, marked, post } from "./lab-tools.js";
import { announce } from "./page/announce.js";

/** Post a finished run's figures (the worker's "done": its curve and final figures) to `url`
 * as the form field `result`, JSON with the recording format's spelling of non-finite ones.
 * @param {string} url @param {{ curve: object[], final: object }} done */
export function postResult(url, done) {
  const data = new FormData();
  data.append("result", JSON.stringify({ final: done.final, curve: done.curve }, marked));
  return post(url, data);
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
/** What a panel hands its trainer besides its controls: the status line's words once the
 * learner stopped the run at a step, and what to do with each of the worker's messages.
 * @typedef {{ stoppedText: (step: number) => string,
 *   onMessage: (message: WorkerMessage) => void }} TrainerHandlers */

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
 * it and showing the tab again goes on (Page Visibility). While it is paused the status line
 * says so (`train`'s data-hidden-text, or handlers.stoppedText), and a failure is said there
 * as an alert. Modes: idle, running, stopped (by the learner), hidden, done. */
export class WorkerTrainer {
  /** @param {HTMLElement} train @param {ReturnType<typeof trainingControls>} controls
   * @param {TrainerHandlers} handlers */
  constructor(train, controls, handlers) {
    this.controls = controls;
    this.handlers = handlers;
    this.hiddenText = train.dataset.hiddenText ?? "";
    this.mode = "idle";
    this.step = 0; // the last step the worker reported
    this.focusWasOnStop = false;
    /** @type {Worker | null} */
    this.worker = null;
    const { stop, resume, status } = controls;
    document.addEventListener("visibilitychange", () => this.onVisibility());
    stop.addEventListener("click", () => {
      if (this.mode !== "running") return;
      this.worker?.postMessage({ type: "pause" });
      this.setMode("stopped");
      status.textContent = handlers.stoppedText(this.step);
      announce(status.textContent);
      resume.focus();
    });
    resume.addEventListener("click", () => {
      if (this.mode !== "stopped") return;
      this.worker?.postMessage({ type: "resume" });
      this.setMode("running");
      stop.focus();
    });
  }

  /** Whether the run is paused, by the learner or by a hidden tab. */
  get paused() {
    return this.mode === "stopped" || this.mode === "hidden";
  }

  /** @param {string} next */
  setMode(next) {
    this.mode = next;
    this.controls.stop.disabled = next !== "running";
    this.controls.resume.disabled = next !== "stopped";
  }

  /** Train `config` from `seed` in a new worker; paused at once while the tab is hidden.
   * @param {object} config @param {number} seed */
  start(config, seed) {
    const worker = new Worker(new URL("./lab/worker.js", import.meta.url), { type: "module" });
    this.worker = worker;
    this.step = 0;
    worker.addEventListener("message", (event) => this.receive(event.data));
    worker.addEventListener("error", () => this.receive({ type: "error", message: PROBLEM }));
    worker.postMessage({ type: "start", config, seed });
    if (document.hidden) worker.postMessage({ type: "pause" });
    this.setMode(document.hidden ? "hidden" : "running");
    // The last run's end disabled Stop under the learner's focus: a set's next run gives it
    // back, so the keyboard can still stop it.
    if (this.focusWasOnStop && document.activeElement === document.body) this.controls.stop.focus();
    this.focusWasOnStop = false;
  }

  /** @param {WorkerMessage} message */
  receive(message) {
    const { status } = this.controls;
    if (message.type === "progress") {
      this.step = message.step;
      // A report already on its way when the run was stopped or hidden keeps that said.
      if (this.mode === "stopped") status.textContent = this.handlers.stoppedText(this.step);
      else if (this.mode === "hidden") status.textContent = this.hiddenText;
    } else if (message.type === "stopped") {
      this.setMode("stopped");
    } else if (message.type === "done" || message.type === "error") {
      this.end();
    }
    if (message.type === "error") {
      status.textContent = message.message;
      status.setAttribute("role", "alert");
    }
    this.handlers.onMessage(message);
  }

  /** The worker is done with (it finished, failed, or the panel moves on). */
  end() {
    this.focusWasOnStop = document.activeElement === this.controls.stop;
    this.worker?.terminate();
    this.worker = null;
    this.setMode("done");
  }

  onVisibility() {
    if (!this.worker) return;
    if (document.hidden && this.mode === "running") {
      this.worker.postMessage({ type: "pause" });
      this.setMode("hidden");
      this.controls.status.textContent = this.hiddenText;
    } else if (!document.hidden && this.mode === "hidden") {
      this.worker.postMessage({ type: "resume" });
      this.setMode("running");
    }
  }
}
