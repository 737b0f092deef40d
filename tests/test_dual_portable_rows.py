"""The portable actors compute each distinct row once (issue 26, item 4: the torch agent's
episode in seconds): the observation's padding rows once for all, the machine encoder only on the
machines whose row changed, the job encoder only on the candidate rows the last decision did not
see. The logits keep their bits (each row is mapped on its own)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dual_agent.paper import portable  # noqa: E402
from dual_agent.paper.policy import ORDERER, PLACER, DualAgentPolicy  # noqa: E402

torch.set_num_threads(1)


def _full(actors: portable.PortableActors, agent: int, feats: dict) -> np.ndarray:
    """The logits with every row computed (what the actors did before the savings)."""
    rows = (lambda jobs: (np.arange(len(jobs)), np.arange(len(jobs))))
    fresh = portable.PortableActors(actors._o, actors._p, actors._noop)
    original = portable._distinct_rows
    portable._distinct_rows = rows
    try:
        return fresh.logits(agent, feats)
    finally:
        portable._distinct_rows = original


def _feats(rng: np.random.Generator, valid: int, rows: int = 40, machines: int = 34) -> dict:
    """The actors' inputs: 14 job features (column 0: valid), 11 machine features + the GP's mean
    and deviation, 10 global and 9 placing features."""
    jobs = np.zeros((rows, 14), np.float32)
    jobs[:valid] = rng.random((valid, 14))
    jobs[:valid, 0] = 1.0
    return {"jobs": jobs, "machines": rng.random((machines, 13)).astype(np.float32),
            "global": rng.random(10).astype(np.float32), "placing": rng.random(9).astype(np.float32)}


def test_padding_rows_and_unchanged_machines_are_computed_once_with_the_same_bits(monkeypatch):
    policy = DualAgentPolicy.pretrained("philly-v0")
    actors = portable.portable_actors(policy.model)
    rng = np.random.default_rng(0)
    feats = _feats(rng, valid=5)
    portable._compile()
    real, real_mlp, rows_seen, job_rows = portable._dense, portable._mlp3, [], []

    def counting(x, wt, b, act):
        rows_seen.append(x.shape[0])
        return real(x, wt, b, act)

    def counting_mlp(x, *args):              # three layers in one call, each through ``counting``
        if x.shape[1] == feats["jobs"].shape[1]:
            job_rows.append(x.shape[0])        # the job encoder's input
        return real_mlp.py_func(x, *args)
    want = [_full(actors, agent, feats) for agent in (ORDERER, PLACER)]
    monkeypatch.setattr(portable, "_dense", counting)
    monkeypatch.setattr(portable, "_mlp3", counting_mlp)
    for name in ("_job_rows", "_summary", "_orderer_head", "_placer_head"):   # layers through the counters
        monkeypatch.setattr(portable, name, getattr(portable, name).py_func)
    got = actors.logits(ORDERER, feats)
    assert got.tobytes() == want[0].tobytes()
    # 5 valid candidates + 1 padding row through the job encoder and the head; 34 machines once.
    assert max(rows_seen) == 34 and rows_seen.count(6) >= 3 and 40 not in rows_seen
    rows_seen.clear()
    assert actors.logits(PLACER, feats).tobytes() == want[1].tobytes()
    assert rows_seen.count(34) == len(actors._p["encoder"]) + len(actors._p["head"])   # the placer's own rows
    # The same candidate rows again (the placer above): the job encoder computed them once.
    assert job_rows == [6]
    # One candidate row changes: the job encoder sees that row only, and the bits still agree.
    moved = {**feats, "jobs": feats["jobs"].copy()}
    moved["jobs"][2, 5] += 0.25
    want_moved = _full(actors, ORDERER, moved)
    job_rows.clear()
    assert actors.logits(ORDERER, moved).tobytes() == want_moved.tobytes()
    assert job_rows == [1]
    # One machine changes: the machine encoder sees that row only, and the bits still agree.
    feats2 = {**feats, "machines": feats["machines"].copy()}
    feats2["machines"][7] += 0.25
    want2 = _full(actors, ORDERER, feats2)
    rows_seen.clear()
    assert actors.logits(ORDERER, feats2).tobytes() == want2.tobytes()
    assert 1 in rows_seen and 34 not in rows_seen
    # Padding rows that differ (not the observation's zeros): every row is computed, same bits.
    odd = {**feats, "jobs": feats["jobs"].copy()}
    odd["jobs"][-1, 3] = 0.5
    want_odd = _full(actors, ORDERER, odd)
    rows_seen.clear()
    assert actors.logits(ORDERER, odd).tobytes() == want_odd.tobytes()
    assert 40 in rows_seen
