"""Training one row: one combination of the two switches at one seed, start to finish.

Deterministic on the CPU: the weights come from torch's global RNG seeded with the row's
seed (so all four rows of a seed start from the same weights: a norm draws nothing), the
batches from a generator of their own (so all four rows of a seed see the same batches), and
the held-out set from a third, fixed generator (the same sequences for every row and seed).
The caller pins the thread count; the same count gives the same numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from normdive.recording.format import (
    MAX_CURVE_POINTS,
    ROW_SWITCHES,
    BlockGradNorms,
    RowKey,
    RunConfig,
)
from normdive.recording.runs import Run, RunFinal, RunPoint, settings_at
from normdive.training.model import CopyTransformer, block_grad_norms, build_model
from normdive.training.task import CopyBatch, copied_logits, copy_batch, heldout_set

# The batches' generator is seeded apart from the weights' so the two streams never coincide.
DATA_SEED_OFFSET = 1_000_003
# How often (in updates) a running row tells the progress bar where it is.
REPORT_EVERY = 5


def pin_cpu() -> None:
    """The CPU settings every recorded row trains under (the same settings give the same
    numbers). One thread: see runner.py. Flush denormals to zero: without a residual path
    the activations and gradients of the early blocks shrink into float32's subnormal range
    (below 1.2e-38), where x86 arithmetic is many times slower (the "neither" row ran 5x
    slower per step without this); flushing changes only values already below that range."""
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)


@dataclass(frozen=True)
class Progress:
    step: int
    steps: int
    train_loss: float  # the latest update's loss
    heldout_accuracy: float | None  # the latest evaluation's, None before the first


ProgressFn = Callable[[Progress], None]


def grad_norm_steps(steps: int, points: int) -> list[int]:
    """Updates at which each block's gradient norm is recorded: roughly log-spaced from the
    first to the last, so the early collapse (within a few dozen updates, when the norms
    are on but the residuals are off) is sampled as densely as the long tail."""
    if steps == 1:
        return [1]
    chosen = {round(steps ** (i / (points - 1))) for i in range(points)}
    return sorted(chosen | {1, steps})


def thin(points: list[RunPoint], limit: int) -> list[RunPoint]:
    """At most `limit` points, evenly spread, the first and the last always kept: a long
    run's curve stays small in the file and the page draws it just the same."""
    if len(points) <= limit:
        return points
    last = len(points) - 1
    keep = sorted({round(i * last / (limit - 1)) for i in range(limit)})
    return [points[i] for i in keep]


def learning_rate(step: int, config: RunConfig) -> float:
    """Rate for update `step` (1-based): linear warm-up, then cosine decay to
    min_lr_ratio x peak at the last update (the schedule of GPT-2-style training)."""
    peak = config.learning_rate
    if step <= config.warmup_steps:
        return peak * step / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    floor = config.min_lr_ratio * peak
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def copy_loss(model: nn.Module, batch: CopyBatch, config: RunConfig) -> torch.Tensor:
    """Next-token cross-entropy on the copied half only (a scalar)."""
    logits = copied_logits(model(batch.inputs), config.copy_length)  # (B, L, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1))


@torch.inference_mode()
def evaluate(
    model: CopyTransformer, heldout: CopyBatch, config: RunConfig
) -> tuple[float, float, float]:
    """(loss, per-token accuracy, exact match) on the held-out set."""
    model.eval()
    logits = copied_logits(model(heldout.inputs), config.copy_length)  # (N, L, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), heldout.targets.reshape(-1))
    right = logits.argmax(dim=-1) == heldout.targets  # (N, L) bool
    model.train()
    return (
        float(loss),
        float(right.float().mean()),
        float(right.all(dim=1).float().mean()),
    )


def _to(batch: CopyBatch, device: torch.device) -> CopyBatch:
    return CopyBatch(inputs=batch.inputs.to(device), targets=batch.targets.to(device))


