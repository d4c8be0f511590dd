"""The lab in PyTorch: the stack of training/model.py in float64, every weight and batch drawn
from lab32, so the browser's JavaScript trainer can start from the same numbers and be held
to these (docs/lab.md is the contract; tests/test_lab_parity.py and bench/lab.py check it).

What differs from a recorded ablation row (training/train.py), and why:
- Weights: built as model.py builds them, then every parameter overwritten from stream
  WEIGHTS of the seed in the documented order, so no torch RNG decides anything.
- Batches and the held-out set: lab32 streams BATCHES (the seed's) and HELDOUT (the config's
  heldout_seed), drawn in pure Python, not torch generators.
- float64 throughout, and LayerNorm's eps is the config's (0 allowed).
- No per-block gradient norms or exact match: the lab's curve is loss and accuracy only.
The schedule (learning_rate), the optimiser (make_optimizer) and the clipping are train.py's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from normdive.lab.config import LabConfig
from normdive.lab.random import BATCHES, HELDOUT, WEIGHTS, Lab32
from normdive.recording.runs import Run, RunFinal, RunPoint
from normdive.training.model import GPT2_STD, CopyTransformer
from normdive.training.task import CopyBatch, copied_logits, separator
from normdive.training.train import REPORT_EVERY, Progress, learning_rate, make_optimizer

DTYPE = torch.float64
# torch's names for the two embeddings, and docs/lab.md's (the JavaScript trainer's).
EMBEDDING_NAMES = {
    "token_embedding.weight": "token_embedding",
    "position_embedding.weight": "position_embedding",
}
# The two projections that write into the residual stream: GPT-2 scales them by
# 1/sqrt(2 x depth) (model.py, gpt2_init).
RESIDUAL_PROJECTIONS = ("attn.out.weight", "mlp.down.weight")

LabProgressFn = Callable[[Progress], None]


@contextmanager
def pinned_thread() -> Iterator[None]:
    """One thread, as every recorded run and the browser's single Worker: the same thread
    count gives the same numbers. Denormals flushed as in train.pin_cpu (float64's subnormals
    start at 2.2e-308, far below anything these figures reach). Both are put back after: the
    flush is processor state of the calling thread, and left on it breaks any later code there
    that needs IEEE subnormals (Hypothesis refuses to draw floats under it). torch has no
    getter for the flush, so it goes back to the processor's default, off."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)


def lab_name(torch_name: str) -> str:
    """A parameter's name in docs/lab.md: torch's, the embeddings without ".weight"."""
    return EMBEDDING_NAMES.get(torch_name, torch_name)


def build_lab_model(config: LabConfig) -> CopyTransformer:
    """The lab's model with every parameter drawn from lab32 stream WEIGHTS of no seed yet:
    call `initialise(model, config, seed)` before use. float64; LayerNorm's eps the config's."""
    # init "pytorch" so the constructor does nothing beyond torch's defaults, all overwritten.
    run = config.run_config().model_copy(update={"init": "pytorch"})
    model = CopyTransformer(run, layernorm=config.layernorm, residual=config.residual)
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            assert config.eps is not None  # LabConfig: eps is given whenever layer norm is on
            module.eps = config.eps
    return model.to(DTYPE)


def _draws(
    config: LabConfig, name: str, shape: tuple[int, ...], fan_in: int, source: Lab32
) -> list[float] | None:
    """The values of one parameter, row-major, drawn in order; None for a norm's gain or
    shift (1 and 0, no draws)."""
    count = math.prod(shape)
    if ".norm_" in name or name.startswith("final_norm."):
        return None
    is_bias = name.endswith(".bias")
    is_embedding = name in EMBEDDING_NAMES.values()
    if config.init == "gpt2":
        if is_bias:
            return [0.0] * count
        std = GPT2_STD
        if name.endswith(RESIDUAL_PROJECTIONS):
            std = GPT2_STD / math.sqrt(2 * config.depth)
        return [source.normal() * std for _ in range(count)]
    if is_embedding:
        return [source.normal() for _ in range(count)]
    bound = 1.0 / math.sqrt(fan_in)
    return [(2.0 * source.uniform() - 1.0) * bound for _ in range(count)]


def _ordered(model: CopyTransformer) -> Iterator[tuple[str, torch.nn.Parameter, int]]:
    """(lab name, parameter, fan_in) in docs/lab.md's order: named_parameters() registers
    them in exactly that order (model.py constructs them so). fan_in: a Linear's input width,
    shared by its weight and its bias."""
    fan_in = 0
    for torch_name, parameter in model.named_parameters():
        name = lab_name(torch_name)
        if parameter.dim() == 2 and name.endswith(".weight"):
            fan_in = parameter.shape[1]
        yield name, parameter, fan_in


@torch.no_grad()
def initialise(model: CopyTransformer, config: LabConfig, seed: int) -> None:
    """Overwrite every parameter from lab32 stream WEIGHTS of `seed` (docs/lab.md,
    "Initialisation"); norms get gain 1 and shift 0 and draw nothing."""
    source = Lab32(seed, WEIGHTS)
    for name, parameter, fan_in in _ordered(model):
        values = _draws(config, name, tuple(parameter.shape), fan_in, source)
        if values is None:
            parameter.fill_(1.0 if name.endswith(".weight") else 0.0)
        else:
            parameter.copy_(torch.tensor(values, dtype=DTYPE).view(parameter.shape))


