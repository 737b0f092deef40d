"""Fast inference of the dual agent's two actors for one decision at a time.

:func:`dual_agent.paper.networks.network_logits` calls the ``nn.Module`` tree: at a batch of one, with
hidden width 64, the modules' call machinery (``__call__``, hooks, ``nn.Sequential`` iteration,
attribute look-ups) costs about three times the matrix products themselves. :class:`FastActors`
runs the very same torch operations (``torch.nn.functional.linear`` on the modules' own weight
tensors, ``torch.tanh``, ``torch.sigmoid``, the same concatenations, reductions and shapes, in
the same order) without them, so its logits are the modules' bit for bit (tests check it on the
shipped checkpoints and fresh models).

Only the forward passes of :class:`dual_agent.paper.networks.OrderingAgent` and
:class:`dual_agent.paper.networks.PlacementAgent` as written today are mirrored. :func:`fast_actors`
returns None for a model whose structure differs (another layer layout, a subclass), and the
policy then calls the modules as before. Training (gradients, batches) keeps the modules.
"""
from __future__ import annotations

import weakref
from typing import Optional

import numpy as np
import dual_agent._torch  # noqa: F401  (without torch: an ImportError that names the extra)
import torch
from torch import nn
from torch.nn.functional import linear

from dual_agent.paper.networks import DualAgentModel, OrderingAgent, PlacementAgent, masked_mean_max, network_logits

__all__ = ["FastActors", "actor_logits", "actor_weights", "fast_actors", "forget"]

Layer = tuple[torch.Tensor, torch.Tensor]          # (weight, bias) of one nn.Linear
_INPUTS = ("jobs", "machines", "global", "placing")   # the feature arrays the actors read
_BIG = torch.finfo(torch.float32).max               # masked_mean_max's fill (float32 features)


MLP = ("linear", "tanh", "linear", "tanh", "linear")     # networks.mlp
EMBED = ("linear", "tanh")                               # networks.embed


def _linear_layers(module: nn.Module, pattern: tuple[str, ...]) -> Optional[tuple[Layer, ...]]:
    """The (weight, bias) pairs of the Linear layers of an ``nn.Sequential`` whose children are
    exactly ``pattern`` (Linear with a bias, Tanh), or None when ``module`` is anything else."""
    if type(module) is not nn.Sequential:
        return None
    children = list(module.children())
    if len(children) != len(pattern):
        return None
    layers = []
    for child, kind in zip(children, pattern):
        if kind == "tanh":
            if type(child) is not nn.Tanh:
                return None
        elif type(child) is nn.Linear and child.bias is not None:
            layers.append((child.weight, child.bias))
        else:
            return None
    return tuple(layers)


def _mlp(layers: tuple[Layer, ...], x: torch.Tensor) -> torch.Tensor:
    """``networks.mlp``'s forward: Linear, Tanh, Linear, Tanh, Linear."""
    (w1, b1), (w2, b2), (w3, b3) = layers
    return linear(torch.tanh(linear(torch.tanh(linear(x, w1, b1)), w2, b2)), w3, b3)


