"""Cheaper re-evaluation in the update: candidate rows packed to the front, steps batched by length.

A rollout stores every step's candidate rows at the observation's full width (``N = K + R``:
127 on philly-hetero-v2, pending rows first, running rows last), but a step holds about 44 valid
rows on average, spread over both ends. Every network that reads the rows (the orderer's encoder
and head, its summary for the placer, the critic's encoder) pools or scores only valid rows, so
the padding is pure cost: the update (PPO epochs, RLOO's re-evaluation, DAgger's cross-entropy)
spent most of its time on rows that change nothing.

:func:`packed_chunks` splits a batch of steps into chunks of similar row counts (sorted by count)
and moves each step's *kept* rows (valid, allowed by the mask, or named by the action or the
prior) to the front, stable, trimmed to the chunk's longest step. The networks see the same
rows in the same order, so the logits of kept rows, the summaries and the values are the padded
ones to float round-off (pooling sums fewer zeros); actions and prior indices that point at rows
are renumbered, ``advance`` (index ``N``) becomes the chunk's width. On the philly-hetero-v2
training windows this is about 62 rows per step instead of 127 with chunks of 64 steps
(``python benchmarks/bench_dagger_cost.py`` prints the update's cost).
"""
from __future__ import annotations

from typing import Iterator, Optional

import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch

#: Steps per chunk: small enough that a chunk's longest step is close to its others (sorted by
#: count), large enough that a chunk's matrix products are not dominated by per-call overhead.
CHUNK_STEPS = 64


def kept_rows(jobs: torch.Tensor, order_mask: Optional[torch.Tensor] = None,
              *indices: Optional[torch.Tensor]) -> torch.Tensor:
    """(B, N) rows a network's output can depend on: valid rows (feature 0), rows the order mask
    allows, and rows named by ``indices`` ((B,) row numbers; values outside ``0 .. N-1``, such as
    ``advance`` or -1, name none)."""
    keep = jobs[..., 0] > 0.5
    n = keep.shape[1]
    if order_mask is not None:
        keep = keep | order_mask[:, :n]
    for index in indices:
        if index is None:
            continue
        inside = (index >= 0) & (index < n)
        hit = torch.zeros_like(keep)
        hit[inside.nonzero().squeeze(1), index[inside]] = True
        keep = keep | hit
    return keep


def pack(keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather order (B, W) that puts each step's kept rows first (stable), W the most kept rows
    of any step (at least 1), and each original row's new position (B, N) (-1 for dropped rows)."""
    width = max(1, int(keep.sum(dim=1).max())) if keep.numel() else 1
    order = torch.argsort((~keep).to(torch.uint8), dim=1, stable=True)[:, :width]
    position = torch.where(keep, keep.to(torch.int64).cumsum(dim=1) - 1, torch.full_like(order[:, :1], -1))
    return order, position


def gather_rows(x: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``x`` (B, N, ...) with its rows taken in ``order`` (B, W)."""
    shape = order.shape + x.shape[2:]
    return x.gather(1, order.reshape(order.shape + (1,) * (x.dim() - 2)).expand(shape))


def renumber(index: torch.Tensor, position: torch.Tensor, width: int) -> torch.Tensor:
    """Row indices (B,) in the packed layout: a row's new position, ``N`` (advance) -> ``width``,
    anything else (-1: no prior) unchanged."""
    n = position.shape[1]
    inside = (index >= 0) & (index < n)
    moved = position.gather(1, index.clamp(0, n - 1).unsqueeze(1)).squeeze(1)
    out = torch.where(inside, moved, index)
    return torch.where(index == n, torch.full_like(index, width), out)


def packed_order_mask(order_mask: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """(B, W + 1): the packed rows' mask, then ``advance``'s."""
    n = order_mask.shape[1] - 1
    return torch.cat([order_mask[:, :n].gather(1, order), order_mask[:, n:]], dim=1)


def chunks_by_count(count: torch.Tensor, size: int = CHUNK_STEPS) -> Iterator[torch.Tensor]:
    """Index tensors of ``size`` steps each, steps sorted by ``count`` (stable: deterministic)."""
    ranked = torch.argsort(count, stable=True)
    for start in range(0, len(ranked), size):
        yield ranked[start:start + size]


def packed_chunks(jobs: torch.Tensor, order_mask: Optional[torch.Tensor] = None,
                  *indices: Optional[torch.Tensor], size: int = CHUNK_STEPS
                  ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """For each chunk of steps of similar kept-row counts: (step indices, gather order (b, W),
    new row positions (b, N)). See :func:`kept_rows` for what is kept."""
    keep = kept_rows(jobs, order_mask, *indices)
    for idx in chunks_by_count(keep.sum(dim=1), size):
        order, position = pack(keep[idx])
        yield idx, order, position


__all__ = ["CHUNK_STEPS", "chunks_by_count", "gather_rows", "kept_rows", "pack", "packed_chunks",
           "packed_order_mask", "renumber"]
