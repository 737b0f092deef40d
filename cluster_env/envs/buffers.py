"""The preallocated stacked arrays a vector env and its backend share.

Every array has a leading axis of ``num_envs``. The four feature arrays are views into one flat
``(N, F)`` float32 block laid out as :class:`cluster_env.envs.flat_layout.FlatLayout` (``jobs``,
``machines``, ``global``, ``placing``, ``action_mask`` as 0/1 floats): a backend that writes the
feature arrays fills the flat observations of the single-agent views at the same time, so the
SB3 adapter needs no flattening pass.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from cluster_env.envs.flat_layout import FEATURE_KEYS, FlatLayout


@dataclass
class Buffers:
    """Stacked per-env arrays (see the module docstring); ``K + R`` rows of jobs, ``M`` machines."""

    flat: np.ndarray            # (N, F) float32: the FlatLayout block the feature arrays view
    jobs: np.ndarray            # (N, K + R, 14) float32 view into flat
    machines: np.ndarray        # (N, M, 11) float32 view into flat
    global_: np.ndarray         # (N, 10) float32 view into flat ("global" in observations)
    placing: np.ndarray         # (N, 9) float32 view into flat
    order_pad: np.ndarray       # (N, A) int8: the orderer's mask, zero-padded to A
    place_pad: np.ndarray       # (N, A) int8: the placer's mask, zero-padded to A
    action_mask: np.ndarray     # (N, A) int8: the acting agent's mask (order_pad or place_pad by phase)
    phase: np.ndarray           # (N,) int8: 0 ORDER (the orderer acts), 1 PLACE (the placer acts)
    rewards: np.ndarray         # (N,) float64: the shared reward of the last step
    terminated: np.ndarray      # (N,) bool
    truncated: np.ndarray       # (N,) bool
    invalid: np.ndarray         # (N,) bool: a forbidden action was ignored or replaced in the last step
    played: np.ndarray          # (N,) int64: the action played in the last step (fallback: the replacement)
    time: np.ndarray            # (N,) float64: simulated seconds
    placing_job: np.ndarray     # (N,) int64: the job being placed, -1 in ORDER
    tick: np.ndarray            # (N,) bool: the epoch is a scheduling tick
    job_ids: np.ndarray         # (N, K + R) int64: the job id of each row of jobs, -1 for empty rows
    num_steps: np.ndarray       # (N,) int64: steps taken in the current episode
    n_order: int                # K + R + 1, the orderer's actions
    n_place: int                # M + 1, the placer's actions

    @property
    def order_mask(self) -> np.ndarray:
        """(N, K + R + 1) int8 view of the orderer's masks."""
        return self.order_pad[:, : self.n_order]

    @property
    def place_mask(self) -> np.ndarray:
        """(N, M + 1) int8 view of the placer's masks."""
        return self.place_pad[:, : self.n_place]

    def row_copy(self, i: int) -> dict[str, np.ndarray]:
        """Env ``i``'s observation arrays, copied (what a final observation keeps)."""
        return {"jobs": self.jobs[i].copy(), "machines": self.machines[i].copy(), "global": self.global_[i].copy(),
                "placing": self.placing[i].copy(), "action_mask": self.action_mask[i].copy(),
                "orderer_mask": self.order_mask[i].copy(), "placer_mask": self.place_mask[i].copy(),
                "phase": np.int8(self.phase[i])}


def allocate(num_envs: int, layout: FlatLayout, n_order: int, n_place: int) -> Buffers:
    """Zeroed buffers for ``num_envs`` envs of one scenario (``layout`` without an agent segment)."""
    n, a = int(num_envs), layout.shapes["action_mask"][0]
    flat = np.zeros((n, layout.size), dtype=np.float32)
    views = {k: flat[:, layout.slice(k)].reshape(n, *layout.shapes[k]) for k in FEATURE_KEYS}
    for k, v in views.items():      # views, never copies: writing them writes the flat block
        assert np.shares_memory(v, flat), k
    k_r = layout.shapes["jobs"][0]
    bufs = Buffers(
        flat=flat, jobs=views["jobs"], machines=views["machines"], global_=views["global"], placing=views["placing"],
        order_pad=np.zeros((n, a), np.int8), place_pad=np.zeros((n, a), np.int8),
        action_mask=np.zeros((n, a), np.int8), phase=np.zeros(n, np.int8),
        rewards=np.zeros(n), terminated=np.zeros(n, bool), truncated=np.zeros(n, bool), invalid=np.zeros(n, bool),
        played=np.zeros(n, np.int64), time=np.zeros(n), placing_job=np.full(n, -1, np.int64), tick=np.zeros(n, bool),
        job_ids=np.full((n, k_r), -1, np.int64), num_steps=np.zeros(n, np.int64),
        n_order=int(n_order), n_place=int(n_place))
    return bufs


BUFFER_FIELDS = tuple(f.name for f in fields(Buffers))

__all__ = ["BUFFER_FIELDS", "Buffers", "allocate"]
