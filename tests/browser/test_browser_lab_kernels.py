"""The lab's Worker in Chromium, served by the app with its own security headers (no CSP
bypass): it trains on the WebAssembly kernels (static/lab/kernels.js), which the policy's
'wasm-unsafe-eval' lets it compile, and its curve is the plain-JavaScript path's to the
parity tolerance; under a policy without that token it falls back to the JavaScript path and
says why. What the Worker says it ran on is what ran (kernels.js reports the path its model's
heap took)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Route

from helpers import ablation_recording, build_settings, migrated_sqlite_url, write_recording
from live_server import LiveServer
from normdive.web.app import create_app

pytestmark = pytest.mark.browser

NewPage = Callable[..., Page]
WORKER = "/static/lab/worker.js"
# A tiny run (tests/test_lab_parity.py's config): seconds on either path.
TINY = {
    "d_model": 8,
    "n_heads": 2,
    "mlp_ratio": 2,
    "depth": 2,
    "copy_length": 3,
    "vocab_size": 5,
    "batch_size": 4,
    "steps": 30,
    "warmup_steps": 5,
    "learning_rate": 1e-2,
    "min_lr_ratio": 0.1,
    "weight_decay": 0.01,
    "grad_clip": 1.0,
    "eval_every": 10,
    "heldout_size": 8,
    "heldout_seed": 7,
    "init": "gpt2",
    "layernorm": True,
    "residual": True,
    "eps": 1e-5,
}
SEED = 3
LOSS_TOLERANCE = 1e-4  # relative, as the parity tests

# In the page: the Worker trains TINY and answers its "done" message.
TRAIN = """
async ([url, config, seed]) => {
  const worker = new Worker(url, { type: "module" });
  try {
    return await new Promise((resolve, reject) => {
      worker.onmessage = (event) => {
        if (event.data.type === "done") resolve(event.data);
        if (event.data.type === "error") reject(new Error(event.data.message));
      };
      worker.onerror = (event) => reject(new Error(event.message || "the worker failed"));
      worker.postMessage({ type: "start", config, seed });
    });
  } finally {
    worker.terminate();
  }
}
"""

# In the page: the trainer itself on the plain-JavaScript path, its curve as the Worker's.
TRAIN_JS = """
async ([config, seed]) => {
  const { createTrainer } = await import("/static/lab/trainer.js");
  const trainer = createTrainer(config, seed, "js");
  const curve = [trainer.evaluate()];
  while (trainer.stepsDone < config.steps) {
    trainer.step();
    if (trainer.stepsDone % config.eval_every === 0) curve.push(trainer.evaluate());
  }
  return { path: trainer.path, curve };
}
"""


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("lab-kernels-live")
    recording = write_recording(folder, ablation_recording())
    server = LiveServer(
        create_app(build_settings(migrated_sqlite_url(folder), folder, recording_path=recording))
    )
    server.start()
    yield server
    server.stop()


def test_the_worker_trains_on_webassembly_under_the_app_s_policy(new_page: NewPage) -> None:
    page = new_page()
    answer = page.goto("/")
    assert answer is not None
    assert "'wasm-unsafe-eval'" in answer.headers["content-security-policy"]
    done: dict[str, Any] = page.evaluate(TRAIN, [WORKER, TINY, SEED])
    assert (done["kernels"], done["fallback"]) == ("wasm", "")
    plain: dict[str, Any] = page.evaluate(TRAIN_JS, [TINY, SEED])
    assert plain["path"] == "js"
    for ours, theirs in zip(done["curve"], plain["curve"], strict=True):
        assert ours["heldout_loss"] == pytest.approx(theirs["heldout_loss"], rel=LOSS_TOLERANCE)
        assert ours["heldout_accuracy"] == pytest.approx(theirs["heldout_accuracy"], abs=1e-12)


def test_a_policy_without_wasm_unsafe_eval_falls_back_to_javascript(new_page: NewPage) -> None:
    """The same Worker, its script answered with the app's policy less 'wasm-unsafe-eval' (a
    host that rewrites the headers): compiling the kernels fails, so it trains on the plain
    JavaScript path and says why."""
    page = new_page()

    def without_wasm(route: Route) -> None:
        answer = route.fetch()
        headers = dict(answer.headers)
        policy = headers["content-security-policy"]
        headers["content-security-policy"] = policy.replace(" 'wasm-unsafe-eval'", "")
        route.fulfill(response=answer, headers=headers)

    page.context.route(f"**{WORKER}", without_wasm)
    page.goto("/")
    done: dict[str, Any] = page.evaluate(TRAIN, [WORKER, TINY, SEED])
    assert done["kernels"] == "js"
    assert "Content Security Policy" in done["fallback"]  # as Chromium words its refusal
    assert [point["step"] for point in done["curve"]] == [0, 10, 20, 30]
