"""The lab's trainer (static/lab/, docs/lab.md) against its PyTorch twin at the lab config, side
by side in one run:

    .venv/bin/python bench/lab.py            # steps/s: node, Chromium at 4x CPU throttling, PyTorch
    .venv/bin/python bench/lab.py --full     # and a whole default lab run in node, compared with
                                             # the recorded grid cell of the same seed

- node: the trainer itself (trainer.js), in the main thread.
- Chromium (Debian's, through Playwright): the module Worker the page starts (worker.js),
  unthrottled; and the trainer in the page's main thread, throttled with CDP
  Emulation.setCPUThrottlingRate (a stand-in for a mid-range phone) and not. The throttling
  slows the page's main thread only: a dedicated Worker runs at full speed under it (measured:
  the Worker's steps/s are the same at 1x and 4x), so the phone stand-in is the main thread,
  where the same code runs through the same engine.
- PyTorch: normdive.training.lab's LabRun (float64, one thread, batches drawn by lab32 in
  Python as the recorder draws them).
Goals (bench/RESULTS.md, "The lab"): the default lab run in <= 60 s at 4x, and JS >= 0.5x
PyTorch's single-thread steps/s.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from normdive.lab.grid import LabConfig, LabGridProblem, lab_path_for, read_lab_grid
from normdive.training.lab import LabRun, pinned_thread, train_lab_cell

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "src" / "normdive" / "web" / "static"
RECORDING = ROOT / "recordings" / "the-transformer-block.json"
MODULES = (ROOT / "tests" / "js" / "lab_modules.mjs").as_uri()
NODE = shutil.which("node") or "/usr/bin/node"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]
CPU_SLOWDOWN = 4
SEED = 0
WARMUP_STEPS = 10  # not timed: the JIT's (and torch's) first steps
TIMED_STEPS = 60
BROWSER_STEPS = 40  # each Worker run is this many steps
ROUNDS = 5  # node and PyTorch: the median of this many timings, taken in turn
BROWSER_ROUNDS = 3  # Chromium: the median of this many
GOAL_RUN_S = 60.0
GOAL_RATIO = 0.5
GOAL_ACCURACY_POINTS = 2.0
BROWSER_TIMEOUT_MS = 600_000

# Node: WARMUP_STEPS untimed, then `rounds` timings of `steps` updates; with "full", a whole
# run (evaluations at eval_every and the end, as the Worker runs it) and its final figures.
NODE_SCRIPT = f"""
import {{ importLab }} from {json.dumps(MODULES)};
const {{ createTrainer }} = await importLab("trainer.js");
const [config, seed, warmup, steps, rounds, full] = JSON.parse(process.argv[1]);
const trainer = createTrainer(config, seed);
for (let i = 0; i < warmup; i++) trainer.step();
const rates = [];
for (let r = 0; r < rounds; r++) {{
  const start = performance.now();
  for (let i = 0; i < steps; i++) trainer.step();
  rates.push(steps / ((performance.now() - start) / 1000));
}}
const evalStart = performance.now();
trainer.evaluate();
const evaluate_s = (performance.now() - evalStart) / 1000;
let run = null;
if (full) {{
  const start = performance.now();
  const fresh = createTrainer(config, seed);
  fresh.evaluate();
  let last = null;
  while (fresh.stepsDone < config.steps) {{
    fresh.step();
    if (fresh.stepsDone % config.eval_every === 0 || fresh.stepsDone === config.steps) {{
      last = fresh.evaluate();
    }}
  }}
  run = {{ ...last, wall_s: (performance.now() - start) / 1000 }};
}}
process.stdout.write(JSON.stringify({{ rates, evaluate_s, run }}));
"""

# In the page: start the Worker on `config`, collect (time, message) until done.
BROWSER_SCRIPT = """
async ([config, seed]) => {
  const worker = new Worker(new URL("/lab/worker.js", location.href), { type: "module" });
  const seen = [];
  const started = performance.now();
  const done = new Promise((resolve, reject) => {
    worker.onmessage = (event) => {
      seen.push([performance.now() - started, event.data.type, event.data.step ?? null]);
      if (event.data.type === "done") resolve();
      if (event.data.type === "error") reject(new Error(event.data.message));
    };
    worker.onerror = (event) => reject(new Error(event.message));
  });
  worker.postMessage({ type: "start", config, seed });
  await done;
  worker.terminate();
  return seen;
}
"""


# In the page's main thread: the trainer itself, timed as in node.
MAIN_THREAD_SCRIPT = """
async ([config, seed, warmup, steps]) => {
  const { createTrainer } = await import("/lab/trainer.js");
  const trainer = createTrainer(config, seed);
  for (let i = 0; i < warmup; i++) trainer.step();
  const start = performance.now();
  for (let i = 0; i < steps; i++) trainer.step();
  const rate = steps / ((performance.now() - start) / 1000);
  const evalStart = performance.now();
  trainer.evaluate();
  return [rate, (performance.now() - evalStart) / 1000];
}
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def lab_config() -> LabConfig:
    """The default lab run: the lab config's base, the row with both switches on."""
    return LabConfig()


