"""Two single-thread processes against one two-thread process, on this machine's two cores.

One command, both arrangements measured alternately in the same run:

    .venv/bin/python bench/jobs.py

Each arrangement trains the recording's model (both components on, the record-runs step)
for the same number of steps per row and reports rows' steps per second summed over the
machine: what decides the recording's wall time, since its twelve rows are independent.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import torch

from normdive.recording.format import RunConfig
from normdive.training.model import build_model
from normdive.training.task import copy_batch
from normdive.training.train import make_optimizer, train_step

WARMUP_STEPS = 3


def steps_per_second(threads: int, steps: int) -> float:
    """Train `steps` updates on `threads` threads; updates per second (after a warm-up)."""
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    config = RunConfig()
    torch.manual_seed(0)
    model = build_model(config, layernorm=True, residual=True)
    optimizer = make_optimizer(model, config)
    generator = torch.Generator().manual_seed(0)
    batches = [
        copy_batch(config.batch_size, config.copy_length, config.vocab_size, generator)
        for _ in range(steps + WARMUP_STEPS)
    ]
    for i, batch in enumerate(batches[:WARMUP_STEPS], start=1):
        train_step(model, optimizer, batch, config, i)
    start = time.perf_counter()
    for i, batch in enumerate(batches[WARMUP_STEPS:], start=1):
        train_step(model, optimizer, batch, config, i)
    return steps / (time.perf_counter() - start)


def _child(steps: int, results: mp.Queue) -> None:  # type: ignore[type-arg]
    results.put(steps_per_second(1, steps))


def two_processes(steps: int) -> float:
    """Two single-thread processes at once: their summed updates per second."""
    context = mp.get_context("spawn")
    results: mp.Queue = context.Queue()  # type: ignore[type-arg]
    children = [context.Process(target=_child, args=(steps, results)) for _ in range(2)]
    for child in children:
        child.start()
    rates = [results.get() for _ in children]
    for child in children:
        child.join()
    return sum(rates)


def one_process(steps: int) -> float:
    """One two-thread process, in a fresh interpreter like the other arrangement."""
    context = mp.get_context("spawn")
    results: mp.Queue = context.Queue()  # type: ignore[type-arg]
    child = context.Process(target=_two_threads, args=(steps, results))
    child.start()
    rate = results.get()
    child.join()
    return float(rate)


def _two_threads(steps: int, results: mp.Queue) -> None:  # type: ignore[type-arg]
    results.put(steps_per_second(2, steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternations (default 3)")
    parser.add_argument("--steps", type=int, default=60, help="updates per measure (default 60)")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"2 processes x 1 thread": [], "1 process x 2 threads": []}
    for round_ in range(args.rounds):
        order = [two_processes, one_process] if round_ % 2 == 0 else [one_process, two_processes]
        for measure in order:
            name = "2 processes x 1 thread" if measure is two_processes else "1 process x 2 threads"
            rates[name].append(measure(args.steps))
    print(
        f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}"
    )
    print("| arrangement | median updates/s (machine total) | per round |")
    print("|---|---|---|")
    for name, values in rates.items():
        print(
            f"| {name} | {statistics.median(values):.2f} | "
            + ", ".join(f"{v:.2f}" for v in values)
            + " |"
        )
    ratio = statistics.median(rates["2 processes x 1 thread"]) / statistics.median(
        rates["1 process x 2 threads"]
    )
    print(f"two single-thread processes / one two-thread process: {ratio:.2f}x")


if __name__ == "__main__":
    main()
