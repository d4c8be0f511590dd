// The panel "Re-run the ablation on this device": nothing here loads with the lesson page.
// page.js imports this module when the panel first opens; it fetches the panel (HTML drawn by
// the server, GET /lab/rerun/panel) and wires it:
// - one button trains the lesson's four rows one after another, each in a module Worker
//   (lab/worker.js, docs/lab.md), at the setting the server put in data-set; each row's
//   held-out accuracy is drawn as it comes over the recorded lab cell of the same row, size
//   and seed, which the server drew (accuracy-chart.js);
// - one <progress> covers the whole set, with the row, the step and the time left for all
//   four; Stop pauses and Resume goes on; a hidden tab pauses it too (Page Visibility);
// - each finished row is posted (POST /lab/reruns/<n>/rows/<row>): the server keeps it once
//   and answers with the side-by-side drawn again (and, after the fourth, the sentence
//   composed from the numbers), which is shown and announced;
// - the row in training and its step are kept in localStorage, so that after a reload the
//   panel says which row was cut short and that it starts again from step 0 (the rows kept
//   before it stay, on the server); a panel opened in a second tab while another trains (its
//   step kept moments ago) says so instead, offers nothing to start, and draws the panel again
//   from the server each time that tab keeps a row (the storage event), so it shows what the
//   server holds.

import { growingCurve } from "./accuracy-chart.js";
import { duration, fill, loadPanel } from "./lab-tools.js";
import { paragraph } from "./loaders.js";
import { announce, pageWord } from "./page/announce.js";
import { WorkerTrainer, postResult, trainingControls } from "./training-panel.js";

/** @typedef {import("./lab/trainer.js").LabConfig} LabConfig */
/** One row of the set as the server draws it into data-set (web.views.rerun._data).
 * @typedef {{ key: string, name: string, config: LabConfig, seed: number }} SetRow */
/** The set the browser trains next: its number, its next row, whether the set on show is
 * whole (then Start begins the next one), the steps of a row, and the four rows.
 * @typedef {{ number: number, next: number, shownComplete: boolean, full: boolean,
 *   steps: number, rows: SetRow[] }} RerunSet */
/** A kept row's answer (web.routes.rerun).
 * @typedef {{ ok: boolean, message?: string, results?: string, data?: string,
 *   startLabel?: string, unreached?: boolean }} RowAnswer */
/** @typedef {import("./training-panel.js").WorkerMessage} WorkerMessage */
/** #rerun-train as the server draws it (templates/rerun_fragments.html).
 * @typedef {HTMLElement & { dataset: { set: string, progressText: string,
 *   hiddenText: string, stoppedText: string, rowStarted: string, restarted: string,
 *   elsewhere: string, continueLabel: string } }} TrainElement */
/** What localStorage keeps of the row in training: which tab trains it, and when its step was
 * kept (ms).
 * @typedef {{ number: number, row: string, step: number, tab?: string, at?: number }} InTraining */

// Where the row in training is kept between page loads (one set trains at a time), and this
// tab's name, which a reload keeps (sessionStorage) and another tab does not share.
const IN_TRAINING_KEY = "normdive.rerun.training";
const TAB_KEY = "normdive.rerun.tab";
// Said when a row's figures did not reach the server; Continue sends them again.
const NOT_SENT = pageWord("The server could not be reached, so this row's figures are not saved yet. Continue sends them again.");
// The weight of each new progress report in the set's rate (an exponential average).
const RATE_WEIGHT = 0.2;
// A tab training keeps its step far more often than this (every progress report); a step kept
// longer ago than this is a tab closed or hidden (which pauses), not one training now.
const TRAINING_ELSEWHERE_MS = 15_000;

/** @param {HTMLElement} details */
export async function openPanel(details) {
  await load(/** @type {HTMLElement | null} */ (details.querySelector("#rerun-body")));
}

/** The panel's contents from the server, wired.
 * @param {HTMLElement | null} body */
async function load(body) {
  await loadPanel(body, (loaded) => {
    const train = /** @type {TrainElement | null} */ (loaded.querySelector("#rerun-train"));
    if (train) wire(loaded, train);
  });
}

