"""The ablation's stack: a small GPT-2-style pre-LN decoder (Radford et al. 2019, section 2.3)
with two switches, `layernorm` and `residual` (docs/recording.md, "The model and the task").
Shapes: B batch, T positions (2 x copy length), D d_model, H heads, E = D / H, V vocabulary."""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from normdive.recording.format import InitScheme, RunConfig, check_heads


class SelfAttention(nn.Module):
    """Causal multi-head self-attention with one fused projection for q, k and v."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        check_heads(d_model, n_heads)
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape  # (B, T, D)
        h = self.n_heads
        qkv = self.qkv(x).view(b, t, 3, h, d // h)  # (B, T, 3, H, E)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, E)
        # is_causal builds no mask tensor: each position sees itself and what came before.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, E)
        y = y.transpose(1, 2).reshape(b, t, d)  # (B, T, D)
        out: torch.Tensor = self.out(y)  # (B, T, D)
        return out


# The exact (erf) GELU (Hendrycks & Gimpel 2016): GPT-2's tanh form (openai/gpt-2 src/model.py)
# is within 1e-3 but took 3.4x as long here (bench/RESULTS.md, "Retired experiments": gelu.py).
GELU = "none"


class MLP(nn.Module):
    """The position-wise feed-forward sublayer: D -> ratio x D -> D with a GELU between."""

    def __init__(self, d_model: int, ratio: int) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, ratio * d_model)
        self.down = nn.Linear(ratio * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.gelu(self.up(x), approximate=GELU)  # (B, T, D) -> (B, T, 4D)
        out: torch.Tensor = self.down(hidden)  # (B, T, 4D) -> (B, T, D)
        return out


def _norm(d_model: int, on: bool) -> nn.Module:
    # Off means absent, not "a LayerNorm with eps huge": no normalisation may run at all.
    return nn.LayerNorm(d_model) if on else nn.Identity()


class Block(nn.Module):
    def __init__(
        self, d_model: int, n_heads: int, mlp_ratio: int, *, layernorm: bool, residual: bool
    ) -> None:
        super().__init__()
        self.residual = residual
        self.norm_attn = _norm(d_model, layernorm)
        self.attn = SelfAttention(d_model, n_heads)
        self.norm_mlp = _norm(d_model, layernorm)
        self.mlp = MLP(d_model, mlp_ratio)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        if self.residual:
            x = x + self.attn(self.norm_attn(x))
            x = x + self.mlp(self.norm_mlp(x))
        else:
            x = self.attn(self.norm_attn(x))
            x = self.mlp(self.norm_mlp(x))
        return x


class CopyTransformer(nn.Module):
    """Token and learned position embeddings, ``depth`` blocks, a final norm, a linear head."""

    def __init__(self, config: RunConfig, *, layernorm: bool, residual: bool) -> None:
        super().__init__()
        d = config.d_model
        self.token_embedding = nn.Embedding(config.vocab_size + 1, d)  # symbols + separator
        self.position_embedding = nn.Embedding(config.sequence_length, d)
        self.blocks = nn.ModuleList(
            Block(d, config.n_heads, config.mlp_ratio, layernorm=layernorm, residual=residual)
            for _ in range(config.depth)
        )
        self.final_norm = _norm(d, layernorm)
        self.head = nn.Linear(d, config.vocab_size + 1)
        self.register_buffer("positions", torch.arange(config.sequence_length), persistent=False)
        if config.init == "gpt2":
            gpt2_init(self, config.depth)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]  # tokens: (B, T) int64
        positions = cast(torch.Tensor, self.positions)[:t]  # (T,)
        x: torch.Tensor = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:  # x: (B, T, D) throughout
            x = block(x)
        logits: torch.Tensor = self.head(self.final_norm(x))  # (B, T, V)
        return logits


GPT2_STD = 0.02  # GPT-2's initialiser range (openai/gpt-2 model.py, and nanoGPT after it)


def gpt2_init(model: CopyTransformer, depth: int) -> None:
    """N(0, 0.02) weights, zero biases; the two projections into the residual stream scaled by
    1/sqrt(2 x depth), as each block adds two terms to it (Radford et al. 2019, section 2.3)."""
    scaled = GPT2_STD / math.sqrt(2 * depth)
    for name, parameter in model.named_parameters():
        if "norm" in name:
            continue  # LayerNorm gain 1, shift 0, as constructed
        if name.endswith(".bias"):
            nn.init.zeros_(parameter)
        elif name.endswith(("attn.out.weight", "mlp.down.weight")):
            nn.init.normal_(parameter, mean=0.0, std=scaled)
        else:
            nn.init.normal_(parameter, mean=0.0, std=GPT2_STD)


def build_model(config: RunConfig, *, layernorm: bool, residual: bool) -> CopyTransformer:
    """The row's model. The caller seeds torch first: both schemes draw from the global RNG,
    and building a norm draws nothing, so all four rows of a seed start from the same weights."""
    return CopyTransformer(config, layernorm=layernorm, residual=residual)


def block_grad_norms(model: CopyTransformer) -> list[float]:
    """The L2 norm of the gradient of each block's parameters, first block first."""
    norms = []
    for block in model.blocks:
        # In float64: a vanished gradient (1e-20) squared in float32 is 0; "tiny" is not "none".
        squares = [
            p.grad.detach().double().pow(2).sum() for p in block.parameters() if p.grad is not None
        ]
        norms.append(math.sqrt(float(torch.stack(squares).sum())) if squares else 0.0)
    return norms


__all__ = ["Block", "CopyTransformer", "InitScheme", "block_grad_norms", "build_model"]
