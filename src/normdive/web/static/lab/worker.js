// The lab's trainer in a module Worker, so the page stays responsive while it trains.
//
// Receives {type: "start", config, seed}, {type: "pause"}, {type: "resume"}, {type: "stop"}.
// Posts {type: "progress", step, steps, train_loss, steps_per_second, kernels} (at most one
// per PROGRESS_MS), {type: "eval", step, heldout_loss, heldout_accuracy} (at step 0, every
// eval_every updates and after the last), {type: "done", curve, final, steps_per_second,
// kernels, fallback}, {type: "stopped", step} and {type: "error", message}. `kernels` is the
// path the trainer runs on ("wasm" or "js": kernels.js), `fallback` why it is not "wasm" (""
// when it is). `curve` has the shape progress.lab.CURVE_FIELDS reads: {step,
// train_loss (the mean over the updates since the previous point; null at step 0),
// heldout_loss, heldout_accuracy}, and `final` {step, heldout_loss, heldout_accuracy}. In
// `done` a figure that is not finite is the grid's marker ("nan", "inf", "-inf":
// recording/format.py's Measure), so the result survives JSON as the grid keeps it; progress
// and eval messages carry plain numbers, NaN included.
//
// The work runs in slices of about SLICE_MS, each ending with a yield to the event loop, so a
// pause or stop is read within one slice.

/** @typedef {import("./trainer.js").LabConfig} LabConfig */
/** @typedef {typeof import("./trainer.js").createTrainer} CreateTrainer */
/** A point of the curve (progress.lab.CURVE_FIELDS).
 * @typedef {{ step: number, train_loss: number | null, heldout_loss: number,
 *   heldout_accuracy: number }} CurvePoint */
/** The run in progress: windowSum / windowCount is the mean training loss since the last
 * point; activeMs the time trained up to the last pause, resumedAt when it last went on.
 * @typedef {{ trainer: ReturnType<CreateTrainer>, config: LabConfig, curve: CurvePoint[],
 *   windowSum: number, windowCount: number, paused: boolean, activeMs: number,
 *   resumedAt: number, progressAt: number, queued: boolean, fallback: string }} Run */

const SLICE_MS = 50;
const PROGRESS_MS = 100;
const ALREADY_TRAINING = "a run is already training: stop it first";

// The trainer and its kernels, imported after this script has set its message handler:
// kernels.js compiles its WebAssembly as it loads, and a message that came before the handler
// was set would be lost. Messages are handled in the order they came, once these are here.
const modules = Promise.all([import("./trainer.js"), import("./kernels.js")]);

/** @type {Run | null} */
let run = null;
// Yielding through a MessageChannel, not setTimeout: nested timeouts are clamped to 4 ms.
const tick = new MessageChannel();
tick.port1.onmessage = () => slice();

// One slice queued at a time, however pause and resume interleave with it.
function schedule() {
  if (run !== null && !run.queued) {
    run.queued = true;
    tick.port2.postMessage(null);
  }
}

/** @param {Record<string, unknown>} message */
function post(message) {
  self.postMessage(message);
}

/** @param {unknown} error */
function fail(error) {
  run = null;
  post({ type: "error", message: error instanceof Error ? error.message : String(error) });
}

/** @param {number} step @param {number | null} trainLoss */
function evaluateAt(step, trainLoss) {
  const current = /** @type {Run} */ (run); // called only while a run is in progress
  const figures = current.trainer.evaluate();
  const point = { step, train_loss: trainLoss, ...figures };
  current.curve.push(point);
  post({ type: "eval", step, ...figures });
}

// A figure as the grid file keeps it: finite numbers as they are, the rest as markers.
/** @param {number | null} x @returns {number | null | string} */
function measure(x) {
  if (x === null || Number.isFinite(x)) return x;
  if (Number.isNaN(x)) return "nan";
  return x > 0 ? "inf" : "-inf";
}

/** @param {Record<string, number | null>} point */
function measured(point) {
  const entries = Object.entries(point).map(([k, v]) => [k, k === "step" ? v : measure(v)]);
  return Object.fromEntries(entries);
}

