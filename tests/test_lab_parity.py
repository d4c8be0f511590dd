"""The lab's JavaScript trainer (static/lab/) against its contract (docs/lab.md) and its PyTorch
twin (normdive.training.lab), on a tiny config, on both kernel paths (static/lab/kernels.js:
WebAssembly SIMD and plain JavaScript).

Node runs tests/js/lab_check.mjs, which imports the very files the page's Worker loads, once
per path. Checked: the generator's test vectors; erf against the C library's; the
initial parameters of both inits; every parameter tensor's gradient against finite differences
with layer norm on and off, residuals on and off, eps 0 and 1e-5; and the training loss of each
of the first 50 updates against PyTorch's, for the four rows and both inits.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from normdive.lab.config import LabConfig
from normdive.training.lab import initial_parameters, losses, train_lab_cell

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parent.parent
CHECK_SCRIPT = ROOT / "tests" / "js" / "lab_check.mjs"
VECTORS = ROOT / "tests" / "lab_vectors.json"
NODE = shutil.which("node") or "/usr/bin/node"
NODE_TIMEOUT_S = 120

# Width 8, 2 heads, 2 blocks, copy length 3 (6 positions), 5 symbols (6 tokens), 4 sequences.
TINY = {
    "d_model": 8,
    "n_heads": 2,
    "mlp_ratio": 2,
    "depth": 2,
    "copy_length": 3,
    "vocab_size": 5,
    "batch_size": 4,
    "steps": 50,
    "warmup_steps": 5,
    "learning_rate": 1e-2,
    "eval_every": 10,
    "heldout_size": 8,
}
SEED = 3
INITS = ("gpt2", "pytorch")
# (layernorm, residual): the four rows.
ROWS = ((True, True), (True, False), (False, True), (False, False))
LAB_EPS = 1e-5

# docs/lab.md, "Parity".
VECTOR_FLOAT_TOLERANCE = 1e-15
INITIAL_TOLERANCE = 1e-12
LOSS_STEPS = 50
LOSS_TOLERANCE = 1e-4  # relative, at every update
# Gradients: the five-point central difference with step FD_STEP has a truncation error of
# order FD_STEP^4 and a rounding error near 1e-16 x loss / FD_STEP (a few 1e-11 here), so an
# entry agrees when |analytic - numeric| <= GRADIENT_TOLERANCE x the larger of the two plus
# FD_NOISE: relative 1e-6 for every gradient above 1e-4, and no claim below the method's noise.
FD_STEP = 1e-5
FD_PER_TENSOR = 3  # entries spread over each tensor, besides its largest gradient
GRADIENT_TOLERANCE = 1e-6
FD_NOISE = 1e-10
ERF_TOLERANCE = 2e-15  # relative; math.erf is the C library's, correctly rounded or nearly


def _config(layernorm: bool, residual: bool, init: str, eps: float | None = LAB_EPS) -> LabConfig:
    return LabConfig.model_validate(
        {
            **TINY,
            "layernorm": layernorm,
            "residual": residual,
            "eps": eps if layernorm else None,
            "init": init,
        }
    )


def _js_config(config: LabConfig) -> dict[str, Any]:
    return config.model_dump(mode="json")


GRADIENT_CONFIGS = [
    _config(layernorm, residual, init, eps)
    for (layernorm, residual), init, eps in product(ROWS, INITS, (0.0, LAB_EPS))
    if layernorm or eps == LAB_EPS
]
INITIAL_CONFIGS = [
    _config(layernorm, True, init) for layernorm, init in product((True, False), INITS)
]
LOSS_CONFIGS = [
    _config(layernorm, residual, init) for (layernorm, residual), init in product(ROWS, INITS)
]


def _erf_points() -> list[float]:
    rng = random.Random(SEED)
    points = [0.0, -0.0, 1e-300, 1e-9, 0.5, 1.0, 2.0, -2.0, 2.5, 5.9, 6.0, 7.0, -30.0]
    points += [rng.uniform(-7.0, 7.0) for _ in range(2000)]
    points += [rng.uniform(-2.5, 2.5) for _ in range(2000)]
    return points


# The kernel paths (static/lab/kernels.js). Node 20 has WebAssembly SIMD, so both must run.
PATHS = ("wasm", "js")


@pytest.fixture(scope="module", params=PATHS)
def answer(request: pytest.FixtureRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    """One Node run per kernel path: the request and Node's answer."""
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    count = max(len(case["next_u32"]) for case in cases)
    ask: dict[str, Any] = {
        "path": request.param,
        "vectors": [
            {"seed": case["seed"], "stream": case["stream"], "count": count} for case in cases
        ],
        "erf": _erf_points(),
        "initial": [{"config": _js_config(c), "seed": SEED} for c in INITIAL_CONFIGS],
        "gradients": [
            {"config": _js_config(c), "seed": SEED, "per_tensor": FD_PER_TENSOR, "h": FD_STEP}
            for c in GRADIENT_CONFIGS
        ],
        "losses": [
            {"config": _js_config(c), "seed": SEED, "steps": LOSS_STEPS} for c in LOSS_CONFIGS
        ],
    }
    completed = subprocess.run(
        [NODE, str(CHECK_SCRIPT)],
        input=json.dumps(ask),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=NODE_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == "", completed.stderr  # no warnings either
    result: dict[str, Any] = json.loads(completed.stdout)
    return ask, result


def test_the_models_ran_on_the_path_asked_for(
    answer: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    ask, result = answer
    assert result["paths"] == list(PATHS)  # Node validates the SIMD probe and compiles the module
    assert result["path"] == ask["path"]


def test_the_generator_gives_the_recorded_vectors(
    answer: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    _, result = answer
    for case, javascript in zip(cases, result["vectors"], strict=True):
        where = (case["seed"], case["stream"])
        n = len(case["next_u32"])
        assert javascript["u32"][:n] == case["next_u32"], where
        assert javascript["uniform"][: len(case["uniform"])] == case["uniform"], where
        assert javascript["below"]["16"][: len(case["below_16"])] == case["below_16"], where
        for ours, theirs in zip(javascript["normal"], case["normal"], strict=False):
            assert abs(ours - theirs) <= VECTOR_FLOAT_TOLERANCE * max(1.0, abs(theirs)), where


def test_below_stays_in_range_for_every_n(answer: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, result = answer
    for javascript in result["vectors"]:
        for n, draws in javascript["below"].items():
            assert all(0 <= d < int(n) and d == int(d) for d in draws), n


def test_erf_agrees_with_the_c_library(answer: tuple[dict[str, Any], dict[str, Any]]) -> None:
    request, result = answer
    for x, ours in zip(request["erf"], result["erf"], strict=True):
        theirs = math.erf(x)
        assert abs(ours - theirs) <= ERF_TOLERANCE * abs(theirs), x
        assert theirs == 0 or math.copysign(1.0, ours) == math.copysign(1.0, theirs), x


def test_initial_parameters_equal_pytorch_s(answer: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, result = answer
    for config, javascript in zip(INITIAL_CONFIGS, result["initial"], strict=True):
        python = initial_parameters(config, SEED)
        assert list(javascript) == list(python), config  # the same names in the same order
        for name, values in python.items():
            assert len(javascript[name]) == len(values), name
            worst = max(abs(a - b) for a, b in zip(javascript[name], values, strict=True))
            assert worst <= INITIAL_TOLERANCE, (config.init, config.layernorm, name, worst)


def test_gradients_agree_with_finite_differences(
    answer: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, result = answer
    for config, checks in zip(GRADIENT_CONFIGS, result["gradients"], strict=True):
        row = (config.layernorm, config.residual, config.eps, config.init)
        tensors = {check["name"] for check in checks}
        assert len(tensors) == len(initial_parameters(config, SEED)), row  # every tensor
        for check in checks:
            analytic, numeric = check["analytic"], check["numeric"]
            scale = max(abs(analytic), abs(numeric))
            assert abs(analytic - numeric) <= GRADIENT_TOLERANCE * scale + FD_NOISE, (row, check)


def test_every_tensor_is_checked_at_relative_precision(
    answer: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The noise floor decides nothing alone: every tensor has an entry whose gradient is large
    enough that the relative bound binds. Not in the GPT-2-initialised rows without layer
    norm: their early blocks' gradients are near or below 1e-10 at these small weights (the
    vanishing the lesson is about), so there the check is the absolute one."""
    _, result = answer
    for config, checks in zip(GRADIENT_CONFIGS, result["gradients"], strict=True):
        if config.init == "gpt2" and not config.layernorm:
            continue
        binding = {c["name"] for c in checks if GRADIENT_TOLERANCE * abs(c["analytic"]) > FD_NOISE}
        tensors = {c["name"] for c in checks}
        assert binding == tensors, (config, sorted(tensors - binding))


def test_the_first_50_losses_equal_pytorch_s(
    answer: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, result = answer
    for config, javascript in zip(LOSS_CONFIGS, result["losses"], strict=True):
        python = losses(config, SEED, LOSS_STEPS)
        row = (config.layernorm, config.residual, config.init)
        assert len(javascript) == len(python) == LOSS_STEPS
        for step, (ours, theirs) in enumerate(zip(javascript, python, strict=True), start=1):
            assert math.isfinite(theirs), (row, step)
            assert abs(ours - theirs) <= LOSS_TOLERANCE * abs(theirs), (row, step, ours, theirs)


# The Worker's protocol (static/lab/worker.js), driven in a Node worker thread.
WORKER_SCRIPT = ROOT / "tests" / "js" / "lab_worker.mjs"
WORKER_STEPS = 200  # long enough that the first progress comes well before the end
WORKER_EVAL_EVERY = 25


@pytest.fixture(scope="module")
def worker() -> tuple[LabConfig, dict[str, Any]]:
    config = _config(True, True, "gpt2").model_copy(
        update={"steps": WORKER_STEPS, "eval_every": WORKER_EVAL_EVERY}
    )
    completed = subprocess.run(
        [NODE, str(WORKER_SCRIPT)],
        input=json.dumps({"config": _js_config(config), "seed": SEED}),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=NODE_TIMEOUT_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == "", completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return config, result


def test_the_worker_trains_to_the_end_through_a_pause(
    worker: tuple[LabConfig, dict[str, Any]],
) -> None:
    _, result = worker
    assert result["paused_quiet"]  # nothing posted while paused
    run = result["run"]
    assert [m["type"] for m in run].count("done") == 1
    assert run[-1]["type"] == "done"
    evals = [m for m in run if m["type"] == "eval"]
    expected = list(range(0, WORKER_STEPS + 1, WORKER_EVAL_EVERY))
    assert [m["step"] for m in evals] == expected
    progress = [m for m in run if m["type"] == "progress"]
    steps = [m["step"] for m in progress]
    assert steps == sorted(set(steps)) and steps[-1] == WORKER_STEPS
    assert all(m["steps"] == WORKER_STEPS and m["steps_per_second"] > 0 for m in progress)
    done = run[-1]
    curve = done["curve"]
    assert [p["step"] for p in curve] == expected
    assert curve[0]["train_loss"] is None
    assert all(math.isfinite(p["train_loss"]) for p in curve[1:])
    for point, posted in zip(curve, evals, strict=True):
        assert set(point) == {"step", "train_loss", "heldout_loss", "heldout_accuracy"}
        assert point["heldout_loss"] == posted["heldout_loss"]
        assert point["heldout_accuracy"] == posted["heldout_accuracy"]
    assert done["final"] == {k: curve[-1][k] for k in ("step", "heldout_loss", "heldout_accuracy")}


def test_the_worker_s_curve_is_pytorch_s(worker: tuple[LabConfig, dict[str, Any]]) -> None:
    config, result = worker
    python = train_lab_cell(config, SEED).curve
    javascript = result["run"][-1]["curve"]
    for ours, theirs in zip(javascript, python, strict=True):
        assert ours["step"] == theirs.step
        assert abs(ours["heldout_loss"] - theirs.heldout_loss) <= LOSS_TOLERANCE * abs(
            theirs.heldout_loss
        ), ours
        assert ours["heldout_accuracy"] == pytest.approx(theirs.heldout_accuracy, abs=1e-12)
        if theirs.train_loss is not None:
            assert ours["train_loss"] == pytest.approx(theirs.train_loss, rel=LOSS_TOLERANCE)


def test_the_worker_stops_refuses_a_second_start_and_bad_configs(
    worker: tuple[LabConfig, dict[str, Any]],
) -> None:
    _, result = worker
    stop = result["stop"]
    errors = [m for m in stop if m["type"] == "error"]
    assert [m["message"] for m in errors] == ["a run is already training: stop it first"]
    assert stop[-1]["type"] == "stopped"  # and nothing after it
    # Progress is throttled, so the run may have gone on past the last step it reported.
    assert stop[-1]["step"] >= max(m["step"] for m in stop if m["type"] == "progress")
    assert not any(m["type"] == "done" for m in stop)
    assert [m["message"] for m in result["bad"]] == [
        "config.steps must be a positive integer, not 0"
    ]


def test_a_diverged_run_ends_with_the_grid_s_markers(
    worker: tuple[LabConfig, dict[str, Any]],
) -> None:
    """A rate that sends the weights to infinity: the run still ends, and its done message
    keeps the figures that are not numbers as the grid file does ("nan"), which JSON keeps."""
    _, result = worker
    done = result["diverged"][-1]
    assert done["type"] == "done"
    assert done["curve"][0]["heldout_loss"] != "nan"  # before the first update
    assert done["curve"][-1]["heldout_loss"] == "nan"
    assert done["final"]["heldout_loss"] == "nan"
    assert 0 <= done["final"]["heldout_accuracy"] <= 1
