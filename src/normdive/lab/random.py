"""lab32, the generator both lab trainers draw from: docs/lab.md, "The generator: lab32";
web/static/lab/random.js is its twin, tests/lab_vectors.json the draws both reproduce."""

from __future__ import annotations

import math

MASK32 = 0xFFFFFFFF
WEYL_STEP = 0x9E3779B9
# The lowbias32 finaliser's two multipliers (C. Wellons, "Prospecting for hash functions").
MIX_A = 0x7FEB352D
MIX_B = 0x846CA68B

# Stream ids: weights and batches use the run's seed, the held-out set the heldout_seed.
WEIGHTS, BATCHES, HELDOUT = 1, 2, 3

TWO_26 = float(1 << 26)
TWO_53 = float(1 << 53)
MAX_BELOW = 1 << 16  # below(n) takes 1 <= n <= 2^16: 53 bits leave its bias under 2^-37


def mix32(x: int) -> int:
    x &= MASK32
    x ^= x >> 16
    x = (x * MIX_A) & MASK32
    x ^= x >> 15
    x = (x * MIX_B) & MASK32
    x ^= x >> 16
    return x


class Lab32:
    __slots__ = ("state",)

    def __init__(self, seed: int, stream: int) -> None:
        if not 0 <= seed <= MASK32:
            raise ValueError(f"seed {seed} is outside 0..2^32-1")
        if not 0 <= stream <= MASK32:
            raise ValueError(f"stream {stream} is outside 0..2^32-1")
        self.state = mix32(seed ^ mix32(stream))

    def next_u32(self) -> int:
        self.state = (self.state + WEYL_STEP) & MASK32
        return mix32(self.state)

    def uniform(self) -> float:
        """In (0, 1]: 53 bits from two draws, centred; exactly 1.0 once in 2^53 draws."""
        a = self.next_u32() >> 5  # 27 bits
        b = self.next_u32() >> 6  # 26 bits
        return (a * TWO_26 + b + 0.5) / TWO_53

    def normal(self) -> float:
        """A standard normal by Box-Muller, cosine branch only (two uniforms per normal)."""
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    def below(self, n: int) -> int:
        """An integer in [0, n); capped at n - 1 since uniform() can be exactly 1.0."""
        if not 1 <= n <= MAX_BELOW:
            raise ValueError(f"below({n}): n must be from 1 to {MAX_BELOW}")
        return min(math.floor(self.uniform() * n), n - 1)


__all__ = ["BATCHES", "HELDOUT", "WEIGHTS", "Lab32", "mix32"]