/** @returns {InTraining | null} */
function readInTraining() {
  try {
    const kept = JSON.parse(window.localStorage.getItem(IN_TRAINING_KEY) || "null");
    return kept && typeof kept.row === "string" && Number.isInteger(kept.step) ? kept : null;
  } catch {
    return null; // storage refused (a private window) or unreadable: nothing to say
  }
}

/** This tab's name, the same after a reload; "" where storage is refused.
 * @returns {string} */
function thisTab() {
  try {
    let name = window.sessionStorage.getItem(TAB_KEY);
    if (!name) {
      name = Math.random().toString(36).slice(2);
      window.sessionStorage.setItem(TAB_KEY, name);
    }
    return name;
  } catch {
    return "";
  }
}

/** @param {InTraining | null} value */
function keepInTraining(value) {
  try {
    if (value) window.localStorage.setItem(IN_TRAINING_KEY, JSON.stringify({ ...value, tab: thisTab(), at: Date.now() }));
    else window.localStorage.removeItem(IN_TRAINING_KEY);
  } catch {
    // storage refused: a reload then says nothing about the cut-short row
  }
}

/** @param {HTMLElement} body @param {TrainElement} train */
function wire(body, train) {
  /** @type {RerunSet} */
  let set = JSON.parse(train.dataset.set);
  const rows = set.rows;
  const steps = set.steps;
  const controls = trainingControls(train, "rerun");
  const { start, stop, bar, status, chartElement } = controls;
  const restartNote = /** @type {HTMLElement} */ (train.querySelector("#rerun-restarted"));
  const results = /** @type {HTMLElement} */ (body.querySelector("#rerun-results"));
  // Each row's curve on this device, drawn by the server as far as the set on show has kept it.
  const curves = rows.map((row) => growingCurve(chartElement, row.key));
  let busy = false; // a set is in training (a row, or the post between two rows)
  let index = set.next; // the row in training, or next
  /** @type {number | null} steps a second, averaged over the set's reports */
  let rate = null;
  const trainer = new WorkerTrainer(train, controls, {
    stoppedText: (step) => fill(train.dataset.stoppedText, { step, name: rows[index].name }),
    onMessage: (message) => onMessage(message),
  });

  const overall = (/** @type {number} */ step) => (100 * (index * steps + step)) / (rows.length * steps);

  /** Another tab is training this set: say where it is, and offer nothing to start.
   * @param {InTraining} there */
  const elsewhere = (there) => {
    const name = rows.find((row) => row.key === there.row)?.name ?? there.row;
    restartNote.textContent = fill(train.dataset.elsewhere, { name, step: there.step });
    restartNote.hidden = false;
    start.disabled = true;
  };
  // What another tab keeps of its training: where it is now, or (gone) a row kept or its set
  // ended, so this panel is drawn again from what the server holds. Never this tab's own
  // writes (the storage event comes only to the other tabs); once this tab trains, it stops.
  const listening = new AbortController();
  window.addEventListener(
    "storage",
    (event) => {
      if (event.key !== IN_TRAINING_KEY || busy) return;
      const there = readInTraining();
      if (there) elsewhere(there);
      else {
        listening.abort();
        delete body.dataset.loaded;
        load(body);
      }
    },
    { signal: listening.signal },
  );

  // A row whose step another tab kept moments ago is that tab's, training; any other was cut
  // short by a reload (or a closed tab) and starts again from step 0: say which.
  const cut = readInTraining();
  const ours = cut && !set.shownComplete && cut.number === set.number && cut.row === rows[index]?.key;
  const training = cut && cut.tab !== thisTab() && Date.now() - (cut.at ?? 0) < TRAINING_ELSEWHERE_MS;
  if (cut && ours && training) elsewhere(cut);
  else if (cut && ours && cut.step > 0) {
    restartNote.textContent = fill(train.dataset.restarted, { name: rows[index].name, step: cut.step });
    restartNote.hidden = false;
    start.textContent = train.dataset.continueLabel;
  }
  bar.value = set.shownComplete ? 100 : overall(0);

  /** Show a write's answer: the side-by-side drawn again, or why nothing was saved.
   * @param {RowAnswer} answer */
  const showAnswer = (answer) => {
    if (answer.results !== undefined) results.innerHTML = answer.results;
    else results.prepend(paragraph("alert", answer.message || NOT_SENT));
  };

  /** The set stops here (whole, refused, or a row whose figures did not reach the server):
   * the server's view of it, when it answered, decides what comes next.
   * @param {RowAnswer} answer */
  const settle = (answer) => {
    busy = false;
    if (answer.results !== undefined) keepInTraining(null);
    if (answer.data) set = JSON.parse(answer.data);
    start.disabled = Boolean(set.full);
    if (set.full) start.setAttribute("aria-describedby", "rerun-full");
    if (answer.startLabel) start.textContent = answer.startLabel;
    announce(answer.message || NOT_SENT);
    results.focus();
  };

  /** A finished row whose figures did not reach the server: Continue sends them again.
   * @type {{ curve: object[], final: object } | null} */
  let unsent = null;

  /** Post the finished row; then on to the next, or the set's end.
   * @param {{ curve: object[], final: object }} message */
  const finish = async (message) => {
    const row = rows[index];
    const url = `/lab/reruns/${set.number}/rows/${encodeURIComponent(row.key)}`;
    const answer = /** @type {RowAnswer} */ (await postResult(url, message));
    if (answer.results === undefined) {
      // Nothing the server kept (the network, or a refusal of the request itself): the
      // row's figures wait here to be sent again. The server's own words, when it said any.
      unsent = message;
      const said = answer.unreached || !answer.message ? NOT_SENT : answer.message;
      showAnswer({ ok: false, message: said });
      status.textContent = said;
      return settle({ ok: false, message: said, startLabel: train.dataset.continueLabel });
    }
    showAnswer(answer);
    unsent = null;
    if (!answer.ok) {
      // Refused (another tab kept this row first, say): the table and the answer say why;
      // the status line would only repeat a row that is over.
      status.textContent = "";
      return settle(answer);
    }
    keepInTraining(null);
    index += 1;
    bar.value = overall(0);
    if (index < rows.length) return trainRow(answer.message);
    bar.value = 100;
    status.textContent = "";
    settle(answer);
  };

  /** @param {WorkerMessage} message */
  const onMessage = (message) => {
    if (message.type === "progress") {
      bar.value = overall(message.step);
      keepInTraining({ number: set.number, row: rows[index].key, step: message.step });
      if (trainer.paused) return;
      // The rate over the set so far: a new row's first reports alone swing widely.
      if (Number.isFinite(message.steps_per_second)) {
        rate = rate === null ? message.steps_per_second : RATE_WEIGHT * message.steps_per_second + (1 - RATE_WEIGHT) * rate;
      }
      const left = (rows.length - index) * steps - message.step;
      status.textContent = fill(train.dataset.progressText, {
        row: index + 1,
        rows: rows.length,
        name: rows[index].name,
        step: message.step,
        steps,
        left: duration(rate ? left / rate : NaN),
      });
    } else if (message.type === "eval") {
      curves[index].add(message.step, message.heldout_accuracy);
    } else if (message.type === "done") {
      finish(message);
    } else if (message.type === "error") {
      settle({ ok: false, message: message.message });
    }
  };

  /** Train row `index`, saying so after `before` (the row just kept, in one announcement so
   * that neither is lost), and keep the focus on Stop when it was there.
   * @param {string} [before] */
  const trainRow = (before = "") => {
    const row = rows[index];
    curves[index].clear();
    const said = fill(train.dataset.rowStarted, { row: index + 1, rows: rows.length, name: row.name });
    status.textContent = said;
    announce(`${before} ${said}`.trim());
    keepInTraining({ number: set.number, row: row.key, step: 0 });
    trainer.start(row.config, row.seed);
  };

  start.addEventListener("click", () => {
    if (busy) return;
    busy = true;
    listening.abort(); // this tab trains now: the others follow it
    start.disabled = true;
    if (set.shownComplete) {
      // A whole set is on show: this begins the next one, from its first row.
      set = { ...set, shownComplete: false };
      index = 0;
      for (const curve of curves) curve.clear();
      // The table shows the set on show until the new one's first row is kept: not its
      // device's figures, nor its sentence.
      for (const cell of results.querySelectorAll("td.device")) cell.textContent = results.dataset.notYet ?? "";
      results.querySelector("#rerun-verdict")?.remove();
      results.querySelector("#rerun-kept")?.setAttribute("hidden", "");
    } else {
      index = set.next;
    }
    restartNote.hidden = true;
    if (unsent) finish(unsent);
    else trainRow();
    stop.focus();
  });
}