function rate() {
  const current = /** @type {Run} */ (run); // called only while a run is in progress
  const seconds =
    (current.activeMs + (current.paused ? 0 : performance.now() - current.resumedAt)) / 1000;
  return seconds > 0 ? current.trainer.stepsDone / seconds : NaN;
}

function slice() {
  if (run === null) return;
  run.queued = false;
  if (run.paused) return;
  try {
    const { trainer, config } = run;
    const until = performance.now() + SLICE_MS;
    let loss = NaN;
    while (trainer.stepsDone < config.steps && performance.now() < until) {
      loss = trainer.step();
      run.windowSum += loss;
      run.windowCount += 1;
      const step = trainer.stepsDone;
      if (step % config.eval_every === 0 || step === config.steps) {
        evaluateAt(step, run.windowSum / run.windowCount);
        run.windowSum = 0;
        run.windowCount = 0;
      }
    }
    const step = trainer.stepsDone;
    const now = performance.now();
    const finished = step >= config.steps;
    if (finished || now - run.progressAt >= PROGRESS_MS) {
      run.progressAt = now;
      post({
        type: "progress",
        step,
        steps: config.steps,
        train_loss: loss,
        steps_per_second: rate(),
        kernels: trainer.path,
      });
    }
    if (finished) {
      const last = run.curve[run.curve.length - 1];
      post({
        type: "done",
        curve: run.curve.map(measured),
        final: measured({
          step: last.step,
          heldout_loss: last.heldout_loss,
          heldout_accuracy: last.heldout_accuracy,
        }),
        steps_per_second: rate(),
        kernels: trainer.path,
        fallback: run.fallback,
      });
      run = null;
      return;
    }
    schedule();
  } catch (error) {
    fail(error);
  }
}

/** @param {LabConfig} config @param {number} seed @param {CreateTrainer} createTrainer
 * @param {string} fallback why the kernels are not WebAssembly ("" when they are) */
function start(config, seed, createTrainer, fallback) {
  if (!Number.isInteger(config?.steps) || config.steps < 1) {
    throw new RangeError(`config.steps must be a positive integer, not ${config?.steps}`);
  }
  if (!Number.isInteger(config.eval_every) || config.eval_every < 1) {
    throw new RangeError(`config.eval_every must be a positive integer, not ${config.eval_every}`);
  }
  const trainer = createTrainer(config, seed);
  run = {
    fallback,
    trainer,
    config,
    curve: [],
    windowSum: 0,
    windowCount: 0,
    paused: false,
    activeMs: 0,
    resumedAt: performance.now(),
    progressAt: -Infinity,
    queued: false,
  };
  evaluateAt(0, null);
  schedule();
}

/** @param {MessageEvent} event @param {CreateTrainer} createTrainer
 * @param {string} fallbackReason */
function handle(event, createTrainer, fallbackReason) {
  const message = event.data ?? {};
  try {
    switch (message.type) {
      case "start":
        // A second start leaves the run in progress alone.
        if (run !== null) post({ type: "error", message: ALREADY_TRAINING });
        else start(message.config, message.seed, createTrainer, fallbackReason);
        break;
      case "pause":
        if (run !== null && !run.paused) {
          run.paused = true;
          run.activeMs += performance.now() - run.resumedAt;
        }
        break;
      case "resume":
        if (run !== null && run.paused) {
          run.paused = false;
          run.resumedAt = performance.now();
          schedule();
        }
        break;
      case "stop":
        if (run !== null) {
          const step = run.trainer.stepsDone;
          run = null;
          post({ type: "stopped", step });
        }
        break;
      default:
        throw new Error(`unknown message type ${JSON.stringify(message.type)}`);
    }
  } catch (error) {
    fail(error);
  }
}

self.onmessage = (event) => {
  modules.then(([trainer, kernels]) => handle(event, trainer.createTrainer, kernels.fallbackReason),
    fail);
};
