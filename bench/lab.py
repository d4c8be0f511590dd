"""The lab's trainer (static/lab/, docs/lab.md) on its two kernel paths against its PyTorch
twin at the lab config, side by side in one run:

    .venv/bin/python bench/lab.py            # steps/s at depths 2 and 8; the four depth-8 rows
                                             # on the phone stand-in; the longest main-thread task
    .venv/bin/python bench/lab.py --full     # and each of those rows' final accuracy against
                                             # the recorded grid cell (or a PyTorch run of it)

- node: the trainer itself (trainer.js) on the WebAssembly SIMD kernels and on the plain
  JavaScript ones (kernels.js), in turn with PyTorch, so the shared machine's load hits all
  three alike.
- Chromium (Debian's, through Playwright): the module Worker the page starts (worker.js),
  unthrottled, and the path it says it ran on.
- The phone stand-in: the same trainer on the page's main thread, throttled with CDP
  Emulation.setCPUThrottlingRate to CPU / 4. The throttling slows the page's main thread only,
  not a dedicated Worker (measured: a Worker's steps/s are the same at 1x and 4x), so the
  stand-in is the main thread, where the same code runs through the same engine. All four
  rows at depth 8 are trained there end to end (300 updates and 13 evaluations each).
- The page's main thread while the Worker trains a default run at depth 8: the longest task
  it ran, from the Long Tasks API (tasks over 50 ms) and the lateness of a 5 ms timer.
- PyTorch: normdive.training.lab's LabRun (float64, one thread, batches drawn by lab32 in
  Python as the recorder draws them).
Goals (bench/RESULTS.md, "The lab"): WebAssembly >= 1.0x PyTorch's single-thread steps/s; the
four depth-8 rows in <= 2 minutes on the phone stand-in; the longest main-thread task < 50 ms.
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

from playwright.sync_api import Page, sync_playwright

from normdive.lab.config import LabConfig
from normdive.recording.lab_grid import LabGridProblem, lab_path_for, read_lab_grid
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
DEPTHS = (2, 8)
PHONE_DEPTH = 8
PATHS = ("wasm", "js")
# (layernorm, residual): the four rows, in the lesson's order.
ROWS = {
    "both": (True, True),
    "residuals only": (False, True),
    "layer norm only": (True, False),
    "neither": (False, False),
}
# Not timed: the first steps, while the engines compile (V8 runs WebAssembly on its baseline
# compiler until a function is hot) and torch warms up.
WARMUP_STEPS = 10
TIMED_UPDATES = 300  # a timing is this many updates over the depth: about a second in node
ROUNDS = 7  # node and PyTorch: the median of this many timings, taken in turn
BROWSER_STEPS = 300  # each Worker run is this many steps, timed from its second progress
BROWSER_ROUNDS = 3  # Chromium: the median of this many
GOAL_RATIO = 1.0
GOAL_ROWS_S = 120.0
GOAL_TASK_MS = 50.0
GOAL_ACCURACY_POINTS = 2.0
BROWSER_TIMEOUT_MS = 900_000

# Node: WARMUP_STEPS untimed, then one timing of `steps` updates on `path`.
NODE_SCRIPT = f"""
import {{ importLab }} from {json.dumps(MODULES)};
const {{ createTrainer }} = await importLab("trainer.js");
const [config, seed, warmup, steps, path] = JSON.parse(process.argv[1]);
const trainer = createTrainer(config, seed, path);
for (let i = 0; i < warmup; i++) trainer.step();
const start = performance.now();
for (let i = 0; i < steps; i++) trainer.step();
const rate = steps / ((performance.now() - start) / 1000);
process.stdout.write(JSON.stringify({{ rate, path: trainer.path }}));
"""

# In the page: start the Worker on `config`, collect (time, type, step, kernels) until done.
# With `probe`, the main thread also notes the longest task it ran meanwhile: the Long Tasks
# API's longest entry (it reports tasks over 50 ms), and the most a 5 ms timer fired late (a
# task shorter than that; the timer costs the page next to nothing, unlike a busy loop that
# would compete with the Worker for the cores).
BROWSER_SCRIPT = """
async ([config, seed, probe]) => {
  const worker = new Worker(new URL("/lab/worker.js", location.href), { type: "module" });
  const seen = [];
  let longTask = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) longTask = Math.max(longTask, entry.duration);
  });
  let late = 0;
  let ticking = probe;
  if (probe) {
    observer.observe({ type: "longtask" });
    let due = performance.now() + 5;
    const tick = () => {
      const now = performance.now();
      late = Math.max(late, now - due);
      due = now + 5;
      if (ticking) setTimeout(tick, 5);
    };
    setTimeout(tick, 5);
  }
  const started = performance.now();
  const done = new Promise((resolve, reject) => {
    worker.onmessage = (event) => {
      const m = event.data;
      seen.push([performance.now() - started, m.type, m.step ?? null, m.kernels ?? null]);
      if (m.type === "done") resolve();
      if (m.type === "error") reject(new Error(m.message));
    };
    worker.onerror = (event) => reject(new Error(event.message));
  });
  worker.postMessage({ type: "start", config, seed });
  await done;
  ticking = false;
  observer.disconnect();
  worker.terminate();
  return { seen, longest: Math.max(longTask, late), longTask, late };
}
"""

# In the page's main thread: whole runs of each config in turn (updates and evaluations, as
# the Worker runs them), on the best path; each run's seconds and final figures.
MAIN_THREAD_RUNS = """
async ([configs, seed]) => {
  const { createTrainer } = await import("/lab/trainer.js");
  const runs = [];
  for (const config of configs) {
    const start = performance.now();
    const trainer = createTrainer(config, seed);
    let last = trainer.evaluate();
    while (trainer.stepsDone < config.steps) {
      trainer.step();
      if (trainer.stepsDone % config.eval_every === 0 || trainer.stepsDone === config.steps) {
        last = trainer.evaluate();
      }
    }
    runs.push({ ...last, wall_s: (performance.now() - start) / 1000, path: trainer.path });
  }
  return runs;
}
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def lab_config(depth: int, layernorm: bool = True, residual: bool = True) -> LabConfig:
    """The lab's base config at this depth and row (eps the lab's default with layer norm)."""
    base = LabConfig()
    return base.model_copy(
        update={
            "depth": depth,
            "layernorm": layernorm,
            "residual": residual,
            "eps": base.eps if layernorm else None,
        }
    )


