// Drives the lab's Worker (src/normdive/web/static/lab/worker.js) through its message protocol
// in Node, for tests/test_lab_parity.py. The module runs in a worker thread given what a
// browser's Worker scope has and Node's lacks: `self.postMessage` and `self.onmessage`, and a
// MessageChannel whose messages are tasks taking turns with the parent's messages (Node's own
// delivers up to a thousand queued port messages in one go, starving the parent's). The script
// plays a scenario and writes what the Worker posted, as JSON.
//
// stdin:  {"config": LabConfig fields, "seed": int}
// stdout: {"run": [messages of a run paused after its first progress, then resumed to the end],
//          "paused_quiet": bool (nothing posted while paused), "stop": [messages of a run
//          stopped after its first progress, with a second start refused before the stop],
//          "bad": [messages after a start with steps 0],
//          "diverged": [messages of a run whose rate sends every weight to infinity]}

import { Worker } from "node:worker_threads";
import { readStdinJson } from "./lab_modules.mjs";

const WORKER_URL = new URL("../../src/normdive/web/static/lab/worker.js", import.meta.url).href;
const MODULES_URL = new URL("./lab_modules.mjs", import.meta.url).href;
const QUIET_MS = 300;

const SHIM = `
import { parentPort } from "node:worker_threads";
globalThis.self = globalThis;
globalThis.postMessage = (message) => parentPort.postMessage(message);
globalThis.MessageChannel = class {
  constructor() {
    this.port1 = { onmessage: null };
    this.port2 = { postMessage: (data) => setImmediate(() => this.port1.onmessage({ data })) };
  }
};
await import(${JSON.stringify(MODULES_URL)});
await import(${JSON.stringify(WORKER_URL)});
parentPort.on("message", (data) => globalThis.onmessage({ data }));
parentPort.postMessage({ type: "ready" });
`;

function spawn() {
  const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(SHIM)}`));
  const messages = [];
  const waiters = [];
  worker.on("message", (message) => {
    messages.push(message);
    for (const w of waiters.splice(0)) w();
  });
  worker.on("error", (error) => messages.push({ type: "thread-error", message: String(error) }));
  const until = async (predicate) => {
    while (!messages.some(predicate)) await new Promise((resolve) => waiters.push(resolve));
  };
  return { worker, messages, until };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const { config, seed } = await readStdinJson();
const answer = {};

{
  const { worker, messages, until } = spawn();
  await until((m) => m.type === "ready");
  worker.postMessage({ type: "start", config, seed });
  await until((m) => m.type === "progress");
  worker.postMessage({ type: "pause" });
  await sleep(QUIET_MS); // a slice in flight may still post; then nothing
  const before = messages.length;
  await sleep(QUIET_MS);
  answer.paused_quiet = messages.length === before;
  worker.postMessage({ type: "resume" });
  worker.postMessage({ type: "resume" }); // twice: still one chain of slices
  await until((m) => m.type === "done" || m.type === "error");
  worker.postMessage({ type: "start", config: { ...config, steps: 0 }, seed });
  await until((m) => m.type === "error");
  answer.run = messages.filter((m) => m.type !== "ready" && m.type !== "error");
  answer.bad = messages.filter((m) => m.type === "error");
  await worker.terminate();
}
{
  const { worker, messages, until } = spawn();
  await until((m) => m.type === "ready");
  // Far more updates than run before the stop arrives: on an idle machine the shared config's
  // whole run could end between its first progress and the second start, which would then be
  // taken, not refused.
  const long = { ...config, steps: config.steps * 1000 };
  worker.postMessage({ type: "start", config: long, seed });
  await until((m) => m.type === "progress");
  worker.postMessage({ type: "start", config: long, seed });
  worker.postMessage({ type: "stop" });
  await until((m) => m.type === "stopped");
  await sleep(QUIET_MS);
  answer.stop = messages.filter((m) => m.type !== "ready");
  await worker.terminate();
}
{
  const { worker, messages, until } = spawn();
  await until((m) => m.type === "ready");
  const diverging = { ...config, steps: 4, eval_every: 2, warmup_steps: 0, learning_rate: 1e300 };
  worker.postMessage({ type: "start", config: diverging, seed });
  await until((m) => m.type === "done" || m.type === "error");
  answer.diverged = messages.filter((m) => m.type !== "ready");
  await worker.terminate();
}
process.stdout.write(JSON.stringify(answer));