def node_figures(config: LabConfig, *, full: bool, rounds: int) -> dict[str, Any]:
    argument = json.dumps(
        [config.model_dump(mode="json"), SEED, WARMUP_STEPS, TIMED_STEPS, rounds, full]
    )
    completed = subprocess.run(
        [NODE, "--input-type=module", "-e", NODE_SCRIPT, argument],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def node_and_torch_rates(config: LabConfig) -> tuple[list[float], list[float], float]:
    """Steps/s of node and of PyTorch, one timing of each in turn, ROUNDS times, so that the
    shared machine's load hits both alike; and one node evaluation's seconds."""
    with pinned_thread():
        run = LabRun(config, SEED)
        for _ in range(WARMUP_STEPS):
            run.update()
        node_rates, torch_rates, evaluations = [], [], []
        for _ in range(ROUNDS):
            node = node_figures(config, full=False, rounds=1)
            node_rates.extend(node["rates"])
            evaluations.append(node["evaluate_s"])
            start = time.perf_counter()
            for _ in range(TIMED_STEPS):
                run.update()
            torch_rates.append(TIMED_STEPS / (time.perf_counter() - start))
        return node_rates, torch_rates, statistics.median(evaluations)


def browser_figures(config: LabConfig) -> dict[str, float]:
    """In one Chromium: the Worker's steps/s between its first and last progress message (so
    neither the module's loading nor the step-0 evaluation counts), unthrottled; and the
    trainer's steps/s and one evaluation's seconds in the page's main thread, at 1x and at
    CPU_SLOWDOWN."""
    timed = config.model_copy(update={"steps": BROWSER_STEPS, "eval_every": BROWSER_STEPS})
    handler = functools.partial(_Quiet, directory=str(STATIC))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    figures: dict[str, float] = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                page = browser.new_page()
                page.set_default_timeout(BROWSER_TIMEOUT_MS)
                page.goto(base + "/lab/")
                worker_rates = []
                for _ in range(BROWSER_ROUNDS):
                    seen = page.evaluate(BROWSER_SCRIPT, [timed.model_dump(mode="json"), SEED])
                    progress = [(t, step) for t, kind, step in seen if kind == "progress"]
                    (t0, s0), (t1, s1) = progress[0], progress[-1]
                    worker_rates.append((s1 - s0) / ((t1 - t0) / 1000))
                figures["worker"] = statistics.median(worker_rates)
                cdp = page.context.new_cdp_session(page)
                for rate in (1, CPU_SLOWDOWN):
                    cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})
                    rates, evaluations = [], []
                    for _ in range(BROWSER_ROUNDS):
                        step_rate, evaluate_s = page.evaluate(
                            MAIN_THREAD_SCRIPT,
                            [config.model_dump(mode="json"), SEED, WARMUP_STEPS, TIMED_STEPS],
                        )
                        rates.append(step_rate)
                        evaluations.append(evaluate_s)
                    figures[f"main_{rate}"] = statistics.median(rates)
                    figures[f"evaluate_{rate}"] = statistics.median(evaluations)
            finally:
                browser.close()
    finally:
        server.shutdown()
    return figures


