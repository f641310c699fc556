"""Small reference modules for smoke-testing the lowering chain (no weights to ship)."""
from __future__ import annotations

import torch


class RMSNorm(torch.nn.Module):
    """Root-mean-square norm with a learned gain."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class AttentionBlock(torch.nn.Module):
    """rmsnorm → q, k, v → softmax(q kᵀ/√d) v → output projection + residual."""

    def __init__(self, dim: int = 32, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.norm = RMSNorm(dim)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))
        with torch.no_grad():
            self.norm.weight.copy_(torch.rand(dim, generator=gen) + 0.5)
            for lin in (self.q, self.k, self.v, self.o):
                lin.weight.copy_(torch.randn(dim, dim, generator=gen) / dim ** 0.5)
        self.scale = dim ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        attn = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        return x + self.o(torch.matmul(attn, v))

    @staticmethod
    def example_inputs(seed: int, seq: int = 8, dim: int = 32) -> tuple[torch.Tensor]:
        """A seeded input batch ``[1, seq, dim]``."""
        return (torch.randn(1, seq, dim, generator=torch.Generator().manual_seed(seed)),)