def timed_steps(config: LabConfig) -> int:
    return TIMED_UPDATES // config.depth


def node_rate(config: LabConfig, path: str) -> float:
    steps = timed_steps(config)
    argument = json.dumps([config.model_dump(mode="json"), SEED, WARMUP_STEPS, steps, path])
    completed = subprocess.run(
        [NODE, "--input-type=module", "-e", NODE_SCRIPT, argument],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    assert result["path"] == path, result  # the path asked for is the path that ran
    return float(result["rate"])


def rates_side_by_side(config: LabConfig) -> dict[str, list[float]]:
    """Steps/s of node on each path and of PyTorch, one timing of each in turn, ROUNDS times."""
    rates: dict[str, list[float]] = {key: [] for key in (*PATHS, "torch")}
    with pinned_thread():
        run = LabRun(config, SEED)
        for _ in range(WARMUP_STEPS):
            run.update()
        for _ in range(ROUNDS):
            for path in PATHS:
                rates[path].append(node_rate(config, path))
            start = time.perf_counter()
            for _ in range(timed_steps(config)):
                run.update()
            rates["torch"].append(timed_steps(config) / (time.perf_counter() - start))
    return rates


def worker_figures(page: Page, config: LabConfig) -> dict[str, Any]:
    """The Worker's steps/s between its second and last progress message (so neither loading,
    the step-0 evaluation nor the first slice, on the baseline compiler, counts), and the path
    it ran on."""
    timed = config.model_copy(update={"steps": BROWSER_STEPS, "eval_every": BROWSER_STEPS})
    rates, paths = [], set()
    for _ in range(BROWSER_ROUNDS):
        answer = page.evaluate(BROWSER_SCRIPT, [timed.model_dump(mode="json"), SEED, False])
        progress = [(t, step) for t, kind, step, _ in answer["seen"] if kind == "progress"]
        paths |= {k for _, kind, _, k in answer["seen"] if kind == "progress"}
        (t0, s0), (t1, s1) = progress[1], progress[-1]
        rates.append((s1 - s0) / ((t1 - t0) / 1000))
    return {"rate": statistics.median(rates), "paths": sorted(paths)}


def browser_figures() -> dict[str, Any]:
    """In one Chromium: the Worker at each depth; the page's longest task while the Worker
    trains a whole default run at PHONE_DEPTH; and the four rows at PHONE_DEPTH end to end on
    the main thread at CPU / CPU_SLOWDOWN."""
    handler = functools.partial(_Quiet, directory=str(STATIC))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    figures: dict[str, Any] = {}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                page = browser.new_page()
                page.set_default_timeout(BROWSER_TIMEOUT_MS)
                page.goto(base + "/lab/")
                for depth in DEPTHS:
                    figures[f"worker_{depth}"] = worker_figures(page, lab_config(depth))
                whole = lab_config(PHONE_DEPTH).model_dump(mode="json")
                answer = page.evaluate(BROWSER_SCRIPT, [whole, SEED, True])
                figures["longest_task_ms"] = answer["longest"]
                figures["long_task_ms"] = answer["longTask"]
                figures["timer_late_ms"] = answer["late"]
                figures["worker_run_s"] = answer["seen"][-1][0] / 1000
                cdp = page.context.new_cdp_session(page)
                cdp.send("Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN})
                configs = [
                    lab_config(PHONE_DEPTH, layernorm, residual).model_dump(mode="json")
                    for layernorm, residual in ROWS.values()
                ]
                start = time.perf_counter()
                figures["rows"] = page.evaluate(MAIN_THREAD_RUNS, [configs, SEED])
                figures["rows_s"] = time.perf_counter() - start
                cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
            finally:
                browser.close()
    finally:
        server.shutdown()
    return figures


def recorded_cell_accuracy(config: LabConfig) -> tuple[float, str]:
    """The final held-out accuracy of the recorded cell of this config and seed, or of a
    PyTorch run trained now when the grid has no such cell (and where it came from)."""
    path = lab_path_for(RECORDING)
    try:
        choice = config.model_dump(include={"depth", "layernorm", "residual", "eps", "init"})
        cell = read_lab_grid(path).run_at(**choice, seed=SEED)
    except LabGridProblem as problem:
        cell, why = None, problem.message
    else:
        why = f"{path.name} has no cell for this config and seed"
    if cell is not None:
        return float(cell.final.heldout_accuracy), f"the recorded cell ({path.name})"
    with pinned_thread():
        fresh = train_lab_cell(config, SEED)
    return float(fresh.final.heldout_accuracy), f"a PyTorch run trained now ({why})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--full", action="store_true", help="compare the four rows with their recorded cells"
    )
    args = parser.parse_args()
    config = lab_config(DEPTHS[0])
    print(
        f"lab config: depths {', '.join(map(str, DEPTHS))}, d_model {config.d_model}, "
        f"{config.n_heads} heads, mlp x{config.mlp_ratio}, copy length {config.copy_length}, "
        f"vocab {config.vocab_size}, batch {config.batch_size}, {config.steps} steps, eval every "
        f"{config.eval_every} on {config.heldout_size}; init {config.init}, eps {config.eps}, "
        f"seed {SEED}"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    rates = {depth: rates_side_by_side(lab_config(depth)) for depth in DEPTHS}
    chromium = browser_figures()
    header = "".join(f"{f'depth {d} steps/s':>17}{'x PyTorch':>11}" for d in DEPTHS)
    print(f"{'':34}{header}")
    for name, key in (
        ("WebAssembly SIMD, node", "wasm"),
        ("plain JS, node", "js"),
        ("PyTorch float64, 1 thread", "torch"),
    ):
        cells = ""
        for depth in DEPTHS:
            rate = statistics.median(rates[depth][key])
            cells += f"{rate:17.1f}{rate / statistics.median(rates[depth]['torch']):10.2f}x"
        print(f"{name:34}{cells}")
    cells = ""
    for depth in DEPTHS:
        rate = chromium[f"worker_{depth}"]["rate"]
        cells += f"{rate:17.1f}{rate / statistics.median(rates[depth]['torch']):10.2f}x"
    paths = sorted({p for d in DEPTHS for p in chromium[f"worker_{d}"]["paths"]})
    print(f"{'Chromium Worker (' + '/'.join(paths) + ')':34}{cells}")
    for depth in DEPTHS:
        ratios = [w / t for w, t in zip(rates[depth]["wasm"], rates[depth]["torch"], strict=True)]
        torch_rate = statistics.median(rates[depth]["torch"])
        ratio = statistics.median(rates[depth]["wasm"]) / torch_rate
        js_ratio = statistics.median(rates[depth]["js"]) / torch_rate
        print(
            f"depth {depth}: WebAssembly / PyTorch {ratio:.2f}x (goal >= {GOAL_RATIO}x: "
            f"{'met' if ratio >= GOAL_RATIO else 'not met'}); by round "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; JS / PyTorch {js_ratio:.2f}x"
        )
    rows_s = chromium["rows_s"]
    print(
        f"the four depth-{PHONE_DEPTH} rows end to end on the page's main thread at CPU / "
        f"{CPU_SLOWDOWN} ({chromium['rows'][0]['path']}): {rows_s:.0f} s (goal <= "
        f"{GOAL_ROWS_S:.0f} s: {'met' if rows_s <= GOAL_ROWS_S else 'not met'}); by row "
        + ", ".join(
            f"{name} {run['wall_s']:.0f} s"
            for name, run in zip(ROWS, chromium["rows"], strict=True)
        )
    )
    longest = chromium["longest_task_ms"]
    print(
        f"longest main-thread task while the Worker trains a default depth-{PHONE_DEPTH} run "
        f"({chromium['worker_run_s']:.1f} s): {longest:.1f} ms (goal < {GOAL_TASK_MS:.0f} ms: "
        f"{'met' if longest < GOAL_TASK_MS else 'not met'}); the longest Long Tasks entry "
        f"{chromium['long_task_ms']:.0f} ms (0: none over 50 ms), a 5 ms timer at most "
        f"{chromium['timer_late_ms']:.1f} ms late"
    )
    if args.full:
        for name, (layernorm, residual), run in zip(
            ROWS, ROWS.values(), chromium["rows"], strict=True
        ):
            theirs, source = recorded_cell_accuracy(lab_config(PHONE_DEPTH, layernorm, residual))
            points = 100 * abs(run["heldout_accuracy"] - theirs)
            verdict = "met" if points <= GOAL_ACCURACY_POINTS else "not met"
            print(
                f"{name}, depth {PHONE_DEPTH}: {100 * run['heldout_accuracy']:.1f} % against "
                f"{100 * theirs:.1f} % from {source}: {points:.1f} points apart (goal <= "
                f"{GOAL_ACCURACY_POINTS:.0f}: {verdict})"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
