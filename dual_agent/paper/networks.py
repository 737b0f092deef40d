"""The dual agent's networks: squeeze-and-communicate orderer, RWGP-fed placer, centralised critic.

All three work on batches of the environment's feature arrays (every row of a set is processed by
the same weights, so the networks fit any number of candidate jobs and machines):

* :class:`OrderingAgent`: a shared encoder embeds every candidate job; *squeeze* pools the valid
  rows (masked mean and max, permutation invariant) with the pooled machine embeddings and the
  global features into a summary; *communicate* sends the summary back to every job (a sigmoid
  gate on its embedding, then a head on [gated embedding, summary]) and to the placement agent.
  Logits: one per candidate row and one for ``advance``. Cost is linear in the candidates.
* :class:`PlacementAgent`: scores every machine from its features, the GP posterior mean and
  standard deviation of its speed, the job being placed and the orderer's summary, with a pooled
  context of all machines; a learned no-op logit completes the ``M + 1`` actions.
* :class:`CentralCritic`: the value of the global state (the pooled job and machine embeddings,
  the global and placing features: everything either agent sees), used only in training.

Shapes in comments: B batch, N candidate rows (K + R), M machines, H hidden width.
"""
from __future__ import annotations

import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch
from torch import nn

#: Extra per-machine inputs: the Random Walk GP's posterior mean and standard deviation.
GP_FEATURES = 2
#: Index of the acting agent: the ordering agent (ORDER phase) or the placement agent (PLACE phase).
ORDERER, PLACER = 0, 1
_NEG = -1e9  # logit of a forbidden action (finite: keeps softmax and entropy NaN-free)


def mlp(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, out))


def embed(inp: int, hidden: int) -> nn.Sequential:
    """One tanh layer: enough for features that are only pooled (and cheap over many machines)."""
    return nn.Sequential(nn.Linear(inp, hidden), nn.Tanh())


