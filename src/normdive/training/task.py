"""The copy task: L random symbols, a separator, the same L symbols; the model reads the first 2L
tokens and only the copied half counts. Chance on a copied token is 1 / vocab_size."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CopyBatch:
    inputs: torch.Tensor  # (B, 2L) int64: symbols, separator, copy without its last symbol
    targets: torch.Tensor  # (B, L) int64: the copied half, what positions L..2L-1 predict


def separator(vocab_size: int) -> int:
    """The separator's token id: one past the symbols 0..vocab_size-1."""
    return vocab_size


def copy_batch(
    batch_size: int, copy_length: int, vocab_size: int, generator: torch.Generator
) -> CopyBatch:
    """Draw a batch on the CPU from `generator` alone, so the data never depends on the
    device or on anything else that touched torch's global RNG."""
    symbols = torch.randint(vocab_size, (batch_size, copy_length), generator=generator)  # (B, L)
    sep = torch.full((batch_size, 1), separator(vocab_size), dtype=symbols.dtype)  # (B, 1)
    inputs = torch.cat([symbols, sep, symbols[:, :-1]], dim=1)  # (B, 2L)
    return CopyBatch(inputs=inputs, targets=symbols)


def heldout_set(size: int, copy_length: int, vocab_size: int, seed: int) -> CopyBatch:
    """The fixed held-out set, from its own generator: the same sequences for every row."""
    generator = torch.Generator().manual_seed(seed)
    return copy_batch(size, copy_length, vocab_size, generator)


def copied_logits(logits: torch.Tensor, copy_length: int) -> torch.Tensor:
    """The predictions that count: positions L..2L-1. (B, 2L, V) -> (B, L, V)."""
    return logits[:, copy_length:, :]
