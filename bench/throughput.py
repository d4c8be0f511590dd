"""Training-step throughput of the ablation's model against a PyTorch reference, and its
model FLOPs utilisation (MFU) against this machine's single-thread fp32 matmul peak.

One command, everything measured in the same run on one thread:

    .venv/bin/python bench/throughput.py            # the shipped recording's settings
    .venv/bin/python bench/throughput.py --help

The reference is the same stack built from torch.nn.TransformerEncoderLayer(norm_first=True,
batch_first=True) with a causal mask: same width, heads, GELU MLP (4x), depth, embeddings,
final norm and head, both components on, no dropout. Both run the same training step
(forward, loss on the copied half, backward, clip, AdamW) on the same batches, measured
alternately (ABBA) so drift in the machine's load hits both alike.

MFU counts the model's FLOPs the usual way (Chowdhery et al. 2022, PaLM, appendix B):
6 x (matmul parameters) per token plus 12 x depth x T x d_model per token for attention,
against the best fp32 matmul rate this process measures on one thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from normdive.recording.format import RunConfig
from normdive.training.model import GELU, build_model
from normdive.training.task import CopyBatch, copy_batch
from normdive.training.train import make_optimizer, pin_cpu, train_step

PEAK_SIZES = (512, 1024, 2048)  # square fp32 matmuls timed for the peak; the best one counts
PEAK_SECONDS = 1.0  # time spent per size and repeat


class Reference(nn.Module):
    """The same stack from PyTorch's own encoder layer, pre-LN, causal."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__()
        d = config.d_model
        self.token_embedding = nn.Embedding(config.vocab_size + 1, d)
        self.position_embedding = nn.Embedding(config.sequence_length, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d,
                config.n_heads,
                dim_feedforward=config.mlp_ratio * d,
                dropout=0.0,
                activation=partial(F.gelu, approximate=GELU),  # the same GELU as ours
                batch_first=True,
                norm_first=True,
            )
            for _ in range(config.depth)
        )
        self.final_norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size + 1)
        t = config.sequence_length
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(t))
        self.register_buffer("positions", torch.arange(t))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token_embedding(tokens) + self.position_embedding(self.positions)  # (B, T, D)
        for layer in self.layers:
            x = layer(x, src_mask=self.mask, is_causal=True)  # (B, T, D)
        return self.head(self.final_norm(x))  # (B, T, V)


def matmul_parameters(model: nn.Module) -> int:
    """Parameters that multiply activations: every weight matrix but the embedding tables."""
    return sum(
        p.numel()
        for name, p in model.named_parameters()
        if p.dim() == 2 and "embedding" not in name
    )


def flops_per_step(config: RunConfig, model: nn.Module) -> float:
    tokens = config.batch_size * config.sequence_length
    attention = 12 * config.depth * config.sequence_length * config.d_model
    return float(tokens * (6 * matmul_parameters(model) + attention))


def matmul_peak() -> tuple[float, int]:
    """(best single-thread fp32 GFLOP/s, the size that gave it)."""
    best = (0.0, 0)
    for n in PEAK_SIZES:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b  # warm
        flops = 2.0 * n**3
        for _ in range(3):
            count, start = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - start) < PEAK_SECONDS:
                a @ b
                count += 1
            best = max(best, (count * flops / elapsed / 1e9, n))
    return best


def make_step(model: nn.Module, config: RunConfig) -> Callable[[CopyBatch], None]:
    """The training step record-runs uses, for either model."""
    optimizer = make_optimizer(model, config)

    def step(batch: CopyBatch) -> None:
        train_step(model, optimizer, batch, config, step=config.warmup_steps)

    return step


def time_steps(step: Callable[[CopyBatch], None], batches: list[CopyBatch]) -> float:
    """Seconds per step over these batches."""
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return (time.perf_counter() - start) / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="ABBA rounds (default 6)")
    parser.add_argument("--steps", type=int, default=10, help="steps per timing (default 10)")
    parser.add_argument("--depth", type=int, default=None, help="default: the recording's")
    parser.add_argument("--d-model", type=int, default=None, help="default: the recording's")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the recording's")
    args = parser.parse_args()
    overrides = {"depth": args.depth, "d_model": args.d_model, "batch_size": args.batch_size}
    config = RunConfig.model_validate({k: v for k, v in overrides.items() if v is not None})
    pin_cpu()

    torch.manual_seed(0)
    ours = build_model(config, layernorm=True, residual=True)
    torch.manual_seed(0)
    reference = Reference(config)
    if matmul_parameters(ours) != matmul_parameters(reference):
        raise SystemExit("the two models differ in size; the comparison would be unfair")
    generator = torch.Generator().manual_seed(0)
    batches = [
        copy_batch(config.batch_size, config.copy_length, config.vocab_size, generator)
        for _ in range(args.steps)
    ]
    steps = {"ours": make_step(ours, config), "reference": make_step(reference, config)}
    for step in steps.values():  # warm-up: allocator, kernels, optimizer state
        time_steps(step, batches[:3])

    peak_before = matmul_peak()
    times: dict[str, list[float]] = {"ours": [], "reference": []}
    for round_ in range(args.rounds):
        order = ("ours", "reference") if round_ % 2 == 0 else ("reference", "ours")
        for name in order:
            times[name].append(time_steps(steps[name], batches))
    peak_after = matmul_peak()
    peak, peak_n = max(peak_before, peak_after)

    tokens = config.batch_size * config.sequence_length
    flops = flops_per_step(config, ours)
    print(
        f"config: depth {config.depth}, d_model {config.d_model}, heads {config.n_heads}, "
        f"batch {config.batch_size} x {config.sequence_length} tokens; torch "
        f"{torch.__version__}, 1 thread; load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"fp32 matmul peak, 1 thread: {peak:.1f} GFLOP/s (n={peak_n}; before "
        f"{peak_before[0]:.1f}, after {peak_after[0]:.1f})"
    )
    print(
        f"model FLOPs per step: {flops / 1e9:.3f} GFLOP ({matmul_parameters(ours)} matmul "
        f"parameters)"
    )
    print("| model | median s/step | tokens/s | GFLOP/s | MFU |")
    print("|---|---|---|---|---|")
    medians = {}
    for name, values in times.items():
        median = statistics.median(values)
        medians[name] = median
        print(
            f"| {name} | {median:.4f} | {tokens / median:,.0f} | {flops / median / 1e9:.1f} "
            f"| {100 * flops / median / 1e9 / peak:.1f} % |"
        )
    ratio = medians["reference"] / medians["ours"]
    print(
        f"throughput ours / reference: {ratio:.2f}x (goal >= 1.0x); per-round ratios: "
        + ", ".join(f"{r / o:.2f}" for o, r in zip(times["ours"], times["reference"], strict=True))
    )
    print(f"MFU ours: {100 * flops / medians['ours'] / 1e9 / peak:.1f} % (goal >= 30 %)")


if __name__ == "__main__":
    main()
