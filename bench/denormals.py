"""Why record-runs flushes denormals to zero: the "neither" row's update time with and
without it, alternately in one run on one thread.

    .venv/bin/python bench/denormals.py

Without residuals and norms the early blocks' activations and gradients shrink below
float32's normal range (1.2e-38); x86 handles such subnormal numbers in slow microcode.
The first updates are enough to see it: the stack is like that from initialisation.
"""

from __future__ import annotations

import os
import statistics
import time

import torch

from normdive.recording.format import RunConfig
from normdive.training.model import build_model
from normdive.training.task import copy_batch
from normdive.training.train import make_optimizer, train_step

ROUNDS = 4
STEPS = 10


def seconds_per_update(flush: bool) -> float:
    torch.set_flush_denormal(flush)
    config = RunConfig()
    torch.manual_seed(0)
    model = build_model(config, layernorm=False, residual=False)
    optimizer = make_optimizer(model, config)
    generator = torch.Generator().manual_seed(0)
    batches = [
        copy_batch(config.batch_size, config.copy_length, config.vocab_size, generator)
        for _ in range(STEPS + 1)
    ]
    train_step(model, optimizer, batches[0], config, 1)  # warm-up
    start = time.perf_counter()
    for i, batch in enumerate(batches[1:], start=2):
        train_step(model, optimizer, batch, config, i)
    return (time.perf_counter() - start) / STEPS


def main() -> None:
    torch.set_num_threads(1)
    times: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(ROUNDS):
        for flush in (True, False) if round_ % 2 == 0 else (False, True):
            times[flush].append(seconds_per_update(flush))
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"'neither' row, default config, 1 thread, load average {os.getloadavg()[0]:.2f}")
    print(f"denormals flushed to zero: {on:.3f} s per update")
    print(f"denormals kept:            {off:.3f} s per update")
    print(f"kept / flushed: {off / on:.2f}x the time")


if __name__ == "__main__":
    main()