def projected_run_s(config: LabConfig, steps_per_second: float, evaluate_s: float) -> float:
    """The default run's seconds: its updates plus its evaluations (step 0, every eval_every,
    and the last)."""
    evaluations = 1 + config.steps // config.eval_every + (config.steps % config.eval_every > 0)
    return config.steps / steps_per_second + evaluations * evaluate_s


def recorded_cell_accuracy(config: LabConfig) -> tuple[float, str]:
    """The final held-out accuracy of the recorded cell of this config and seed, or of a
    PyTorch run trained now when the grid has no such cell (and where it came from)."""
    path = lab_path_for(RECORDING)
    try:
        cell = read_lab_grid(path).cell(
            config.depth, config.layernorm, config.residual, config.eps, config.init, SEED
        )
    except LabGridProblem as problem:
        cell, why = None, problem.message
    else:
        why = f"{path.name} has no cell for this config and seed"
    if cell is not None:
        return float(cell.final.heldout_accuracy), f"the recorded cell ({path.name})"
    fresh = train_lab_cell(config, SEED)
    return float(fresh.final.heldout_accuracy), f"a PyTorch run trained now ({why})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also a whole default run in node")
    args = parser.parse_args()
    config = lab_config()
    print(
        f"lab config: depth {config.depth}, d_model {config.d_model}, {config.n_heads} heads, "
        f"mlp x{config.mlp_ratio}, copy length {config.copy_length}, vocab {config.vocab_size}, "
        f"batch {config.batch_size}, {config.steps} steps, eval every {config.eval_every} on "
        f"{config.heldout_size}; layernorm {config.layernorm} (eps {config.eps}), residual "
        f"{config.residual}, init {config.init}, seed {SEED}"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    node_rates, torch_rates, node_evaluate_s = node_and_torch_rates(config)
    node_rate, torch_rate = statistics.median(node_rates), statistics.median(torch_rates)
    chromium = browser_figures(config)
    slow = chromium[f"main_{CPU_SLOWDOWN}"]
    projected = projected_run_s(config, slow, chromium[f"evaluate_{CPU_SLOWDOWN}"])
    print(f"{'':40}{'steps/s':>9}{'x PyTorch':>11}")
    rows = [
        ("JS, node (main thread)", node_rate),
        ("JS, Chromium Worker", chromium["worker"]),
        ("JS, Chromium main thread", chromium["main_1"]),
        (f"JS, Chromium main thread, CPU / {CPU_SLOWDOWN}", slow),
        ("PyTorch float64, 1 thread", torch_rate),
    ]
    for name, rate in rows:
        print(f"{name:40}{rate:9.1f}{rate / torch_rate:10.2f}x")
    print(
        f"one held-out evaluation: node {1e3 * node_evaluate_s:.0f} ms, Chromium "
        f"{1e3 * chromium['evaluate_1']:.0f} ms, at CPU / {CPU_SLOWDOWN} "
        f"{1e3 * chromium[f'evaluate_{CPU_SLOWDOWN}']:.0f} ms"
    )
    ratio = node_rate / torch_rate
    print(
        f"projected default run ({config.steps} steps) at CPU / {CPU_SLOWDOWN}: {projected:.0f} s"
        f" (goal <= {GOAL_RUN_S:.0f} s: {'met' if projected <= GOAL_RUN_S else 'not met'})"
    )
    print(
        f"JS (node) / PyTorch: {ratio:.2f}x (goal >= {GOAL_RATIO}x: "
        f"{'met' if ratio >= GOAL_RATIO else 'not met'})"
    )
    print(
        "node, PyTorch steps/s by round: "
        + "; ".join(f"{a:.1f}, {b:.1f}" for a, b in zip(node_rates, torch_rates, strict=True))
    )
    if args.full:
        run = node_figures(config, full=True, rounds=0)["run"]
        theirs, source = recorded_cell_accuracy(config)
        points = 100 * abs(run["heldout_accuracy"] - theirs)
        print(
            f"full run in node: {run['wall_s']:.1f} s, final held-out accuracy "
            f"{100 * run['heldout_accuracy']:.1f} % against {100 * theirs:.1f} % from {source}: "
            f"{points:.1f} points apart (goal <= {GOAL_ACCURACY_POINTS:.0f}: "
            f"{'met' if points <= GOAL_ACCURACY_POINTS else 'not met'})"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
