"""The model and its two switches, checked by structure and by what actually runs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from normdive.recording.format import RunConfig
from normdive.training.model import Block, block_grad_norms, build_model

TINY = RunConfig(depth=3, d_model=16, n_heads=2, copy_length=4, vocab_size=5)


def tokens(batch: int = 3, config: RunConfig = TINY) -> torch.Tensor:
    return torch.randint(
        config.vocab_size + 1,
        (batch, config.sequence_length),
        generator=torch.Generator().manual_seed(0),
    )


class CountLayerNorm(TorchFunctionMode):
    """Counts layer norm calls at the torch-function level, whatever module makes them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in (F.layer_norm, torch.layer_norm, torch.native_layer_norm):
            self.calls += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(("layernorm", "expected"), [(True, 2 * TINY.depth + 1), (False, 0)])
@pytest.mark.parametrize("residual", [True, False])
def test_layernorm_off_runs_no_normalisation(
    layernorm: bool, expected: int, residual: bool
) -> None:
    torch.manual_seed(0)
    model = build_model(TINY, layernorm=layernorm, residual=residual)
    hooked = []
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.register_forward_hook(lambda m, i, o: hooked.append(m))
    with CountLayerNorm() as counter:
        logits = model(tokens())
    assert logits.shape == (3, TINY.sequence_length, TINY.vocab_size + 1)
    assert len(hooked) == expected  # forward hooks on every LayerNorm module
    assert counter.calls == expected  # and no layer norm called from anywhere else


def zero_sublayers(block: Block) -> None:
    """Make both sublayers output exactly zero: their last projections become zero."""
    for linear in (block.attn.out, block.mlp.down):
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)


@pytest.mark.parametrize("layernorm", [True, False])
def test_residual_off_means_the_output_does_not_carry_the_input(layernorm: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 8, TINY.d_model, requires_grad=True)
    with_skip = Block(TINY.d_model, 2, 4, layernorm=layernorm, residual=True)
    without = Block(TINY.d_model, 2, 4, layernorm=layernorm, residual=False)
    zero_sublayers(with_skip)
    zero_sublayers(without)
    assert torch.equal(with_skip(x), x)  # the skip path carries the input through
    out = without(x)
    assert torch.equal(out, torch.zeros_like(x))  # nothing of the input is left
    (grad,) = torch.autograd.grad(out.sum(), x)
    assert torch.equal(grad, torch.zeros_like(x))


def test_the_model_is_causal() -> None:
    torch.manual_seed(0)
    model = build_model(TINY, layernorm=True, residual=True)
    seq = tokens(1)
    changed = seq.clone()
    changed[0, 5] = (changed[0, 5] + 1) % (TINY.vocab_size + 1)
    before, after = model(seq), model(changed)
    assert torch.allclose(before[:, :5], after[:, :5], atol=0, rtol=0)
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_gpt2_init() -> None:
    config = RunConfig(depth=8, d_model=128, n_heads=4)
    torch.manual_seed(0)
    model = build_model(config, layernorm=True, residual=True)
    scaled = 0.02 / math.sqrt(2 * 8)
    for name, p in model.named_parameters():
        if "norm" in name:
            assert torch.equal(
                p, torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p)
            )
        elif name.endswith("bias"):
            assert torch.equal(p, torch.zeros_like(p)), name
        elif name.endswith(("attn.out.weight", "mlp.down.weight")):
            assert abs(float(p.detach().std()) - scaled) < 0.15 * scaled, name
        else:
            assert abs(float(p.detach().std()) - 0.02) < 0.15 * 0.02, name


def test_pytorch_init_keeps_the_library_defaults() -> None:
    config = RunConfig(init="pytorch", d_model=64)
    torch.manual_seed(0)
    model = build_model(config, layernorm=True, residual=True)
    assert (
        abs(float(model.token_embedding.weight.detach().std()) - 1.0) < 0.1
    )  # nn.Embedding: N(0, 1)
    bound = 1 / math.sqrt(64)  # nn.Linear: uniform(+-1/sqrt(fan_in)), biases too
    assert float(model.blocks[0].attn.qkv.bias.detach().abs().max()) <= bound
    assert float(model.blocks[0].attn.qkv.bias.detach().abs().max()) > 0


def test_all_four_rows_of_a_seed_start_from_the_same_weights() -> None:
    states = []
    for layernorm, residual in [(True, True), (False, True), (True, False), (False, False)]:
        torch.manual_seed(7)
        states.append(build_model(TINY, layernorm=layernorm, residual=residual).state_dict())
    for state in states[1:]:
        for name, tensor in state.items():
            assert torch.equal(tensor, states[0][name]), name


def test_block_norms_see_gradients_far_below_float32_squares() -> None:
    torch.manual_seed(0)
    model = build_model(TINY, layernorm=False, residual=False)
    for p in model.parameters():
        p.grad = torch.full_like(p, 1e-25)  # squares (1e-50) underflow float32
    norms = block_grad_norms(model)
    assert len(norms) == TINY.depth
    assert all(n > 0 for n in norms)
    count = sum(p.numel() for p in model.blocks[0].parameters())
    assert norms[0] == pytest.approx(1e-25 * math.sqrt(count), rel=1e-5)