def initial_parameters(config: LabConfig, seed: int) -> dict[str, list[float]]:
    """Every parameter before the first update, by docs/lab.md's name, flattened row-major,
    in the documented order."""
    model = build_lab_model(config)
    initialise(model, config, seed)
    return {name: parameter.detach().reshape(-1).tolist() for name, parameter, _ in _ordered(model)}


def lab_batch(config: LabConfig, count: int, source: Lab32) -> CopyBatch:
    """`count` copy sequences drawn one after another from `source` (docs/lab.md, "The
    data"): per sequence, copy_length symbols below(vocab_size)."""
    length = config.copy_length
    symbols = [[source.below(config.vocab_size) for _ in range(length)] for _ in range(count)]
    sep = separator(config.vocab_size)
    inputs = [[*row, sep, *row[:-1]] for row in symbols]
    return CopyBatch(
        inputs=torch.tensor(inputs, dtype=torch.int64),  # (count, 2L)
        targets=torch.tensor(symbols, dtype=torch.int64),  # (count, L)
    )


def heldout(config: LabConfig) -> CopyBatch:
    """The lab's one held-out set: stream HELDOUT of the config's heldout_seed."""
    return lab_batch(config, config.heldout_size, Lab32(config.heldout_seed, HELDOUT))


def _loss(model: CopyTransformer, batch: CopyBatch, config: LabConfig) -> torch.Tensor:
    logits = copied_logits(model(batch.inputs), config.copy_length)  # (B, L, V+1)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1))


@torch.inference_mode()
def evaluate(model: CopyTransformer, data: CopyBatch, config: LabConfig) -> tuple[float, float]:
    """(held-out loss, per-token accuracy) over the copied half; argmax takes the first
    maximum on ties, as the JavaScript trainer does."""
    model.eval()
    logits = copied_logits(model(data.inputs), config.copy_length)  # (N, L, V+1)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), data.targets.reshape(-1))
    right = logits.argmax(dim=-1) == data.targets  # (N, L) bool
    model.train()
    return float(loss), float(right.double().mean())


class LabRun:
    """One lab run in progress: the model, its optimiser and the batch stream of a seed."""

    def __init__(self, config: LabConfig, seed: int) -> None:
        self.config = config
        self.run_config = config.run_config()
        self.model = build_lab_model(config)
        initialise(self.model, config, seed)
        self.optimizer = make_optimizer(self.model, self.run_config)
        self.batches = Lab32(seed, BATCHES)
        self.step = 0
        self.model.train()

    def update(self) -> float:
        """One update (docs/lab.md, "One update"); returns its training loss."""
        self.step += 1
        batch = lab_batch(self.config, self.config.batch_size, self.batches)
        loss = _loss(self.model, batch, self.config)
        self.optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        clip = self.config.grad_clip if self.config.grad_clip is not None else math.inf
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.step, self.run_config)
        self.optimizer.step()
        return loss.item()


def losses(config: LabConfig, seed: int, steps: int) -> list[float]:
    """The training loss of updates 1..steps (the parity tests' reference)."""
    with pinned_thread():
        run = LabRun(config, seed)
        return [run.update() for _ in range(steps)]


def train_lab_cell(config: LabConfig, seed: int, *, report: LabProgressFn | None = None) -> Run:
    """Train one lab run for config.steps updates: its curve (step 0, every eval_every and
    the last) and final held-out figures, as the grid keeps them."""
    with pinned_thread():
        return _trained_cell(config, seed, report)


def _trained_cell(config: LabConfig, seed: int, report: LabProgressFn | None) -> Run:
    started = time.perf_counter()
    run = LabRun(config, seed)
    data = heldout(config)
    loss0, accuracy0 = evaluate(run.model, data, config)
    curve = [RunPoint(step=0, train_loss=None, heldout_loss=loss0, heldout_accuracy=accuracy0)]
    window: list[float] = []
    last_accuracy: float | None = accuracy0
    for step in range(1, config.steps + 1):
        loss = run.update()
        window.append(loss)
        if step % config.eval_every == 0 or step == config.steps:
            heldout_loss, accuracy = evaluate(run.model, data, config)
            curve.append(
                RunPoint(
                    step=step,
                    train_loss=sum(window) / len(window),
                    heldout_loss=heldout_loss,
                    heldout_accuracy=accuracy,
                )
            )
            window = []
            last_accuracy = accuracy
        if report is not None and (step % REPORT_EVERY == 0 or step == config.steps):
            report(Progress(step, config.steps, loss, last_accuracy))
    # The cell: its settings, its curve, where it ended (the last point's held-out figures).
    last = curve[-1]
    return Run(
        config=config.settings(seed),
        curve=curve,
        final=RunFinal(
            step=last.step, heldout_loss=last.heldout_loss, heldout_accuracy=last.heldout_accuracy
        ),
        wall_s=round(time.perf_counter() - started, 3),
    )