def masked_mean_max(x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[mean, max] over the set dimension of ``x`` (B, S, H) counting only ``valid`` (B, S) rows.

    An empty set pools to zeros.
    """
    w = valid.unsqueeze(-1).to(x.dtype)                                     # (B, S, 1)
    count = w.sum(dim=1).clamp(min=1.0)                                     # (B, 1)
    mean = (x * w).sum(dim=1) / count                                       # (B, H)
    big = torch.finfo(x.dtype).max
    mx = x.masked_fill(~valid.unsqueeze(-1), -big).amax(dim=1)              # (B, H)
    mx = torch.where(valid.any(dim=1, keepdim=True), mx, torch.zeros_like(mx))
    return torch.cat([mean, mx], dim=-1)                                    # (B, 2H)


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return logits.masked_fill(~mask, _NEG)


class OrderingAgent(nn.Module):
    """Which job next: squeeze the candidate set into a summary and communicate it back."""

    def __init__(self, job_dim: int, machine_dim: int, global_dim: int, hidden: int) -> None:
        super().__init__()
        self.job_encoder = mlp(job_dim, hidden, hidden)
        self.machine_encoder = embed(machine_dim + GP_FEATURES, hidden)
        self.squeeze = mlp(4 * hidden + global_dim, hidden, hidden)
        self.gate = nn.Linear(hidden, hidden)
        self.job_head = mlp(2 * hidden, hidden, 1)
        self.advance_head = mlp(hidden, hidden, 1)

    def summarise(self, jobs: torch.Tensor, machines: torch.Tensor, glob: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Job embeddings (B, N, H), valid rows (B, N) and the set summary (B, H)."""
        valid = jobs[..., 0] > 0.5                                          # (B, N): the "valid" feature
        emb = self.job_encoder(jobs)                                        # (B, N, H)
        m_emb = self.machine_encoder(machines)                              # (B, M, H)
        m_all = torch.ones(m_emb.shape[:2], dtype=torch.bool, device=m_emb.device)
        pooled = torch.cat([masked_mean_max(emb, valid), masked_mean_max(m_emb, m_all), glob], dim=-1)
        return emb, valid, self.squeeze(pooled)                             # summary (B, H)

    def forward(self, jobs: torch.Tensor, machines: torch.Tensor, glob: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, N + 1) over the candidates then ``advance``, and the summary (B, H)."""
        emb, _, summary = self.summarise(jobs, machines, glob)
        gated = emb * torch.sigmoid(self.gate(summary)).unsqueeze(1)        # communicate: (B, N, H)
        ctx = summary.unsqueeze(1).expand_as(gated)
        job_logits = self.job_head(torch.cat([gated, ctx], dim=-1)).squeeze(-1)   # (B, N)
        return torch.cat([job_logits, self.advance_head(summary)], dim=-1), summary


class PlacementAgent(nn.Module):
    """On which machine: a score per machine from its features, GP posterior, job and summary."""

    def __init__(self, machine_dim: int, placing_dim: int, hidden: int) -> None:
        super().__init__()
        self.encoder = mlp(machine_dim + GP_FEATURES + placing_dim + hidden, hidden, hidden)
        self.head = mlp(2 * hidden, hidden, 1)
        self.noop_logit = nn.Parameter(torch.zeros(1))

    def forward(self, machines: torch.Tensor, placing: torch.Tensor, summary: torch.Tensor) -> torch.Tensor:
        """Logits (B, M + 1): machines then the no-op. ``machines`` includes the GP columns."""
        b, m, _ = machines.shape
        job = torch.cat([placing, summary], dim=-1).unsqueeze(1).expand(b, m, -1)
        emb = self.encoder(torch.cat([machines, job], dim=-1))              # (B, M, H)
        ctx = emb.mean(dim=1, keepdim=True).expand_as(emb)                  # what the alternatives offer
        logits = self.head(torch.cat([emb, ctx], dim=-1)).squeeze(-1)       # (B, M)
        return torch.cat([logits, self.noop_logit.expand(b, 1)], dim=-1)


class CentralCritic(nn.Module):
    """MAPPO's centralised value function on the global state (training only)."""

    def __init__(self, job_dim: int, machine_dim: int, global_dim: int, placing_dim: int, hidden: int) -> None:
        super().__init__()
        self.job_encoder = embed(job_dim, hidden)
        self.machine_encoder = embed(machine_dim + GP_FEATURES, hidden)
        self.value = mlp(4 * hidden + global_dim + placing_dim, hidden, 1)

    def forward(self, jobs: torch.Tensor, machines: torch.Tensor, glob: torch.Tensor, placing: torch.Tensor
                ) -> torch.Tensor:
        valid = jobs[..., 0] > 0.5
        m_emb = self.machine_encoder(machines)
        m_all = torch.ones(m_emb.shape[:2], dtype=torch.bool, device=m_emb.device)
        x = torch.cat([masked_mean_max(self.job_encoder(jobs), valid), masked_mean_max(m_emb, m_all),
                       glob, placing], dim=-1)
        return self.value(x).squeeze(-1)                                    # (B,)


class DualAgentModel(nn.Module):
    """The three networks together, built from the feature widths and the hidden size."""

    def __init__(self, job_dim: int, machine_dim: int, global_dim: int, placing_dim: int, hidden: int) -> None:
        super().__init__()
        self.orderer = OrderingAgent(job_dim, machine_dim, global_dim, hidden)
        self.placer = PlacementAgent(machine_dim, placing_dim, hidden)
        self.critic = CentralCritic(job_dim, machine_dim, global_dim, placing_dim, hidden)

    def value(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.critic(batch["jobs"], batch["machines"], batch["global"], batch["placing"])


def network_logits(model: DualAgentModel, agent: int, batch: dict) -> torch.Tensor:
    """The acting agent's logits for a batch of steps of one phase: the orderer's (B, N + 1), or
    the placer's (B, M + 1) given the orderer's summary of the queue."""
    if agent == ORDERER:
        logits, _ = model.orderer(batch["jobs"], batch["machines"], batch["global"])
        return logits
    _, _, summary = model.orderer.summarise(batch["jobs"], batch["machines"], batch["global"])
    return model.placer(batch["machines"], batch["placing"], summary)