def make_optimizer(model: nn.Module, config: RunConfig) -> torch.optim.AdamW:
    """AdamW decaying the matrices and embeddings only, not biases or norm gains (as GPT-2
    training does). The fused kernel: one pass over the parameters instead of a dozen small
    ops per tensor (same update rule)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    keep = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": keep, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.learning_rate, fused=True)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: CopyBatch,
    config: RunConfig,
    step: int,
    *,
    inspect: Callable[[], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One update (1-based `step` sets the rate). `inspect` sees the fresh gradients before
    clipping. Returns (loss, global gradient norm before clipping), both detached."""
    loss = copy_loss(model, batch, config)
    optimizer.zero_grad(set_to_none=True)
    torch.autograd.backward(loss)
    if inspect is not None:
        inspect()
    clip = config.grad_clip if config.grad_clip is not None else math.inf
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(step, config)
    optimizer.step()
    return loss.detach(), total_norm.detach()


def train_row(
    config: RunConfig,
    key: RowKey,
    seed: int,
    *,
    device: str = "cpu",
    report: ProgressFn | None = None,
) -> Run:
    """Train one row for config.steps updates and return its run: its whole configuration,
    its curve and figures."""
    started = time.perf_counter()
    layernorm, residual = ROW_SWITCHES[key]
    where = torch.device(device)
    torch.manual_seed(seed)
    model = build_model(config, layernorm=layernorm, residual=residual).to(where)
    optimizer = make_optimizer(model, config)
    data = torch.Generator().manual_seed(DATA_SEED_OFFSET + seed)
    heldout = _to(
        heldout_set(
            config.heldout_size, config.copy_length, config.vocab_size, config.heldout_seed
        ),
        where,
    )
    record_blocks_at = set(grad_norm_steps(config.steps, config.grad_norm_points))

    loss0, acc0, exact0 = evaluate(model, heldout, config)
    curve = [
        RunPoint(
            step=0,
            train_loss=None,
            grad_norm=None,
            heldout_loss=loss0,
            heldout_accuracy=acc0,
            heldout_exact_match=exact0,
        )
    ]
    blocks: list[BlockGradNorms] = []
    window_loss: list[torch.Tensor] = []
    window_norm: list[torch.Tensor] = []
    last_accuracy: float | None = acc0
    model.train()
    for step in range(1, config.steps + 1):
        batch = _to(
            copy_batch(config.batch_size, config.copy_length, config.vocab_size, data), where
        )

        def inspect(at: int = step) -> None:
            blocks.append(BlockGradNorms(step=at, norms=block_grad_norms(model)))

        loss, total_norm = train_step(
            model,
            optimizer,
            batch,
            config,
            step,
            inspect=inspect if step in record_blocks_at else None,
        )
        window_loss.append(loss)
        window_norm.append(total_norm)

        if step % config.eval_every == 0 or step == config.steps:
            heldout_loss, accuracy, exact = evaluate(model, heldout, config)
            curve.append(
                RunPoint(
                    step=step,
                    train_loss=float(torch.stack(window_loss).mean()),
                    grad_norm=float(torch.stack(window_norm).mean()),
                    heldout_loss=heldout_loss,
                    heldout_accuracy=accuracy,
                    heldout_exact_match=exact,
                )
            )
            window_loss, window_norm = [], []
            last_accuracy = accuracy
        if report is not None and (step % REPORT_EVERY == 0 or step == config.steps):
            report(Progress(step, config.steps, loss.item(), last_accuracy))

    full = next((p.step for p in curve if p.heldout_accuracy == 1.0), None)
    curve = thin(curve, MAX_CURVE_POINTS)
    # Where the row ended: its last point's held-out figures, and when it first copied all.
    ended = curve[-1].model_dump(include=set(RunFinal.model_fields))
    final = RunFinal.model_validate({**ended, "first_step_at_full_accuracy": full})
    return Run(
        config=settings_at(config, layernorm=layernorm, residual=residual, seed=seed),
        curve=curve,
        block_grad_norms=blocks,
        final=final,
        wall_s=round(time.perf_counter() - started, 3),
    )
