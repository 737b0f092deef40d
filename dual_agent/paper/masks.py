"""The orderer's mask for one step in one compiled call (the dual agent's acting hot path).

:meth:`dual_agent.paper.policy.DualAgentPolicy.features` builds the orderer's mask from the
observation's ``action_mask`` with two of the agent's own rules: the livelock guard (a job started
or preempted at this instant may not be touched again in it, unless nothing else would be left)
and, with ``work_conserving``, no ``advance`` while a pending job can start. In numpy that is
about ten small array operations per step; :func:`order_mask` does the same in one loop and gives
the same mask (tested against the numpy rules, :func:`order_mask_numpy`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["order_mask", "order_mask_numpy"]


def order_mask_numpy(action_mask: np.ndarray, jobs: np.ndarray, job_ids: np.ndarray, touched: np.ndarray,
                     guard: bool, work_conserving: bool) -> np.ndarray:
    """The rules in numpy (the reference): ``action_mask`` as booleans; with ``guard``, the rows
    whose job id is in ``touched`` forbidden when something else stays legal; with
    ``work_conserving``, ``advance`` forbidden while a legal row is a pending job (column 1 < 0.5)."""
    mask = action_mask.astype(bool)
    if guard and len(touched):
        recent = np.isin(job_ids, touched)
        if recent.any():
            guarded = mask.copy()
            guarded[:-1] &= ~recent
            if guarded.any():
                mask = guarded
    if work_conserving and (mask[:-1] & (jobs[:, 1] < 0.5)).any():
        mask = mask.copy()
        mask[-1] = False
    return mask


def _order_mask(action_mask, jobs, job_ids, touched, guard, work_conserving):
    n = action_mask.shape[0]
    mask = np.empty(n, np.bool_)
    for i in range(n):
        mask[i] = action_mask[i] != 0
    if guard and touched.shape[0] > 0:
        guarded = mask.copy()
        recent, left = False, False
        for i in range(n - 1):
            for t in range(touched.shape[0]):
                if job_ids[i] == touched[t]:
                    recent = True
                    guarded[i] = False
                    break
        for i in range(n):
            left = left or guarded[i]
        if recent and left:
            mask = guarded
    if work_conserving:
        for i in range(n - 1):
            if mask[i] and jobs[i, 1] < 0.5:
                mask[n - 1] = False
                break
    return mask


_KERNEL: dict = {}


def order_mask(action_mask: np.ndarray, jobs: np.ndarray, job_ids: np.ndarray, touched: np.ndarray,
               guard: bool, work_conserving: bool) -> np.ndarray:
    """:func:`order_mask_numpy`'s mask (a new boolean array) by one compiled loop (numba, compiled
    on first use and cached on disk as the simulator's kernels)."""
    kernel = _KERNEL.get("order_mask")
    if kernel is None:
        import numba

        from cluster_env.core import kernels

        kernel = numba.njit(nogil=True)(_order_mask)
        kernels._attach_cache(kernel)
        _KERNEL["order_mask"] = kernel
    return kernel(action_mask, jobs, job_ids, touched, bool(guard), bool(work_conserving))