class FastActors:
    """The orderer's and the placer's logits of a :class:`DualAgentModel`, module by module the
    same operations as its ``forward`` methods, on the model's own parameters (in-place updates of
    the weights, e.g. ``load_state_dict``, are seen). Build it with :func:`fast_actors`."""

    def __init__(self, orderer: dict, placer: dict) -> None:
        self._o = orderer
        self._p = placer
        self._counts: dict[int, torch.Tensor] = {}

    def _summarise(self, jobs: np.ndarray, machines: torch.Tensor, glob: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """``OrderingAgent.summarise``: job embeddings and the set summary. ``jobs`` is the (1, N, F)
        array: the pooling's masks and counts are made from it in numpy (the same values the
        modules make with torch ops), and ``masked_mean_max`` is written out with the operations
        that remain once they are known (every machine row is valid)."""
        o = self._o
        jobs_t = torch.from_numpy(jobs)
        emb = _mlp(o["job_encoder"], jobs_t)                              # (1, N, H)
        (w, b), = o["machine_encoder"]
        m_emb = torch.tanh(linear(machines, w, b))                        # (1, M, H)
        valid = jobs[..., 0] > 0.5                                        # (1, N)
        n_valid = int(np.count_nonzero(valid))
        # masked_mean_max(emb, valid): weights 0/1 as float, count clamped to 1, -max fill.
        weight = torch.from_numpy(valid[..., None].astype(np.float32))
        count = torch.from_numpy(np.full((1, 1), max(n_valid, 1), dtype=np.float32))
        j_mean = (emb * weight).sum(dim=1) / count
        j_max = emb.masked_fill(torch.from_numpy(~valid[..., None]), -_BIG).amax(dim=1)
        if n_valid == 0:
            j_max = torch.zeros_like(j_max)
        # masked_mean_max(m_emb, all rows): x * 1 is x, the count is M, nothing is filled.
        m_count = self._count(m_emb.shape[1])
        m_mean = m_emb.sum(dim=1) / m_count
        m_max = m_emb.amax(dim=1)
        pooled = torch.cat([j_mean, j_max, m_mean, m_max, glob], dim=-1)
        return emb, _mlp(o["squeeze"], pooled)

    def ready(self) -> bool:
        """Whether the weights are still float32 on the CPU (``model.double()`` or ``.to(device)``
        change them in place): the path below assumes it."""
        weight = self._o["squeeze"][0][0]
        return weight.dtype is torch.float32 and weight.is_cpu

    def _count(self, m: int) -> torch.Tensor:
        count = self._counts.get(m)
        if count is None:
            count = self._counts[m] = torch.full((1, 1), float(m), dtype=torch.float32)
        return count

    def orderer(self, jobs: np.ndarray, machines: torch.Tensor, glob: torch.Tensor) -> torch.Tensor:
        """``OrderingAgent.forward``'s logits (B, N + 1)."""
        o = self._o
        emb, summary = self._summarise(jobs, machines, glob)
        (w, b), = o["gate"]
        gated = emb * torch.sigmoid(linear(summary, w, b)).unsqueeze(1)
        ctx = summary.unsqueeze(1).expand_as(gated)
        job_logits = _mlp(o["job_head"], torch.cat([gated, ctx], dim=-1)).squeeze(-1)
        return torch.cat([job_logits, _mlp(o["advance_head"], summary)], dim=-1)

    def placer(self, jobs: np.ndarray, machines: torch.Tensor, glob: torch.Tensor, placing: torch.Tensor
               ) -> torch.Tensor:
        """``PlacementAgent.forward``'s logits (B, M + 1) given the orderer's summary of the queue
        (what :func:`dual_agent.paper.policy.network_logits` computes for the placer)."""
        p = self._p
        _, summary = self._summarise(jobs, machines, glob)
        b, m, _ = machines.shape
        job = torch.cat([placing, summary], dim=-1).unsqueeze(1).expand(b, m, -1)
        emb = _mlp(p["encoder"], torch.cat([machines, job], dim=-1))
        ctx = emb.mean(dim=1, keepdim=True).expand_as(emb)
        logits = _mlp(p["head"], torch.cat([emb, ctx], dim=-1)).squeeze(-1)
        return torch.cat([logits, p["noop_logit"].expand(b, 1)], dim=-1)

    def logits(self, agent: int, feats: dict) -> np.ndarray:
        """One step's logits (float64, 1-D) of ``agent`` (0 orderer, 1 placer) from the policy's
        feature arrays (``DualAgentPolicy.features``): what ``network_logits`` gives on the batch
        of one, ``[0].double().numpy()``. Call it under ``torch.inference_mode()``."""
        jobs = _batch(feats["jobs"])
        machines = torch.from_numpy(_batch(feats["machines"]))
        glob = torch.from_numpy(_batch(feats["global"]))
        if agent == 0:
            out = self.orderer(jobs, machines, glob)
        else:
            out = self.placer(jobs, machines, glob, torch.from_numpy(_batch(feats["placing"])))
        return out.numpy()[0].astype(np.float64)


def _batch(a: np.ndarray) -> np.ndarray:
    """The batch of one the policy builds (``unsqueeze(0)`` of a contiguous array), in numpy."""
    a = np.ascontiguousarray(a)
    return a.reshape((1,) + a.shape)


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).unsqueeze(0)


