"""The dual agent's orderer mask in one compiled call (dual_agent.paper.masks) is the mask of its
rules in numpy: the observation's legal actions, the livelock guard (jobs touched at this instant
stay untouched unless nothing else is left) and the work-conserving rule (no ``advance`` while a
legal row is a pending job)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from dual_agent.paper.masks import order_mask, order_mask_numpy  # noqa: E402
from dual_agent.paper.policy import work_conserving_mask  # noqa: E402


def _old_guard(mask: np.ndarray, ids: np.ndarray, touched: set) -> np.ndarray:
    """The policy's livelock guard as it was written before the compiled mask."""
    recent = ids == next(iter(touched))
    for job in touched:
        recent |= ids == job
    if recent.any():
        guarded = mask.copy()
        guarded[:-1] &= ~recent
        if guarded.any():
            return guarded
    return mask


def test_compiled_order_mask_is_the_numpy_rules():
    rng = np.random.default_rng(11)
    for trial in range(3000):
        rows = int(rng.integers(1, 9))
        action_mask = (rng.random(rows + 1) < 0.5).astype(np.int8)
        jobs = rng.random((rows, 4)).astype(np.float32)
        jobs[:, 1] = rng.random(rows) < 0.5                   # running (1) or pending (0) rows
        ids = rng.choice(np.arange(-1, 12), rows, replace=False).astype(np.int64)
        touched = set(rng.choice(np.arange(0, 14), int(rng.integers(0, 4)), replace=False).tolist())
        guard = bool(touched) and trial % 5 != 0
        work_conserving = trial % 3 != 0
        want = action_mask.astype(bool)
        if guard:
            want = _old_guard(want, ids, touched)
        if work_conserving:
            want = work_conserving_mask(want, jobs)
        touched_ids = np.array(sorted(touched), dtype=np.int64)
        got = order_mask(action_mask, jobs, ids, touched_ids, guard, work_conserving)
        assert got.dtype == np.bool_ and got.tolist() == want.tolist(), trial
        assert order_mask_numpy(action_mask, jobs, ids, touched_ids, guard, work_conserving).tolist() == want.tolist()
