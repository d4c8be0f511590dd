"""The exact (erf) GELU against GPT-2's tanh approximation, forward plus backward, one thread,
at the MLP's activation size (batch 64 x 32 positions x 256 hidden units), alternately in
one run:

    .venv/bin/python bench/gelu.py
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.nn.functional as F

from normdive.recording.format import RunConfig

ROUNDS = 6
CALLS = 50


def main() -> None:
    torch.set_num_threads(1)
    config = RunConfig()
    shape = (config.batch_size, config.sequence_length, config.mlp_ratio * config.d_model)
    x, grad = torch.randn(shape), torch.randn(shape)
    times: dict[str, list[float]] = {"none": [], "tanh": []}
    for round_ in range(ROUNDS):
        for approximate in ("none", "tanh") if round_ % 2 == 0 else ("tanh", "none"):
            start = time.perf_counter()
            for _ in range(CALLS):
                F.gelu(x, approximate=approximate)
                torch.ops.aten.gelu_backward(grad, x, approximate=approximate)
            times[approximate].append((time.perf_counter() - start) / CALLS)
    exact, tanh = statistics.median(times["none"]), statistics.median(times["tanh"])
    print(f"shape {shape}, 1 thread, load average {os.getloadavg()[0]:.2f}")
    print(f"exact (erf) GELU, forward + backward: {1e3 * exact:.3f} ms")
    print(f"tanh approximation, forward + backward: {1e3 * tanh:.3f} ms")
    print(f"tanh / exact: {tanh / exact:.2f}x the time")
    largest = float((F.gelu(x) - F.gelu(x, approximate="tanh")).abs().max())
    print(f"largest difference between the two on these inputs: {largest:.2e}")


if __name__ == "__main__":
    main()
