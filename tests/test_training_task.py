"""The copy task: symbols, separator, the same symbols; held-out set from its own generator."""

from __future__ import annotations

import torch

from normdive.training.task import copied_logits, copy_batch, heldout_set, separator


def test_a_batch_is_symbols_separator_copy() -> None:
    batch = copy_batch(8, 16, 16, torch.Generator().manual_seed(1))
    assert batch.inputs.shape == (8, 32) and batch.targets.shape == (8, 16)
    assert batch.inputs.dtype == torch.int64
    assert torch.equal(batch.inputs[:, :16], batch.targets)
    assert bool((batch.inputs[:, 16] == separator(16)).all())
    # The copied half as input is the targets shifted by one: position 16 + i predicts
    # targets[i], having seen targets[:i] after the separator.
    assert torch.equal(batch.inputs[:, 17:], batch.targets[:, :-1])
    assert int(batch.targets.min()) >= 0 and int(batch.targets.max()) < 16


def test_batches_come_from_the_generator_alone() -> None:
    one = copy_batch(4, 5, 7, torch.Generator().manual_seed(3))
    torch.manual_seed(12345)  # the global RNG plays no part
    two = copy_batch(4, 5, 7, torch.Generator().manual_seed(3))
    assert torch.equal(one.inputs, two.inputs)
    assert not torch.equal(one.inputs, copy_batch(4, 5, 7, torch.Generator().manual_seed(4)).inputs)


def test_the_heldout_set_is_fixed_by_its_seed() -> None:
    assert torch.equal(heldout_set(32, 16, 16, 9).inputs, heldout_set(32, 16, 16, 9).inputs)
    assert not torch.equal(heldout_set(32, 16, 16, 9).inputs, heldout_set(32, 16, 16, 10).inputs)


def test_only_the_copied_half_counts() -> None:
    logits = torch.arange(2 * 6 * 3, dtype=torch.float32).reshape(2, 6, 3)  # (B, 2L, V), L = 3
    assert torch.equal(copied_logits(logits, 3), logits[:, 3:, :])