def actor_weights(model: DualAgentModel) -> Optional[tuple[dict, dict]]:
    """The actors' parameters, ``({orderer part: layers}, {placer part: layers, "noop_logit": tensor})``
    with each part's (weight, bias) pairs, or None when the actors are not exactly the networks this
    module mirrors (another layer layout, a subclass, a forward hook)."""
    orderer, placer = getattr(model, "orderer", None), getattr(model, "placer", None)
    if type(orderer) is not OrderingAgent or type(placer) is not PlacementAgent:
        return None
    o = {"job_encoder": _linear_layers(orderer.job_encoder, MLP),
         "machine_encoder": _linear_layers(orderer.machine_encoder, EMBED),
         "squeeze": _linear_layers(orderer.squeeze, MLP),
         "job_head": _linear_layers(orderer.job_head, MLP),
         "advance_head": _linear_layers(orderer.advance_head, MLP)}
    gate = orderer.gate
    o["gate"] = ((gate.weight, gate.bias),) if type(gate) is nn.Linear and gate.bias is not None else None
    p = {"encoder": _linear_layers(placer.encoder, MLP), "head": _linear_layers(placer.head, MLP)}
    if any(layers is None for layers in list(o.values()) + list(p.values())):
        return None
    p["noop_logit"] = placer.noop_logit
    # Any module hook would run in the modules' path and not here.
    for module in (orderer, placer):
        for sub in module.modules():
            if sub._forward_hooks or sub._forward_pre_hooks:
                return None
    return o, p


def fast_actors(model: DualAgentModel) -> Optional[FastActors]:
    """:class:`FastActors` for ``model``, or None when its actors are not exactly the networks this
    module mirrors (then call the modules)."""
    weights = actor_weights(model)
    return None if weights is None else FastActors(*weights)


# Per model (weakly held: a dropped model frees its entry); None: the model is not mirrored.
_ACTORS: "weakref.WeakKeyDictionary[nn.Module, Optional[FastActors]]" = weakref.WeakKeyDictionary()


def actor_logits(model: DualAgentModel, agent: int, feats: dict) -> np.ndarray:
    """The acting agent's logits (float64, 1-D) for one step's features, bit for bit those of
    ``network_logits(model, agent, batch)[0].double().numpy()`` on the batch of one: through
    :class:`FastActors` when the model is mirrored, else through the modules. Call it under
    ``torch.inference_mode()``. The model's structure is read once per model object (replace a
    submodule and build a new model, or call :func:`forget`)."""
    try:
        fast = _ACTORS[model]
    except KeyError:
        fast = _ACTORS[model] = fast_actors(model)
    if fast is not None and fast.ready() and all(feats[k].dtype == np.float32 for k in _INPUTS):
        return fast.logits(agent, feats)
    return _module_logits(model, agent, feats)


def _module_logits(model: DualAgentModel, agent: int, feats: dict) -> np.ndarray:
    """The modules' path (what the policy called before this module existed)."""
    batch = {k: _tensor(feats[k]) for k in _INPUTS}
    return network_logits(model, agent, batch)[0].double().numpy()


def forget(model: DualAgentModel) -> None:
    """Drop what :func:`actor_logits` read of ``model``'s structure."""
    _ACTORS.pop(model, None)
